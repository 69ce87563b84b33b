package server

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHealthz(t *testing.T) {
	var syncErr error
	mux := http.NewServeMux()
	installHealthz(mux, pingCheck, logCheck, healthCheck{"syncloop", func(*http.Request) error { return syncErr }})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/healthz", 200, "ok"},
		{"/healthz?verbose", 200, "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n"},
		{"/healthz?verbose&exclude=log&exclude=nope", 200,
			"[+]ping ok\n[+]log excluded: ok\n[+]syncloop ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n"},
		{"/healthz/ping", 200, "ok"},
		{"/healthz/syncloop", 200, "ok"},
	} {
		if code, body := get(tc.path); code != tc.code || body != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
		}
	}
	syncErr = errors.New("sync loop stalled")
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/healthz", 500, "[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n"},
		{"/healthz?exclude=syncloop", 200, "ok"},
		{"/healthz/syncloop", 500, "internal server error: sync loop stalled\n"},
	} {
		if code, body := get(tc.path); code != tc.code || body != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
		}
	}

	// No checks: ping alone (the healthz port).
	mux = http.NewServeMux()
	installHealthz(mux)
	if code, body := get("/healthz?verbose"); code != 200 || body != "[+]ping ok\nhealthz check passed\n" {
		t.Errorf("healthz port: %d %q", code, body)
	}
}
