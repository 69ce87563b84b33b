package kubelet

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/podruntime"
)

// verdict is the admission verdict on a pod.
type verdict int

const (
	unjudged verdict = iota // not looked at yet, or a deleted pod never run
	admitted
	rejected // Failed with the reason; never started
	pending  // an apiserver pod waiting for the Node to be known
)

// podRecord is what the kubelet knows of one pod besides its spec (the
// pod manager's), its phase (the pod worker's) and its status (the status
// manager's). It is made when the pod is first seen and dropped by
// teardownPod, the one place a pod is forgotten.
type podRecord struct {
	verdict verdict
	// failure is why Skiff failed a running pod (evicted, past its
	// deadline); nil while it has not.
	failure *podFailure
	// waiting are the errors keeping containers from starting, by name.
	waiting map[string]*podruntime.ContainerError
}

// podFailure is why Skiff itself failed a pod that was running: the
// status reason and message it ends with, and whether the pod was
// disrupted (an eviction adds the DisruptionTarget condition; an exceeded
// active deadline does not).
type podFailure struct {
	reason, message string
	disruption      bool
	at              metav1.Time // when Skiff failed it
}

// podRecords holds every pod's record.
type podRecords struct {
	mu sync.Mutex
	m  map[types.UID]*podRecord
}

func newPodRecords() *podRecords { return &podRecords{m: map[types.UID]*podRecord{}} }

// get returns a copy of the pod's record; the zero record if none.
func (r *podRecords) get(uid types.UID) podRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.m[uid]; rec != nil {
		return *rec
	}
	return podRecord{}
}

// update changes the pod's record, making it if new.
func (r *podRecords) update(uid types.UID, f func(*podRecord)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.m[uid]
	if rec == nil {
		rec = &podRecord{}
		r.m[uid] = rec
	}
	f(rec)
}

// with returns the pods whose record satisfies ok.
func (r *podRecords) with(ok func(podRecord) bool) []types.UID {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []types.UID
	for uid, rec := range r.m {
		if ok(*rec) {
			out = append(out, uid)
		}
	}
	return out
}

// drop forgets the pod's record.
func (r *podRecords) drop(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, uid)
}

// has reports whether the pod has a record.
func (r *podRecords) has(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.m[uid]
	return ok
}
