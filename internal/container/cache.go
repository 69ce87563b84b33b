package container

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Cache holds the latest PodStatus per pod and when it was observed. PLEG
// writes it; pod workers read it and can wait for an observation newer than
// their last sync, so they never act on state older than their own actions.
type Cache struct {
	mu      sync.Mutex
	pods    map[types.UID]cacheEntry
	global  time.Time     // every pod's status is at least this fresh
	changed chan struct{} // closed and replaced on every write
	// waiting counts the readers blocked in GetNewerThan per pod; wanted
	// is signalled when one starts to wait, so a writer that can read a
	// single pod (the evented PLEG) need not make it wait for a relist.
	waiting map[types.UID]int
	wanted  chan struct{}
}

type cacheEntry struct {
	status   *PodStatus
	err      error
	modified time.Time
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{pods: map[types.UID]cacheEntry{}, changed: make(chan struct{}),
		waiting: map[types.UID]int{}, wanted: make(chan struct{}, 1)}
}

// Get returns the cached status of a pod: an empty status when none is known.
func (c *Cache) Get(uid types.UID) (*PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(uid)
}

func (c *Cache) getLocked(uid types.UID) (*PodStatus, error) {
	e, ok := c.pods[uid]
	if !ok {
		return &PodStatus{ID: uid}, nil
	}
	return e.status, e.err
}

// GetNewerThan blocks until the cache holds an observation of the pod made
// after min (its own, or a relist that saw no change to it), or ctx ends.
func (c *Cache) GetNewerThan(ctx context.Context, uid types.UID, min time.Time) (*PodStatus, error) {
	waited := false
	defer func() {
		if waited {
			c.mu.Lock()
			if c.waiting[uid]--; c.waiting[uid] <= 0 {
				delete(c.waiting, uid)
			}
			c.mu.Unlock()
		}
	}()
	for {
		c.mu.Lock()
		e, ok := c.pods[uid]
		if (ok && e.modified.After(min)) || c.global.After(min) {
			s, err := c.getLocked(uid)
			c.mu.Unlock()
			return s, err
		}
		if !waited {
			waited = true
			c.waiting[uid]++
			select {
			case c.wanted <- struct{}{}:
			default: // a signal is already pending
			}
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

// Set records a pod's status (or the error getting it) observed at ts.
func (c *Cache) Set(uid types.UID, s *PodStatus, err error, ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.pods[uid]; ok && e.modified.After(ts) {
		return // a newer observation is already there
	}
	c.pods[uid] = cacheEntry{status: s, err: err, modified: ts}
	c.notifyLocked()
}

// UpdateTime records that every pod's status was current at ts.
func (c *Cache) UpdateTime(ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts.After(c.global) {
		c.global = ts
		c.notifyLocked()
	}
}

// Wanted is signalled when a reader starts waiting in GetNewerThan.
func (c *Cache) Wanted() <-chan struct{} { return c.wanted }

// Waiting returns the pods that readers wait for in GetNewerThan.
func (c *Cache) Waiting() []types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]types.UID, 0, len(c.waiting))
	for uid := range c.waiting {
		out = append(out, uid)
	}
	return out
}

// Delete forgets a pod.
func (c *Cache) Delete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

func (c *Cache) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}
