// Package url is the manifest URL pod source (staticPodURL, --manifest-url):
// static pods served over HTTP as a v1 Pod or PodList, fetched every
// httpCheckFrequency, as upstream's "http" config source.
package url

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/podsource"
)

// maxBody bounds what one answer may hold.
const maxBody = 10 << 20

// Config configures a Source.
type Config struct {
	URL string
	// Header is sent with every request (staticPodURLHeader).
	Header map[string][]string
	// NodeName is this node's name: pods are named <name>-<nodename>.
	NodeName string
	// Period is how often the URL is fetched (httpCheckFrequency).
	Period time.Duration
	// Client is the HTTP client; a client with a 10 s timeout when nil.
	Client *http.Client
}

// Source fetches a manifest URL and streams snapshots of its pods.
type Source struct {
	cfg Config
	now func() time.Time

	// Owned by the Run goroutine.
	data    []byte // last answer that was decoded
	seen    podsource.FirstSeen
	lastErr string // last error logged
}

// New returns a Source for cfg; it does nothing until Run.
func New(cfg Config) *Source {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Period <= 0 {
		cfg.Period = 20 * time.Second
	}
	return &Source{cfg: cfg, now: time.Now}
}

// Run fetches the URL at once and then every Period until ctx is done,
// sending a snapshot whenever the answer changes. As upstream, a failed
// fetch or an answer that does not decode is logged and sends nothing, so
// the pods of the last good answer keep running; an empty answer means no
// pods.
func (s *Source) Run(ctx context.Context, out chan<- podsource.Update) {
	klog.V(1).InfoS("Fetching static pods from a manifest URL", "url", s.cfg.URL, "period", s.cfg.Period)
	ticker := time.NewTicker(s.cfg.Period)
	defer ticker.Stop()
	for {
		pods, changed, err := s.fetch(ctx)
		switch {
		case err != nil:
			if err.Error() != s.lastErr {
				klog.ErrorS(err, "Failed to read pods from the manifest URL", "url", s.cfg.URL)
			}
			s.lastErr = err.Error()
		case changed:
			s.lastErr = ""
			select {
			case out <- podsource.Update{Source: podsource.HTTP, Pods: s.withSeen(pods)}:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// fetch gets the URL; changed is false when the answer is the same as the
// last one decoded.
func (s *Source) fetch(ctx context.Context) (pods []*v1.Pod, changed bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return nil, false, err
	}
	for name, values := range s.cfg.Header {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", s.cfg.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, false, fmt.Errorf("%s: %s", s.cfg.URL, resp.Status)
	}
	if len(data) > maxBody {
		return nil, false, fmt.Errorf("%s: answer larger than %d bytes", s.cfg.URL, maxBody)
	}
	if s.data != nil && bytes.Equal(data, s.data) {
		return nil, false, nil
	}
	if len(bytes.TrimSpace(data)) > 0 {
		if pods, err = decodePods(data, s.cfg.URL, s.cfg.NodeName); err != nil {
			return nil, false, fmt.Errorf("%s: %w", s.cfg.URL, err)
		}
	}
	s.data = data
	return pods, true, nil
}

// withSeen sets the config.seen annotation on the pods, in place.
func (s *Source) withSeen(pods []*v1.Pod) []*v1.Pod {
	s.seen.Stamp(pods, s.now())
	return pods
}
