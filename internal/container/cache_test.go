package container

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// waitTimeout bounds every wait for something that must happen. Tests that
// check something does NOT happen use the much shorter notYet.
const (
	waitTimeout = 5 * time.Second
	notYet      = 50 * time.Millisecond
)

type getResult struct {
	st  *PodStatus
	err error
}

// getNewerThan runs GetNewerThan in a goroutine and returns its result channel.
func getNewerThan(ctx context.Context, c *Cache, uid types.UID, min time.Time) <-chan getResult {
	ch := make(chan getResult, 1)
	go func() {
		st, err := c.GetNewerThan(ctx, uid, min)
		ch <- getResult{st, err}
	}()
	return ch
}

func mustNotReturn(t *testing.T, ch <-chan getResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("GetNewerThan returned early: %+v", r)
	case <-time.After(notYet):
	}
}

func mustReturn(t *testing.T, ch <-chan getResult) getResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitTimeout):
		t.Fatal("GetNewerThan did not return")
		return getResult{}
	}
}

func TestCacheGetUnknownPod(t *testing.T) {
	c := NewCache()
	st, err := c.Get("nope")
	if err != nil {
		t.Fatalf("Get: unexpected error %v", err)
	}
	if st == nil || st.ID != "nope" || len(st.Containers) != 0 || len(st.Sandboxes) != 0 || len(st.IPs) != 0 {
		t.Fatalf("Get of an unknown pod = %+v, want an empty status with its ID", st)
	}
}

func TestCacheSetGet(t *testing.T) {
	c := NewCache()
	t0 := time.Now()
	boom := errors.New("boom")
	c.Set("a", &PodStatus{ID: "a", Name: "first"}, nil, t0)
	c.Set("b", nil, boom, t0)

	if st, err := c.Get("a"); err != nil || st.Name != "first" {
		t.Errorf("Get(a) = %+v, %v; want first, nil", st, err)
	}
	if st, err := c.Get("b"); !errors.Is(err, boom) || st != nil {
		t.Errorf("Get(b) = %+v, %v; want nil, boom", st, err)
	}

	c.Delete("a")
	if st, err := c.Get("a"); err != nil || st.Name != "" || st.ID != "a" {
		t.Errorf("Get(a) after Delete = %+v, %v; want empty status", st, err)
	}
}

func TestCacheSetIgnoresOlderObservations(t *testing.T) {
	t0 := time.Now()
	tests := []struct {
		name   string
		second time.Time
		want   string
	}{
		{"older is ignored", t0.Add(-time.Second), "first"},
		{"newer replaces", t0.Add(time.Second), "second"},
		{"same time replaces", t0, "second"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			c.Set("a", &PodStatus{ID: "a", Name: "first"}, nil, t0)
			c.Set("a", &PodStatus{ID: "a", Name: "second"}, nil, tt.second)
			st, _ := c.Get("a")
			if st.Name != tt.want {
				t.Fatalf("Get = %q, want %q", st.Name, tt.want)
			}
		})
	}
}

func TestCacheGetNewerThanReturnsAtOnceWhenFresh(t *testing.T) {
	t0 := time.Now()
	tests := []struct {
		name  string
		setup func(c *Cache)
		want  string // status name; "" for the empty status
	}{
		{"own entry newer", func(c *Cache) { c.Set("a", &PodStatus{ID: "a", Name: "own"}, nil, t0.Add(time.Millisecond)) }, "own"},
		{"global time newer, no entry", func(c *Cache) { c.UpdateTime(t0.Add(time.Millisecond)) }, ""},
		{"global time newer, older entry", func(c *Cache) {
			c.Set("a", &PodStatus{ID: "a", Name: "old"}, nil, t0.Add(-time.Second))
			c.UpdateTime(t0.Add(time.Millisecond))
		}, "old"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			tt.setup(c)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			st, err := c.GetNewerThan(ctx, "a", t0)
			if err != nil {
				t.Fatalf("GetNewerThan: %v", err)
			}
			if st.Name != tt.want || st.ID != "a" {
				t.Fatalf("GetNewerThan = %+v, want name %q", st, tt.want)
			}
		})
	}
}

