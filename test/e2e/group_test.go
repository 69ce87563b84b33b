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

// parallelOnly says the process runs the parallel group alone
// (SKIFF_E2E_GROUP=parallel): the tests on shared and private nodes,
// without the serial tests on the dev containerd and the long quiet ones,
// so that the group can be run many times over (-count) to find flakes.
func parallelOnly() bool { return os.Getenv(groupEnv) == "parallel" }

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
	if parallelOnly() {
		t.Skip("a long quiet test: SKIFF_E2E_GROUP=parallel runs the parallel group only")
	}
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
// this process's range. Numbers are handed out in order; once the range
// is used up (a run with -count), a number whose test has ended and whose
// node is gone is handed out again, the longest free first.
func nextPrivateID(t *testing.T) int32 {
	t.Helper()
	n := privateSeq.Add(1)
	if first, last := idRange(); n > last {
		freeIDs.mu.Lock()
		if len(freeIDs.ids) == 0 {
			freeIDs.mu.Unlock()
			t.Fatalf("more than %d private runtimes at once in this test process: their subnets would run out", last-first+1)
		}
		n, freeIDs.ids = freeIDs.ids[0], freeIDs.ids[1:]
		freeIDs.mu.Unlock()
	}
	// The first cleanup registered runs last: after the node's and the
	// runtime's own.
	t.Cleanup(func() {
		freeIDs.mu.Lock()
		freeIDs.ids = append(freeIDs.ids, n)
		freeIDs.mu.Unlock()
	})
	return n
}

// freeIDs are the numbers of private nodes whose tests have ended.
var freeIDs struct {
	mu  sync.Mutex
	ids []int32
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
