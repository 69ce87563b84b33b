package podruntime

import (
	"testing"
	"time"
)

// TestCrashBackOffFollowsConfig: the restart delay starts at the configured
// first delay and doubles up to the configured cap.
func TestCrashBackOffFollowsConfig(t *testing.T) {
	for _, tc := range []struct {
		initial, max time.Duration
		want         []time.Duration
	}{
		{0, 0, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}},
		{10 * time.Second, 30 * time.Second, []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second}},
		{2 * time.Second, 2 * time.Second, []time.Duration{2 * time.Second, 2 * time.Second}},
	} {
		m := New(Config{CrashBackOffInitial: tc.initial, CrashBackOffMax: tc.max})
		now := time.Now()
		for i, want := range tc.want {
			m.crashBackOff.Next("c", now)
			if got := m.crashBackOff.Get("c"); got != want {
				t.Errorf("initial %v max %v: restart %d waits %v, want %v", tc.initial, tc.max, i+1, got, want)
			}
		}
	}
}
