//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// leaseJitter is the lease controller's jitter factor (component-helpers'
// lease controller renews every interval × (1 + up to 0.04)).
const leaseJitter = 0.04

// Anyone who reaches :10250 can send bearer tokens, and each new token
// costs the node a TokenReview. A flood of 1,000 requests a second, each
// with a random token, for 60 s, must not delay the node's heartbeat:
// the apiserver sees every Lease renewal on time (at most 1 s after the
// renew interval and its jitter) and the Node stays Ready throughout.
func TestKubeletAPIFloodKeepsHeartbeat(t *testing.T) {
	const (
		rate     = 1000
		duration = 60 * time.Second
		lateness = time.Second
	)
	cn := newClusterNode(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 90*time.Second)
	waitFor(t, 60*time.Second, "the node's Lease", func() (bool, error) {
		_, err := cn.admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(cn.ctx(), nodeName, metav1.GetOptions{})
		return err == nil, nil
	})
	l := cn.lease(t)
	// The renew interval is a quarter of the configured lease duration,
	// as upstream's kubelet.
	renew := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second / 4
	due := time.Duration(float64(renew)*(1+leaseJitter)) + lateness

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	renewals := watchLeaseRenewals(t, ctx, cn)
	notReady := watchNodeNotReady(t, ctx, cn)
	// Start right after a renewal, so that the flood covers whole intervals.
	select {
	case <-renewals.first:
	case <-time.After(2 * renew):
		t.Fatalf("no Lease renewal within %s before the flood", 2*renew)
	}

	url := cn.kubeletURL(t, "/pods")
	start := time.Now()
	stats := flood(ctx, url, rate, duration)
	end := time.Now()
	t.Logf("flood: %s", stats)

	times := renewals.until(t, end)
	var worst time.Duration
	prev := start
	for _, at := range times {
		if gap := at.Sub(prev); gap > worst {
			worst = gap
		}
		prev = at
	}
	if tail := end.Sub(prev); tail > worst {
		worst = tail // a renewal due before the end that never came
	}
	t.Logf("renew interval %s (lease %ds); %d renewals seen during the flood; longest gap %s (allowed %s)",
		renew, *l.Spec.LeaseDurationSeconds, len(times), worst.Round(time.Millisecond), due)
	if worst > due {
		t.Errorf("a Lease renewal came %s late under the flood (gap %s, renew interval %s)",
			(worst - time.Duration(float64(renew)*(1+leaseJitter))).Round(time.Millisecond), worst.Round(time.Millisecond), renew)
	}
	if n := notReady.Load(); n != nil {
		t.Errorf("the Node left Ready during the flood: %s", *n)
	}
	if stats.sent < rate*int64(duration/time.Second)*9/10 {
		t.Errorf("only %d requests were sent: the flood did not reach %d a second", stats.sent, rate)
	}
	if stats.codes[http.StatusOK] > 0 {
		t.Errorf("%d requests with random bearer tokens were served", stats.codes[http.StatusOK])
	}
}

// floodStats counts what a flood sent and got back.
type floodStats struct {
	sent   int64
	errors int64
	codes  map[int]int64
	p99    time.Duration
}

func (s floodStats) String() string {
	codes := make([]int, 0, len(s.codes))
	for c := range s.codes {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	out := fmt.Sprintf("%d sent, %d failed or timed out, p99 latency %s;", s.sent, s.errors, s.p99.Round(time.Millisecond))
	for _, c := range codes {
		out += fmt.Sprintf(" %d×%d", s.codes[c], c)
	}
	return out
}

// flood GETs url rate times a second for d, each request with a new
// random bearer token, each in its own goroutine (so that a slow server
// does not slow the flood), and waits for the answers.
func flood(ctx context.Context, url string, rate int, d time.Duration) floodStats {
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1: a connection per request in flight
		MaxIdleConnsPerHost: 512,
		MaxConnsPerHost:     2048,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var (
		mu        sync.Mutex
		stats     = floodStats{codes: map[int]int64{}}
		latencies []time.Duration
		wg        sync.WaitGroup
		errs      atomic.Int64
	)
	one := func() {
		defer wg.Done()
		tok := make([]byte, 16)
		_, _ = rand.Read(tok)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer flood-"+hex.EncodeToString(tok))
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			errs.Add(1)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		mu.Lock()
		stats.codes[resp.StatusCode]++
		latencies = append(latencies, time.Since(t0))
		mu.Unlock()
	}
	// Batches every 10 ms: a 1 ms ticker is not kept on a busy machine.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	begin := time.Now()
	for now := begin; now.Sub(begin) < d; now = <-tick.C {
		want := int64(now.Sub(begin).Seconds()*float64(rate)) + 1
		for ; stats.sent < want; stats.sent++ {
			wg.Add(1)
			go one()
		}
	}
	wg.Wait()
	stats.errors = errs.Load()
	if len(latencies) > 0 {
		sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
		stats.p99 = latencies[len(latencies)*99/100]
	}
	return stats
}

// leaseRenewals are the times the test saw the node's Lease renewed.
type leaseRenewals struct {
	first chan struct{} // closed at the first renewal seen
	mu    sync.Mutex
	times []time.Time
	ended time.Time // when the watch ended, zero while it runs
}

func (r *leaseRenewals) until(t *testing.T, end time.Time) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended.IsZero() && r.ended.Before(end) {
		t.Fatalf("the Lease watch ended at %s, before the flood did", r.ended.Format(time.RFC3339))
	}
	var out []time.Time
	for _, at := range r.times {
		if at.After(end) {
			break
		}
		out = append(out, at)
	}
	return out
}

// watchLeaseRenewals records when the apiserver announces each new
// renewTime of the node's Lease, until ctx ends.
func watchLeaseRenewals(t *testing.T, ctx context.Context, cn *clusterNode) *leaseRenewals {
	t.Helper()
	w, err := cn.admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", nodeName).String(),
	})
	must(t, err)
	r := &leaseRenewals{first: make(chan struct{})}
	var once sync.Once
	go func() {
		defer w.Stop()
		defer func() { r.mu.Lock(); r.ended = time.Now(); r.mu.Unlock() }()
		var last time.Time
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || ev.Type != watch.Modified || l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(last) {
				continue
			}
			last = l.Spec.RenewTime.Time
			now := time.Now()
			r.mu.Lock()
			r.times = append(r.times, now)
			r.mu.Unlock()
			once.Do(func() { close(r.first) })
		}
	}()
	return r
}

// watchNodeNotReady watches the Node until ctx ends and keeps the first
// Ready condition that is not True.
func watchNodeNotReady(t *testing.T, ctx context.Context, cn *clusterNode) *atomic.Pointer[string] {
	t.Helper()
	w, err := cn.admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", nodeName).String(),
	})
	must(t, err)
	var bad atomic.Pointer[string]
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*v1.Node)
			if !ok {
				continue
			}
			if s, msg := nodeReady(n); s != v1.ConditionTrue && bad.Load() == nil {
				m := fmt.Sprintf("Ready=%s at %s: %s", s, time.Now().Format(time.RFC3339), msg)
				bad.Store(&m)
			}
		}
	}()
	return &bad
}
