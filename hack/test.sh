#!/usr/bin/env bash
# make test: every phase in turn, each timed against its budget, all under
# one hard cap. A phase over its budget is reported; past the cap the run
# stops with a message naming the phase and (for end-to-end runs) the
# tests still running and the slowest ones, instead of being killed from
# outside without a word.
#
# Usage: hack/test.sh
# Environment (set by the Makefile):
#   TEST_CAP_MINUTES       the hard cap for the whole run
#   TEST_BUDGETS           "phase=minutes ..." for each phase
#   E2E_RUNTIMES           the runtimes the e2e suite runs on, in turn
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PATH="/usr/local/go/bin:$PATH"

CAP=${TEST_CAP_MINUTES:?}
declare -A budget
for b in ${TEST_BUDGETS:?}; do budget[${b%%=*}]=${b#*=}; done

began=$(date +%s)
export SKIFF_TEST_DEADLINE=$((began + CAP * 60))
# Each e2e run appends its tests' times here (hack/testreport -times).
export SKIFF_TEST_TIMES=$ROOT/_output/test-times.txt
# and each failed e2e test's own messages here (-failures), printed again
# at the end, where a long run's output is read first.
export SKIFF_TEST_FAILURES=$ROOT/_output/test-failures.txt
mkdir -p "$ROOT/_output"
: >"$SKIFF_TEST_TIMES"
: >"$SKIFF_TEST_FAILURES"

summary=()
failed=()

mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# phase NAME CMD...: runs CMD within what is left of the cap.
phase() {
	local name=$1 b=${budget[$1]:?no budget for phase $1}
	shift
	local start left rc took verdict
	start=$(date +%s)
	left=$((SKIFF_TEST_DEADLINE - start))
	if ((left <= 0)); then
		stop_at_cap "$name"
	fi
	echo "=== phase $name (budget ${b}m, $(mmss "$left") left of the ${CAP}m cap)"
	# The e2e phases stop themselves at the cap (testreport); the grace
	# here only catches a phase that does not.
	timeout -k 30 $((left + 60)) "$@"
	rc=$?
	took=$(($(date +%s) - start))
	verdict=ok
	((rc == 0)) || verdict="FAILED (exit $rc)"
	((took <= b * 60)) || verdict="$verdict, OVER BUDGET"
	summary+=("$(printf '%-18s %8s of %3dm  %3d%%  %s' "$name" "$(mmss "$took")" "$b" $((took * 100 / (b * 60))) "$verdict")")
	echo "=== phase $name: $(mmss "$took") of its ${b}m budget: $verdict"
	((rc == 0)) || failed+=("$name")
	if (($(date +%s) >= SKIFF_TEST_DEADLINE)); then
		stop_at_cap "$name"
	fi
	return $rc
}

print_summary() {
	local total=$(($(date +%s) - began))
	echo
	echo "make test: time per phase (budget used):"
	printf '  %s\n' "${summary[@]}"
	echo "  total $(mmss "$total") of the ${CAP}m cap ($((total * 100 / (CAP * 60)))%), $(nproc) cores"
	if [[ -s $SKIFF_TEST_TIMES ]]; then
		echo "slowest end-to-end tests of the whole run (seconds, per runtime run):"
		sort -k2 -rn "$SKIFF_TEST_TIMES" | head -15 | sed 's/^/  /'
	fi
	if [[ -s $SKIFF_TEST_FAILURES ]]; then
		echo "why the end-to-end tests failed (their t.Error and t.Fatal messages; whole output above):"
		sed 's/^/  /' "$SKIFF_TEST_FAILURES"
	fi
}

stop_at_cap() {
	print_summary
	echo "make test: STOPPED: the ${CAP}m time cap (TEST_CAP_MINUTES in the Makefile) was reached in phase $1." >&2
	echo "make test: make the slowest tests above faster, or run more of them in parallel (docs/development.md)." >&2
	exit 124
}

# The phases that everything after them needs stop the run when they fail.
phase tools make --no-print-directory deps tools build || { print_summary; exit 1; }
phase lint hack/lint.sh || { print_summary; exit 1; }
phase unit go test ./... || { print_summary; exit 1; }
phase fuzz make --no-print-directory fuzz || { print_summary; exit 1; }
# The cluster package's own tests need no runtime: once is enough.
phase cluster go test -tags e2e -count=1 ./test/cluster/...
# Every e2e run goes ahead even if an earlier one failed.
for rt in ${E2E_RUNTIMES:?}; do
	phase "e2e-$rt" make --no-print-directory e2e SKIFF_RUNTIME="$rt"
done

print_summary
if ((${#failed[@]} > 0)); then
	echo "make test: FAILED in: ${failed[*]}" >&2
	exit 1
fi
echo "make test: all phases passed"
