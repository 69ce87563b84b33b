package server

import (
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
)

// ReviewLimits bound the TokenReviews, and separately the
// SubjectAccessReviews, that requests to the kubelet API cause: at most
// InFlight at once and QPS a second (with Burst). A request that would
// need one more gets 429 at once, instead of queueing.
//
// Anyone who reaches the port can send a new bearer token with every
// request, and each costs a review: unbounded, a flood of them loads the
// apiserver and the node's connection to it. Answers the caches hold
// cost nothing and are not counted, so known clients are refused only
// while new credentials arrive faster than the limits.
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

// errTooManyReviews is a request refused by a reviewGuard; the kubelet
// API answers it with 429.
var errTooManyReviews = errors.New("too many credential reviews in flight: try again later")

// refusalLogPeriod is how often refusals are summed up in the log: one
// line per refused request would let the flood fill the log too.
const refusalLogPeriod = 10 * time.Second

// reviewGuard admits reviews within ReviewLimits, without waiting.
type reviewGuard struct {
	what    string
	slots   chan struct{}
	limiter flowcontrol.RateLimiter

	mu       sync.Mutex
	refused  int
	lastLog  time.Time
	now      func() time.Time
	logEvery time.Duration
}

func newReviewGuard(what string, l ReviewLimits) *reviewGuard {
	l = l.withDefaults()
	return &reviewGuard{
		what: what, slots: make(chan struct{}, l.InFlight),
		limiter: flowcontrol.NewTokenBucketRateLimiter(l.QPS, l.Burst),
		now:     time.Now, logEvery: refusalLogPeriod,
	}
}

// acquire takes a slot for one review; release gives it back. It fails
// with errTooManyReviews when all slots are taken or the rate is spent.
func (g *reviewGuard) acquire() (release func(), err error) {
	select {
	case g.slots <- struct{}{}:
	default:
		return nil, g.refuse()
	}
	if !g.limiter.TryAccept() {
		<-g.slots
		return nil, g.refuse()
	}
	return func() { <-g.slots }, nil
}

// refuse counts a refusal and logs the count at most every logEvery.
func (g *reviewGuard) refuse() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refused++
	if now := g.now(); now.Sub(g.lastLog) >= g.logEvery {
		klog.InfoS("Refused kubelet API requests: too many "+g.what+" needed at once (answered 429)",
			"refusedSinceLastReport", g.refused)
		g.refused, g.lastLog = 0, now
	}
	return errTooManyReviews
}
