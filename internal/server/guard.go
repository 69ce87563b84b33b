package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
)

// ReviewLimits bound the TokenReviews, and separately the
// SubjectAccessReviews, that requests to the kubelet API cause: at most
// InFlight at once and QPS a second (with Burst).
//
// Anyone who reaches the port can send a new bearer token with every
// request, and each costs a review: unbounded, a flood of them loads
// the apiserver and the node's connection to it. Answers the caches hold
// cost nothing and are not counted. A request that needs a review waits
// for one in a fair queue (reviewGuard), so that a flood from one client
// delays the others by at most a turn, instead of locking them out.
type ReviewLimits struct {
	InFlight int
	QPS      float32
	Burst    int
}

// DefaultReviewLimits: the default kubeAPIQPS and kubeAPIBurst, as for
// the node's own calls, with enough reviews in flight for that rate at a
// round trip of 100 ms.
var DefaultReviewLimits = ReviewLimits{InFlight: 5, QPS: 50, Burst: 100}

// withDefaults fills in the unset limits.
func (l ReviewLimits) withDefaults() ReviewLimits {
	if l.InFlight <= 0 {
		l.InFlight = DefaultReviewLimits.InFlight
	}
	if l.QPS <= 0 {
		l.QPS = DefaultReviewLimits.QPS
	}
	if l.Burst <= 0 {
		l.Burst = DefaultReviewLimits.Burst
	}
	return l
}

// The fair queue's bounds. A client (address) keeps at most
// perClientWaiting requests waiting, all clients together maxWaiting;
// none waits longer than maxReviewWait (as the apiserver's priority and
// fairness, a quarter of its 60 s request timeout). Connections are
// remembered (how many reviews they asked for) for connMemoryTTL, at
// most connMemorySize of them.
const (
	perClientWaiting = 32
	maxWaiting       = 2048
	maxReviewWait    = 15 * time.Second
	connMemorySize   = 8192
	connMemoryTTL    = 10 * time.Minute
)

// errTooManyReviews is a request refused by a reviewGuard; the kubelet
// API answers it with 429.
var errTooManyReviews = errors.New("too many credential reviews waiting: try again later")

// errClientGone is a request whose context ended while it waited for a
// review; answered (if anyone still listens) as a refusal.
var errClientGone = fmt.Errorf("client stopped waiting: %w", errTooManyReviews)

// refusalLogPeriod is how often refusals are summed up in the log: one
// line per refused request would let the flood fill the log too.
const refusalLogPeriod = 10 * time.Second

// reviewGuard admits reviews within ReviewLimits. A request that finds
// every slot taken waits in its client's queue, with its context and at
// most maxReviewWait; a freed slot goes to the clients in turn (round
// robin over source addresses), and within a client to the request whose
// connection asked for the fewest reviews before (then the oldest). A
// flood from one address thus costs others at most a turn, and a
// client's first request does not wait behind the junk that another
// connection of its address keeps sending. A client's full queue
// refuses a newcomer (429), unless the newcomer's connection asked for
// fewer reviews than that of the queue's worst waiter, which then makes
// way.
type reviewGuard struct {
	what    string
	limiter flowcontrol.RateLimiter
	maxWait time.Duration
	// conns counts the reviews each connection (address:port) asked for.
	conns *utilcache.LRUExpireCache

	mu       sync.Mutex
	free     int // review slots not taken
	queue    fairQueue
	refused  int
	lastLog  time.Time
	now      func() time.Time
	logEvery time.Duration
}

func newReviewGuard(what string, l ReviewLimits) *reviewGuard {
	l = l.withDefaults()
	return &reviewGuard{
		what: what, free: l.InFlight, maxWait: maxReviewWait,
		limiter: flowcontrol.NewTokenBucketRateLimiter(l.QPS, l.Burst),
		conns:   utilcache.NewLRUExpireCache(connMemorySize),
		queue:   newFairQueue(perClientWaiting, maxWaiting),
		now:     time.Now, logEvery: refusalLogPeriod,
	}
}

// acquire takes a slot for one review on behalf of the client that ctx
// carries (withClient), waiting its turn and then for the rate, at most
// maxWait in all; release gives it back. It fails with errTooManyReviews
// when the client's queue is full or the wait too long, and
// errClientGone when ctx ends first.
func (g *reviewGuard) acquire(ctx context.Context) (release func(), err error) {
	wctx, cancel := context.WithTimeout(ctx, g.maxWait)
	defer cancel()
	if err := g.waitTurn(wctx); err != nil {
		return nil, g.failed(ctx, err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.releaseLocked()
		})
	}
	if err := g.limiter.Wait(wctx); err != nil {
		release()
		return nil, g.failed(ctx, err)
	}
	return release, nil
}

// failed counts a refusal: errClientGone when ctx ended, else
// errTooManyReviews.
func (g *reviewGuard) failed(ctx context.Context, err error) error {
	g.refuse()
	if ctx.Err() != nil {
		return errClientGone
	}
	if errors.Is(err, errTooManyReviews) {
		return err
	}
	return fmt.Errorf("%w (%v)", errTooManyReviews, err)
}

// waitTurn takes a slot, at once if one is free and nobody waits, else
// once the fair queue gives it one.
func (g *reviewGuard) waitTurn(ctx context.Context) error {
	addr, conn := clientOf(ctx)
	g.mu.Lock()
	asked := 0
	if v, ok := g.conns.Get(conn); ok {
		asked = v.(int)
	}
	g.conns.Add(conn, asked+1, connMemoryTTL)
	if g.free > 0 && g.queue.waiting == 0 {
		g.free--
		g.mu.Unlock()
		return nil
	}
	w, evicted := g.queue.push(addr, asked)
	if evicted != nil {
		evicted.finish(waiterEvicted)
	}
	g.mu.Unlock()
	if w == nil {
		return errTooManyReviews
	}
	select {
	case <-w.done:
		if w.state == waiterEvicted {
			return errTooManyReviews
		}
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		switch w.state {
		case waiterGranted: // raced with the grant: pass the slot on
			g.releaseLocked()
		case waiterWaiting:
			g.queue.remove(w)
		}
		return ctx.Err()
	}
}

// releaseLocked hands a freed slot to the next waiter, or frees it.
func (g *reviewGuard) releaseLocked() {
	if w := g.queue.pop(); w != nil {
		w.finish(waiterGranted)
		return
	}
	g.free++
}

// refuse counts a refusal and logs the count at most every logEvery.
func (g *reviewGuard) refuse() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refused++
	if now := g.now(); now.Sub(g.lastLog) >= g.logEvery {
		klog.InfoS("Refused kubelet API requests: too many "+g.what+" waiting (answered 429)",
			"refusedSinceLastReport", g.refused)
		g.refused, g.lastLog = 0, now
	}
	return errTooManyReviews
}
