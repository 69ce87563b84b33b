//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// isSuiteRuntimeVersion tells whether a node's containerRuntimeVersion is
// the runtime the suite runs on: SKIFF_RUNTIME, as make e2e and
// hack/containerd.sh name it (containerd: Debian's 1.6, reporting
// "1.6.20~ds1"; containerd2: 2.x, reporting "v2.4.2" as upstream's builds).
func isSuiteRuntimeVersion(t *testing.T, v string) bool {
	t.Helper()
	var major string
	switch rt := os.Getenv("SKIFF_RUNTIME"); rt {
	case "", "containerd":
		major = "1."
	case "containerd2":
		major = "2."
	default:
		t.Fatalf("unknown SKIFF_RUNTIME %q (known: containerd, containerd2)", rt)
	}
	v, ok := strings.CutPrefix(v, "containerd://")
	return ok && strings.HasPrefix(strings.TrimPrefix(v, "v"), major)
}

// ctrBin is the ctr of the suite's runtime version: Debian's for 1.6, the
// one built beside containerd 2.x (hack/build-tools.sh) for 2.x.
func ctrBin(t *testing.T) string {
	t.Helper()
	if os.Getenv("SKIFF_RUNTIME") != "containerd2" {
		return "ctr"
	}
	bin, err := filepath.Abs("../../_output/containerd2/bin/ctr")
	must(t, err)
	return bin
}
