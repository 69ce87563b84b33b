package prober

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Kind is a probe's type, as upstream names it in events and metrics.
type Kind string

const (
	Liveness  Kind = "Liveness"
	Readiness Kind = "Readiness"
	Startup   Kind = "Startup"
)

// Result is the settled outcome of a probe: what the thresholds made of
// its runs.
type Result int

const (
	Unknown Result = iota
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	}
	return "Unknown"
}

// Update says that a container's result of one kind changed.
type Update struct {
	PodUID      types.UID
	ContainerID string
	Kind        Kind
	Result      Result
}

// results holds the latest result of one kind per container ID, and sends
// an Update whenever one changes.
type results struct {
	kind    Kind
	updates chan<- Update
	mu      sync.RWMutex
	m       map[string]Result
}

func newResults(kind Kind, updates chan<- Update) *results {
	return &results{kind: kind, updates: updates, m: map[string]Result{}}
}

func (r *results) get(id string) (Result, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	res, ok := r.m[id]
	return res, ok
}

// set records a result and, if it changed, announces it; the send waits
// for the reader unless ctx ends first.
func (r *results) set(ctx context.Context, uid types.UID, id string, res Result) {
	r.mu.Lock()
	old, ok := r.m[id]
	r.m[id] = res
	r.mu.Unlock()
	if ok && old == res {
		return
	}
	select {
	case r.updates <- Update{PodUID: uid, ContainerID: id, Kind: r.kind, Result: res}:
	case <-ctx.Done():
	}
}

func (r *results) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}
