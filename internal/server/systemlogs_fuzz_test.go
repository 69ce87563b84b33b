package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzSystemLogsPath asks /logs/ for arbitrary paths, raw and escaped, in
// a log directory with symlinks that stay inside and that lead out.
// Whatever the path, no file outside the directory is ever served, and
// no request gets a server error.
func FuzzSystemLogsPath(f *testing.F) {
	dir := f.TempDir()
	outside := f.TempDir()
	const secret = "SECRET-NOT-A-LOG"
	for name, content := range map[string]string{"syslog": "node\n", "pods/ns_p_uid/c/0.log": "ctr\n"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte(secret), 0o644); err != nil {
		f.Fatal(err)
	}
	for name, to := range map[string]string{
		"inside.log": "pods/ns_p_uid/c/0.log", "escape.log": filepath.Join(outside, "secret"),
		"escape-dir": outside, "up": "..", "pods/rel-escape": "../../" + filepath.Base(outside),
	} {
		if err := os.Symlink(to, filepath.Join(dir, name)); err != nil {
			f.Fatal(err)
		}
	}
	h := SystemLogs(dir)
	for _, p := range []string{"/logs/", "/logs/syslog", "/logs/escape.log", "/logs/escape-dir/secret", "/logs/../" + filepath.Base(outside) + "/secret",
		"/logs/up/", "/logs//etc/passwd", "/logs/%2e%2e/secret", "/logs/pods/rel-escape/secret", "/logs/inside.log", "/logs/pods/../syslog"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		for _, u := range []*url.URL{{Path: p}, {Path: "/logs/" + p}, {RawPath: p, Path: unescaped(p)}} {
			req := &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, Host: "node"}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if body := rec.Body.String(); strings.Contains(body, secret) || strings.Contains(body, `href="secret"`) {
				t.Fatalf("%q served what lies outside the log directory: %d %q", u.Path, rec.Code, body)
			}
			if rec.Code >= 500 {
				t.Errorf("%q: status %d %q", u.Path, rec.Code, rec.Body.String())
			}
		}
	})
}

func unescaped(p string) string {
	if u, err := url.PathUnescape(p); err == nil {
		return u
	}
	return p
}
