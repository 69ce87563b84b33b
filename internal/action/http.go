package action

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// NewHTTPRequest builds the GET of an httpGet action as upstream does:
// scheme (default http), host (default podIP), the port by number or by
// the container's port name, the path, and the action's headers. Unless
// those set them, User-Agent is kube-<purpose>/1.34 and Accept */*; an
// empty Accept header removes it. A Host header sets the request's host.
func NewHTTPRequest(ctx context.Context, get *v1.HTTPGetAction, c *v1.Container, podIP, purpose string) (*http.Request, error) {
	scheme := strings.ToLower(string(get.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := get.Host
	if host == "" {
		host = podIP
	}
	port, err := ResolvePort(get.Port, c)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(get.Path)
	if err != nil {
		u = &url.URL{Path: get.Path}
	}
	u.Scheme, u.Host = scheme, net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	headers := http.Header{}
	for _, h := range get.HTTPHeaders {
		headers.Add(h.Name, h.Value)
	}
	if _, ok := headers["User-Agent"]; !ok {
		headers.Set("User-Agent", UserAgent(purpose))
	}
	if _, ok := headers["Accept"]; !ok {
		headers.Set("Accept", "*/*")
	} else if headers.Get("Accept") == "" {
		headers.Del("Accept")
	}
	req.Header = headers
	req.Host = headers.Get("Host")
	return req, nil
}

// HTTPProber makes HTTP probes: no keep-alive, no proxy, no compression,
// certificates not verified, and redirects followed only on the same
// host, as upstream's prober.
type HTTPProber struct {
	transport *http.Transport
}

// NewHTTPProber returns an HTTPProber.
func NewHTTPProber() *HTTPProber {
	return &HTTPProber{transport: &http.Transport{
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as upstream: probes do not verify
		DisableKeepAlives:  true,
		DisableCompression: true,
		Proxy:              http.ProxyURL(nil),
		DialContext:        dialer().DialContext,
	}}
}

// Probe sends req and judges the response: 2xx is a success, 3xx (a
// redirect to another host, not followed) a warning, anything else or no
// response within timeout a failure.
func (p *HTTPProber) Probe(req *http.Request, timeout time.Duration) (Result, string, error) {
	client := &http.Client{Transport: p.transport, Timeout: timeout, CheckRedirect: sameHostRedirects}
	resp, err := client.Do(req)
	if err != nil {
		return Failure, err.Error(), nil // timeouts and refusals are failures
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxOutput))
	if err != nil {
		return Failure, "", err
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return Success, string(b), nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return Warning, fmt.Sprintf("Probe terminated redirects, Response body: %s", b), nil
	}
	// As upstream, the body stays out of the message: it may hold secrets.
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode), nil
}

// sameHostRedirects follows redirects on the probed host only, at most 10.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}
