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
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A pod can reach its node's :10250 and send a new junk bearer token
// with every request. Under such a flood from one source, several
// thousand requests a second, metrics-server's and Prometheus's kind of
// requests with ServiceAccount tokens the node has never seen are served:
// one client from another address, one sharing the flood's address on a
// connection of its own. The flood's achieved rate and Skiff's CPU time
// under it are logged, not asserted.
func TestKubeletAPITokenFloodServesValidClients(t *testing.T) {
	const (
		rate     = 4000
		workers  = 96
		duration = 20 * time.Second
	)
	cn := newClusterNode(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 90*time.Second)
	// The flood comes from the node's InternalIP (the address it dials);
	// metrics-server from loopback, another address.
	floodURL := cn.kubeletURL(t, "/stats/summary")
	otherBase := fmt.Sprintf("https://127.0.0.1:%d", cn.apiPort)
	waitFor(t, 30*time.Second, "the kubelet API serving", func() (bool, error) {
		code, _ := kubeletGetOr(floodURL, "")
		return code == http.StatusUnauthorized, nil
	})
	// As metrics-server's and Prometheus's ClusterRoles (nodes/metrics,
	// nodes/stats); the tokens are new to Skiff.
	_, metricsServer := cn.serviceAccountToken(t, "metrics-server", "metrics", "stats")
	_, prometheus := cn.serviceAccountToken(t, "prometheus", "metrics", "stats")

	pid := cn.cmd.Process.Pid
	idleFrom, idleCPU := time.Now(), procCPU(t, pid)
	time.Sleep(5 * time.Second)
	idle := (procCPU(t, pid) - idleCPU).Seconds() / time.Since(idleFrom).Seconds()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	begin, cpuBegin := time.Now(), procCPU(t, pid)
	f := startTokenFlood(ctx, floodURL, rate, workers)
	defer f.stop()
	// The reviews' queue for the flood's address is full once the flood
	// is refused.
	waitFor(t, 30*time.Second, "the flood to be refused (429)", func() (bool, error) {
		return f.count(http.StatusTooManyRequests) > 0, nil
	})

	clients := []struct {
		name, base, token string
		paths             []string
	}{
		{"metrics-server from another address", otherBase, metricsServer, []string{"/metrics/resource", "/stats/summary"}},
		{"Prometheus from the flood's address", strings.TrimSuffix(floodURL, "/stats/summary"), prometheus,
			[]string{"/metrics", "/metrics/resource", "/stats/summary"}},
	}
	for _, c := range clients {
		hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		for _, p := range c.paths {
			sentBefore, t0 := f.sent.Load(), time.Now()
			code, body := validGet(t, hc, c.base+p, c.token)
			t.Logf("%s: GET %s %d after %s, while the flood sent %d", c.name, p, code,
				time.Since(t0).Round(time.Millisecond), f.sent.Load()-sentBefore)
			if code != http.StatusOK {
				t.Errorf("%s: GET %s during the flood: %d %q, want 200", c.name, p, code, tail(body, 3))
			}
		}
		hc.CloseIdleConnections()
	}
	if rest := duration - time.Since(begin); rest > 0 {
		time.Sleep(rest)
	}
	f.stop()
	wall := time.Since(begin)
	cpu := procCPU(t, pid) - cpuBegin
	t.Logf("flood: %s in %s, %.0f requests a second (asked for %d)", f, wall.Round(time.Millisecond),
		float64(f.sent.Load())/wall.Seconds(), rate)
	t.Logf("Skiff's CPU: %s in %s under the flood, %.0f%% of a core (idle before: %.1f%%)",
		cpu.Round(time.Millisecond), wall.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds(), 100*idle)
	if n := f.count(http.StatusOK); n > 0 {
		t.Errorf("%d requests with junk bearer tokens were served", n)
	}
	if f.count(http.StatusUnauthorized) == 0 {
		t.Errorf("no junk token was reviewed and refused (401) during the flood: %s", f)
	}
}

// validGet GETs u with a bearer token through hc.
func validGet(t *testing.T, hc *http.Client, u, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// kubeletGetOr is a GET of u with a bearer token (if any) that reports
// a failure to connect as code 0.
func kubeletGetOr(u, token string) (int, string) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tokenFlood sends GETs, each with a new random bearer token, from
// workers keep-alive connections, paced to rate a second in all.
type tokenFlood struct {
	sent, failed atomic.Int64
	mu           sync.Mutex
	codes        map[int]int64
	cancel       context.CancelFunc
	wg           sync.WaitGroup
	once         sync.Once
}

func startTokenFlood(ctx context.Context, u string, rate, workers int) *tokenFlood {
	ctx, cancel := context.WithCancel(ctx)
	f := &tokenFlood{codes: map[int]int64{}, cancel: cancel}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1
		MaxIdleConnsPerHost: workers,
		MaxConnsPerHost:     workers,
	}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	permits := make(chan struct{}, rate)
	f.wg.Add(1)
	go func() { // the pacer: batches every 10 ms (a 1 ms ticker is not kept)
		defer f.wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		begin, given := time.Now(), int64(0)
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				for want := int64(now.Sub(begin).Seconds() * float64(rate)); given < want; given++ {
					select {
					case permits <- struct{}{}:
					default: // the workers are behind: the rate is not reached
					}
				}
			}
		}
	}()
	for range workers {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			tok := make([]byte, 16)
			for {
				select {
				case <-ctx.Done():
					return
				case <-permits:
				}
				_, _ = rand.Read(tok)
				f.one(ctx, client, u, "junk-"+hex.EncodeToString(tok))
			}
		}()
	}
	go func() { <-ctx.Done(); f.wg.Wait(); tr.CloseIdleConnections() }()
	return f
}

func (f *tokenFlood) one(ctx context.Context, client *http.Client, u, token string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	f.sent.Add(1)
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			f.failed.Add(1)
		}
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	f.mu.Lock()
	f.codes[resp.StatusCode]++
	f.mu.Unlock()
}

// stop ends the flood and waits for its requests.
func (f *tokenFlood) stop() {
	f.once.Do(func() { f.cancel(); f.wg.Wait() })
}

func (f *tokenFlood) count(code int) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.codes[code]
}

func (f *tokenFlood) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	codes := make([]int, 0, len(f.codes))
	for c := range f.codes {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	out := fmt.Sprintf("%d sent, %d failed", f.sent.Load(), f.failed.Load())
	for _, c := range codes {
		out += fmt.Sprintf(", %d×%d", f.codes[c], c)
	}
	return out
}

// procCPU is the user and system CPU time process pid has used, from
// /proc/<pid>/stat (utime and stime, in clock ticks of 1/100 s).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(t, err)
	s := string(b)
	// Fields after the command name (in parentheses, which may hold
	// spaces): state is field 3, utime 14, stime 15.
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		must(t, err)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
