package podsource

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// FirstSeen remembers when a source first saw each pod UID, for the
// config.seen annotation. The time is outside the UID hash and stays put
// while the pod exists, so unchanged sources give identical snapshots.
// The zero value is ready to use; it is not safe for concurrent use.
type FirstSeen struct {
	times map[types.UID]string
}

// Stamp sets the annotation on each pod (which must have annotations),
// in place, and forgets UIDs that are no longer there.
func (f *FirstSeen) Stamp(pods []*v1.Pod, now time.Time) {
	times := make(map[types.UID]string, len(pods))
	for _, pod := range pods {
		t, ok := f.times[pod.UID]
		if !ok {
			t = now.UTC().Format(time.RFC3339Nano)
		}
		times[pod.UID] = t
		pod.Annotations[ConfigSeenAnnotation] = t
	}
	f.times = times
}
