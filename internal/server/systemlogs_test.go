package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSystemLogs(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	for name, content := range map[string]string{
		"syslog":                "node log line\n",
		"pods/ns_p_uid/c/0.log": "container line\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, []byte("not a log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// /var/log/containers holds symlinks into /var/log/pods: those stay.
	if err := os.Symlink("pods/ns_p_uid/c/0.log", filepath.Join(dir, "inside.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "escape.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(dir, "escape-dir")); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /logs/", SystemLogs(dir))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/logs/"); code != 200 || !strings.Contains(body, `href="syslog"`) || !strings.Contains(body, `href="pods/"`) {
		t.Errorf("listing: %d %q", code, body)
	}
	for path, want := range map[string]string{
		"/logs/syslog":                "node log line\n",
		"/logs/pods/ns_p_uid/c/0.log": "container line\n",
		"/logs/inside.log":            "container line\n",
	} {
		if code, body := get(path); code != 200 || body != want {
			t.Errorf("%s: %d %q, want %q", path, code, body, want)
		}
	}
	for _, path := range []string{"/logs/escape.log", "/logs/escape-dir/secret", "/logs/../../etc/passwd", "/logs/%2e%2e/%2e%2e/etc/passwd", "/logs/missing"} {
		if code, body := get(path); code == 200 || strings.Contains(body, "not a log") || strings.Contains(body, "root:") {
			t.Errorf("%s: %d %q, want it refused", path, code, body)
		}
	}
	if code, _ := get("/logs"); code != 200 {
		t.Errorf("/logs: %d, want a redirect to the listing", code)
	}
}

func TestSystemLogsMissingDir(t *testing.T) {
	rec := httptest.NewRecorder()
	SystemLogs(filepath.Join(t.TempDir(), "none")).ServeHTTP(rec, httptest.NewRequest("GET", "/logs/", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("%d %q, want 404", rec.Code, rec.Body.String())
	}
}
