package pleg

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// EventSource is the runtime's container event stream: CRI
// GetContainerEvents as k8s.io/cri-client offers it. The call sends events
// to ch until the stream ends, and returns why.
type EventSource interface {
	GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

// DefaultEventedPeriod is the relist period while events flow. The relist
// is then a safety net for an event the runtime lost (CRI-O drops them
// when its buffer is full; containerd keeps what it queued for no
// subscriber only 5 minutes) and for pods no worker knows (orphans). It
// costs two CRI list calls; every 10 s is a tenth of the plain relist's
// load, and bounds a lost event's delay to 10 s. Upstream's evented PLEG
// relists every 300 s, but its pod workers wait for the relist's global
// timestamp, which it therefore bumps to "now" every 2 s without
// observing anything; Skiff's workers instead get their own pod read
// (serveWaiting), so the period only bounds what events miss.
const DefaultEventedPeriod = 10 * time.Second

// The stream counts as healthy once an event arrived or it stayed open for
// streamSettle (containerd 1.6 answers Unimplemented at once). A broken
// stream is resubscribed after resubscribeMin, doubling to resubscribeMax
// while it keeps breaking without ever being healthy.
const (
	streamSettle   = time.Second
	resubscribeMin = time.Second
	resubscribeMax = 30 * time.Second
)

// eventBuffer holds events between cri-client's receiver and the PLEG;
// containerd blocks its own event queue on a subscriber that stops reading.
const eventBuffer = 1000

var errStreamEnded = errors.New("the runtime ended the container event stream")

// watch subscribes to the runtime's events until ctx ends, resubscribing
// with back-off when the stream breaks. A runtime without the call is
// logged once and left to the relist.
func (p *PLEG) watch(ctx context.Context) {
	wait := resubscribeMin
	for ctx.Err() == nil {
		healthy, err := p.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		p.setEvented(false)
		p.metrics.EventedConnErr.Inc()
		if status.Code(err) == codes.Unimplemented {
			p.decide(false)
			klog.InfoS("The container runtime does not stream container events (CRI GetContainerEvents is unimplemented); relisting", "period", p.period)
			return
		}
		if healthy {
			wait = resubscribeMin
		}
		klog.ErrorS(err, "Container event stream broke; relisting as a fallback and resubscribing", "period", p.period, "retryIn", wait)
		t := p.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		if !healthy {
			wait = min(2*wait, resubscribeMax)
		}
	}
}

// follow runs one subscription until it ends: it acts on each batch of
// events, and while the stream is healthy reads the pods that workers wait
// for. healthy says whether the stream ever was.
func (p *PLEG) follow(ctx context.Context) (healthy bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, eventBuffer)
	done := make(chan error, 1)
	settle := p.clock.NewTimer(streamSettle)
	defer settle.Stop()
	go func() { done <- p.src.GetContainerEvents(sctx, ch, nil) }()
	becomeHealthy := func() {
		if !healthy {
			healthy = true
			p.metrics.EventedConn.Inc()
			p.setEvented(true)
		}
	}
	for {
		select {
		case e := <-ch:
			becomeHealthy()
			p.handleEvents(ctx, drainEvents(ch, e))
		case <-settle.C():
			becomeHealthy()
		case <-p.cache.Wanted():
			if healthy {
				p.serveWaiting(ctx)
			}
		case err := <-done:
			// The receiver has stopped: what it queued is still news.
			if rest := drainEvents(ch, nil); len(rest) > 0 {
				p.handleEvents(ctx, rest)
			}
			if err == nil {
				err = errStreamEnded
			}
			return healthy, err
		}
	}
}

// drainEvents returns first (if any) and every event already queued.
func drainEvents(ch chan *runtimeapi.ContainerEventResponse, first *runtimeapi.ContainerEventResponse) []*runtimeapi.ContainerEventResponse {
	var out []*runtimeapi.ContainerEventResponse
	if first != nil {
		out = append(out, first)
	}
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// setEvented switches the relist period. Either way the PLEG relists at
// once: on a new stream, for what happened before it was there; on a
// broken one, for what it may have lost.
func (p *PLEG) setEvented(on bool) {
	p.mu.Lock()
	changed := p.evented != on
	p.evented = on
	p.mu.Unlock()
	if !changed {
		return
	}
	if on {
		p.decide(true)
		klog.InfoS("Following the container runtime's events; relisting as a safety net", "period", p.eventedPeriod)
	}
	p.relistSoon()
}

// Evented reports whether the PLEG follows a healthy event stream.
func (p *PLEG) Evented() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.evented
}

func (p *PLEG) decide(offered bool) {
	p.decideOnce.Do(func() {
		p.offered = offered
		close(p.decided)
	})
}

// EventsOffered waits until the PLEG knows whether the runtime streams
// container events: it does once a stream was healthy, it does not when
// the call is unimplemented. ok is false if ctx ended first.
func (p *PLEG) EventsOffered(ctx context.Context) (offered, ok bool) {
	select {
	case <-p.decided:
		return p.offered, true
	case <-ctx.Done():
		return false, false
	}
}