func TestCacheGetNewerThanBlocks(t *testing.T) {
	t0 := time.Now()
	tests := []struct {
		name string
		// stale writes that must not release the waiter
		stale func(c *Cache)
		// the write that releases it
		fresh func(c *Cache)
		want  string
	}{
		{
			name: "released by Set newer than min",
			stale: func(c *Cache) {
				c.Set("a", &PodStatus{ID: "a", Name: "stale"}, nil, t0)   // not After(min)
				c.Set("b", &PodStatus{ID: "b"}, nil, t0.Add(time.Second)) // another pod
				c.UpdateTime(t0)                                          // not After(min)
			},
			fresh: func(c *Cache) { c.Set("a", &PodStatus{ID: "a", Name: "fresh"}, nil, t0.Add(time.Millisecond)) },
			want:  "fresh",
		},
		{
			name: "released by UpdateTime newer than min",
			stale: func(c *Cache) {
				c.Set("a", &PodStatus{ID: "a", Name: "kept"}, nil, t0.Add(-time.Second))
				c.UpdateTime(t0.Add(-time.Millisecond))
			},
			fresh: func(c *Cache) { c.UpdateTime(t0.Add(time.Millisecond)) },
			want:  "kept",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			ch := getNewerThan(ctx, c, "a", t0)
			mustNotReturn(t, ch)
			tt.stale(c)
			mustNotReturn(t, ch)
			tt.fresh(c)
			r := mustReturn(t, ch)
			if r.err != nil {
				t.Fatalf("GetNewerThan: %v", r.err)
			}
			if r.st.Name != tt.want {
				t.Fatalf("GetNewerThan = %+v, want name %q", r.st, tt.want)
			}
		})
	}
}

func TestCacheGetNewerThanReturnsCachedError(t *testing.T) {
	c := NewCache()
	t0 := time.Now()
	boom := errors.New("boom")
	ch := getNewerThan(context.Background(), c, "a", t0)
	c.Set("a", nil, boom, t0.Add(time.Millisecond))
	if r := mustReturn(t, ch); !errors.Is(r.err, boom) {
		t.Fatalf("GetNewerThan error = %v, want boom", r.err)
	}
}

func TestCacheGetNewerThanContextCancel(t *testing.T) {
	c := NewCache()
	ctx, cancel := context.WithCancel(context.Background())
	ch := getNewerThan(ctx, c, "a", time.Now())
	mustNotReturn(t, ch)
	cancel()
	r := mustReturn(t, ch)
	if !errors.Is(r.err, context.Canceled) || r.st != nil {
		t.Fatalf("GetNewerThan after cancel = %+v, %v; want nil, context.Canceled", r.st, r.err)
	}
}

func TestCacheUpdateTimeNeverGoesBack(t *testing.T) {
	c := NewCache()
	t0 := time.Now()
	c.UpdateTime(t0.Add(time.Second))
	c.UpdateTime(t0) // older: ignored
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	// The global time is still t0+1s, so a wait for something newer than
	// t0+500ms returns at once.
	if _, err := c.GetNewerThan(ctx, "a", t0.Add(500*time.Millisecond)); err != nil {
		t.Fatalf("GetNewerThan: %v", err)
	}
}

// A reader that has to wait is announced on Wanted and listed by Waiting
// until an observation satisfies it; one that need not wait is not.
func TestCacheWaitingReaders(t *testing.T) {
	c := NewCache()
	t0 := time.Unix(100, 0)
	c.Set("fresh", &PodStatus{ID: "fresh"}, nil, t0.Add(time.Second))
	mustReturn(t, getNewerThan(context.Background(), c, "fresh", t0))
	select {
	case <-c.Wanted():
		t.Fatal("a reader that did not wait was announced")
	default:
	}
	if w := c.Waiting(); len(w) != 0 {
		t.Fatalf("Waiting = %v with nobody waiting", w)
	}

	ch := getNewerThan(context.Background(), c, "p", t0)
	select {
	case <-c.Wanted():
	case <-time.After(waitTimeout):
		t.Fatal("a waiting reader was not announced on Wanted")
	}
	if w := c.Waiting(); len(w) != 1 || w[0] != "p" {
		t.Fatalf("Waiting = %v, want [p]", w)
	}
	c.Set("p", &PodStatus{ID: "p"}, nil, t0.Add(time.Second))
	mustReturn(t, ch)
	if w := c.Waiting(); len(w) != 0 {
		t.Fatalf("Waiting = %v after the reader returned", w)
	}
}
