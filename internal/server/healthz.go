package server

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// healthCheck is one named check of /healthz.
type healthCheck struct {
	name  string
	check func(*http.Request) error
}

// pingCheck always passes: the process serves.
var pingCheck = healthCheck{"ping", func(*http.Request) error { return nil }}

// logCheck fails when flushing the log has not finished for two minutes
// (a blocked log), as apiserver's LogHealthz: the first check starts a
// flush every minute.
var logCheck = newLogCheck()

func newLogCheck() healthCheck {
	var once sync.Once
	var last atomic.Int64 // unix nanoseconds of the last finished flush
	return healthCheck{"log", func(*http.Request) error {
		once.Do(func() {
			last.Store(time.Now().UnixNano())
			go func() {
				for range time.Tick(time.Minute) {
					klog.Flush()
					last.Store(time.Now().UnixNano())
				}
			}()
		})
		if time.Since(time.Unix(0, last.Load())) < 2*time.Minute {
			return nil
		}
		return fmt.Errorf("logging blocked")
	}}
}

// installHealthz serves /healthz with checks (ping alone when none) and
// each check at /healthz/<name>, as apiserver's healthz.InstallHandler
// does for the upstream kubelet: "ok" when all pass ("?verbose" lists
// them, "?exclude=<name>" skips one), else 500 naming the failed checks
// without their reasons (which are logged); /healthz/<name> gives the
// reason.
func installHealthz(mux *http.ServeMux, checks ...healthCheck) {
	if len(checks) == 0 {
		checks = []healthCheck{pingCheck}
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		excluded := r.URL.Query()["exclude"]
		unknown := map[string]bool{}
		for _, e := range excluded {
			unknown[e] = true
		}
		var out, failedLog bytes.Buffer
		var failed []string
		for _, c := range checks {
			if slices.Contains(excluded, c.name) {
				delete(unknown, c.name)
				fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.name)
				continue
			}
			if err := c.check(r); err != nil {
				fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.name)
				fmt.Fprintf(&failedLog, "[-]%s failed: %v\n", c.name, err)
				failed = append(failed, c.name)
			} else {
				fmt.Fprintf(&out, "[+]%s ok\n", c.name)
			}
		}
		if len(unknown) > 0 {
			names := make([]string, 0, len(unknown))
			for n := range unknown {
				names = append(names, fmt.Sprintf("%q", n))
			}
			sort.Strings(names)
			fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
		}
		if len(failed) > 0 {
			klog.V(2).InfoS("Health check failed", "checks", strings.Join(failed, ","), "details", failedLog.String())
			http.Error(w, out.String()+"healthz check failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if _, verbose := r.URL.Query()["verbose"]; !verbose {
			fmt.Fprint(w, "ok")
			return
		}
		out.WriteTo(w)
		fmt.Fprint(w, "healthz check passed\n")
	})
	for _, c := range checks {
		mux.HandleFunc("/healthz/"+c.name, func(w http.ResponseWriter, r *http.Request) {
			if err := c.check(r); err != nil {
				http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
				return
			}
			fmt.Fprint(w, "ok")
		})
	}
}
