//go:build e2e

package e2e

import (
	"os"
	"strconv"
	"sync"
	"testing"
)

// Long quiet tests wait minutes on real timers (a token's rotation, a
// 10-minute stream) on nodes of their own. hack/e2e.sh runs them in a
// second test process (SKIFF_E2E_GROUP=long) beside the main one, which
// skips them, so their waits overlap the serial tests instead of closing
// the run. It finds them by the quietLong call that opens them.
const groupEnv = "SKIFF_E2E_GROUP"

// Private runtime and disk node numbers: each process has a range of its
// own, so neither takes the other's directories, bridges or subnets, nor
// removes them as leftovers.
const (
	mainFirstID, mainLastID = 1, 60
	longFirstID, longLastID = 61, 100
)

var quietLongTests sync.Map // test name -> true

func inLongGroup() bool { return os.Getenv(groupEnv) == "long" }

func init() {
	if inLongGroup() {
		privateSeq.Store(longFirstID - 1)
	}
}

// quietLong marks a long quiet test. It must open the test (hack/e2e.sh
// reads it there), and the test must run on nodes of its own
// (newPrivateNode, newPrivateClusterNode, newDiskNode).
func quietLong(t *testing.T) {
	t.Helper()
	quietLongTests.Store(t.Name(), true)
}

// checkGroup fails a test that the long group runs by mistake, or that
// would touch the dev containerd from it: the main process's serial tests
// own that.
func checkGroup(t *testing.T, devRuntime bool) {
	t.Helper()
	if !inLongGroup() {
		return
	}
	if _, ok := quietLongTests.Load(t.Name()); !ok {
		t.Fatalf("%s runs in the long group but does not open with quietLong", t.Name())
	}
	if devRuntime {
		t.Fatalf("%s is a long quiet test on the dev containerd: give it a node of its own", t.Name())
	}
}

// nextPrivateID is the number of a new private runtime or disk node, in
// this process's range.
func nextPrivateID(t *testing.T) int32 {
	t.Helper()
	n := privateSeq.Add(1)
	if first, last := idRange(); n > last {
		t.Fatalf("more than %d private runtimes in this test process: their subnets would run out", last-first+1)
	}
	return n
}

func idRange() (first, last int32) {
	if inLongGroup() {
		return longFirstID, longLastID
	}
	return mainFirstID, mainLastID
}

// ownLeftover says whether a leftover directory named name (a private
// runtime's or disk node's number) is in this process's range.
func ownLeftover(name string) bool {
	n, err := strconv.Atoi(name)
	first, last := idRange()
	return err == nil && int32(n) >= first && int32(n) <= last
}
