#!/usr/bin/env bash
# Lints Skiff's own module (not the tools modules under hack/tools/) and fails
# on any finding:
#
#   gofmt -l      every .go file must be gofmt'ed
#   go vet
#   staticcheck   pinned in hack/tools/staticcheck, built into _output/bin by
#                 hack/build-tools.sh
#   codelimits    hack/codelimits: no non-test .go file over 400 lines, no
#                 function over 80 (from `func` to its closing brace);
#                 generated files are exempt
#
# vet and staticcheck run with the e2e build tag: no file is excluded by it,
# so one run covers the end-to-end tests and everything else.
#
# Every step runs even when an earlier one failed, so one run lists all
# findings. Usage: hack/lint.sh
# Environment: STATICCHECK overrides the staticcheck binary.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PATH="/usr/local/go/bin:$PATH"
STATICCHECK=${STATICCHECK:-$ROOT/_output/bin/staticcheck}

failed=()

# The nested tools modules are other modules; _output is a link to build
# output. find does not follow links, so _output is never entered.
mapfile -t files < <(find . \( -path ./hack/tools -o -path ./.git \) -prune -o -name '*.go' -print)
unformatted=$(gofmt -l "${files[@]}")
if [[ -n "$unformatted" ]]; then
	echo "lint: gofmt: these files are not gofmt'ed (run gofmt -w on them):" >&2
	echo "$unformatted" >&2
	failed+=(gofmt)
fi

go vet -tags e2e ./... || failed+=("go vet")

if [[ ! -x "$STATICCHECK" ]]; then
	echo "lint: $STATICCHECK is missing: run hack/build-tools.sh staticcheck" >&2
	failed+=(staticcheck)
else
	"$STATICCHECK" -tags e2e ./... || failed+=(staticcheck)
fi

# Prints file:line, the length and the limit of each file or function over
# it. Built, not go run, whose "exit status 1" would only add noise.
bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
if go build -o "$bindir/codelimits" ./hack/codelimits; then
	"$bindir/codelimits" . || failed+=(codelimits)
else
	failed+=(codelimits)
fi

if [[ ${#failed[@]} -gt 0 ]]; then
	echo "lint: failed: ${failed[*]}" >&2
	exit 1
fi
echo "lint: gofmt, go vet, staticcheck and codelimits found nothing"
