#!/usr/bin/env bash
# Runs the end-to-end tests for `make e2e`, inside its lock, on the dev
# containerd of SKIFF_RUNTIME's version. $1 selects tests as go test's -run
# does. Without it (or with ".", make's default) the whole suite runs, as
# two go test processes side by side: the long quiet tests (those that
# open with quietLong(t); see test/e2e/group_test.go) in one, everything
# else in the other, so that the long tests' minutes of waiting overlap
# the serial tests instead of closing the run.
#
# Environment: E2E_PARALLEL (go test -parallel), E2EFLAGS (more go test
# flags), SKIFF_TEST_DEADLINE, SKIFF_TEST_TIMES and SKIFF_TEST_FAILURES
# (bin/testreport's -deadline, -times and -failures).
set -uo pipefail
cd "$(dirname "$0")/.."

run=${1:-}
[[ $run == . ]] && run=
runtime=${SKIFF_RUNTIME:-containerd}
report=(bin/testreport -deadline "${SKIFF_TEST_DEADLINE:-0}" -times "${SKIFF_TEST_TIMES:-}" -failures "${SKIFF_TEST_FAILURES:-}" -label "$runtime" --)
# shellcheck disable=SC2206 # E2EFLAGS is a list of flags
gotest=(go test -json -tags e2e -count=1 -p 1 -parallel "${E2E_PARALLEL:-8}" -timeout 80m ${E2EFLAGS:-})

# longTests prints the long quiet tests as a -run pattern.
longTests() {
	awk '/^func Test[A-Za-z0-9_]*\(t \*testing\.T\) \{$/ { name = substr($2, 1, index($2, "(") - 1); next }
		/^\tquietLong\(t\)$/ { print name }' test/e2e/*_test.go | paste -sd'|'
}

# Checked again here, inside the lock: a run that queued behind another
# may find make up's Skiff started meanwhile.
if hack/skiff.sh running; then
	echo "make up's Skiff is running on the dev containerd; two kubelets on one containerd remove each other's pods: run 'make down' first" >&2
	exit 1
fi
hack/containerd.sh start || exit
if [[ -n $run ]]; then
	"${report[@]}" "${gotest[@]}" -run "$run" ./test/e2e/...
	rc=$?
else
	long=$(longTests)
	longLog=$(mktemp)
	# Each process takes ports of its own share (test/ports), so neither
	# hands out a port the other did.
	SKIFF_PORTS_SHARE=1/2 SKIFF_E2E_GROUP=long "${report[@]}" "${gotest[@]}" -run "^($long)\$" ./test/e2e >"$longLog" 2>&1 &
	longPid=$!
	SKIFF_PORTS_SHARE=0/2 "${report[@]}" "${gotest[@]}" -skip "^($long)\$" ./test/e2e/...
	rc=$?
	wait "$longPid"
	longRC=$?
	echo "=== the long quiet tests, run beside the others: $long"
	cat "$longLog"
	rm -f "$longLog"
	((rc == 0)) && rc=$longRC
fi
# The dev containerd rests on the default version (see the Makefile).
if [[ $runtime != containerd ]]; then hack/containerd.sh stop; fi
exit "$rc"
