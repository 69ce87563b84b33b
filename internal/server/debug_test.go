package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

func debugServer(t *testing.T, debugging bool, d Debug) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(secureMux(SecureConfig{Host: &fakeHost{}, Stats: &fakeStats{}, Debugging: debugging, Debug: d}))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestPprofServed(t *testing.T) {
	srv := debugServer(t, true, Debug{Profiling: true})
	if code, body := do(t, "GET", srv.URL+"/debug/pprof/", ""); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("index: %d %.200q", code, body)
	}
	if code, body := do(t, "GET", srv.URL+"/debug/pprof/heap?debug=1", ""); code != 200 || !strings.Contains(body, "heap profile") {
		t.Errorf("heap: %d %.200q", code, body)
	}
	if code, body := do(t, "GET", srv.URL+"/debug/pprof/cmdline", ""); code != 200 || body == "" {
		t.Errorf("cmdline: %d %q", code, body)
	}
	if code, _ := do(t, "POST", srv.URL+"/debug/pprof/heap", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("POST heap: %d, want 405", code)
	}
}

func TestDebugEndpointsDisabled(t *testing.T) {
	for _, tc := range []struct {
		name      string
		debugging bool
		d         Debug
		pprof     string // the answer's body for both endpoints
		flags     string
	}{
		{"off one by one", true, Debug{}, "profiling endpoint is disabled.\n", "flags endpoint is disabled.\n"},
		{"debugging handlers off", false, Debug{Profiling: true, Flags: true}, "Debug endpoints are disabled.\n", "Debug endpoints are disabled.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := debugServer(t, tc.debugging, tc.d)
			if code, body := do(t, "GET", srv.URL+"/debug/pprof/heap", ""); code != 405 || body != tc.pprof {
				t.Errorf("pprof: %d %q", code, body)
			}
			if code, body := do(t, "PUT", srv.URL+"/debug/flags/v", "9"); code != 405 || body != tc.flags {
				t.Errorf("flags: %d %q", code, body)
			}
		})
	}
}

func TestDebugFlagsSetVerbosity(t *testing.T) {
	var was klog.Level // the verbosity before the test, restored after it
	for v := klog.Level(1); v < 20 && klog.V(v).Enabled(); v++ {
		was = v
	}
	t.Cleanup(func() { _ = new(klog.Level).Set(was.String()) })

	srv := debugServer(t, true, Debug{Flags: true})
	if code, body := do(t, "PUT", srv.URL+"/debug/flags/v", "7"); code != 200 || !strings.Contains(body, "verbosity to 7") {
		t.Fatalf("PUT 7: %d %q", code, body)
	}
	if !klog.V(7).Enabled() || klog.V(8).Enabled() {
		t.Errorf("verbosity not 7 after the PUT: V(7)=%v V(8)=%v", klog.V(7).Enabled(), klog.V(8).Enabled())
	}
	if code, _ := do(t, "PUT", srv.URL+"/debug/flags/v", "loud"); code != 400 {
		t.Errorf("PUT loud: %d, want 400", code)
	}
	if !klog.V(7).Enabled() || klog.V(8).Enabled() {
		t.Error("a refused value changed the verbosity")
	}
	if code, _ := do(t, "GET", srv.URL+"/debug/flags/v", ""); code != 405 {
		t.Errorf("GET: %d, want 405", code)
	}
}
