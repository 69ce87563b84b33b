package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strings"

	"k8s.io/klog/v2"
)

// Debug configures the kubelet API's /debug/ endpoints, served only with
// the debugging handlers, as upstream.
type Debug struct {
	// Profiling is enableProfilingHandler: /debug/pprof/.
	Profiling bool
	// Contention is enableContentionProfiling: the block profile records
	// every blocking event.
	Contention bool
	// Flags is enableDebugFlagsHandler: PUT /debug/flags/v sets the log
	// verbosity.
	Flags bool
}

const pprofPath = "/debug/pprof/"

// install adds the endpoints to mux; a disabled one answers 405, as
// upstream's.
func (d Debug) install(mux *http.ServeMux) {
	if d.Profiling {
		mux.HandleFunc("GET "+pprofPath, servePprof)
		if d.Contention {
			runtime.SetBlockProfileRate(1)
		}
	} else {
		mux.HandleFunc(pprofPath, disabledEndpoint("profiling endpoint is disabled."))
	}
	if d.Flags {
		mux.HandleFunc("/debug/flags/v", setVerbosity)
	} else {
		mux.HandleFunc("/debug/flags/v", disabledEndpoint("flags endpoint is disabled."))
	}
}

// servePprof serves net/http/pprof's profiles under /debug/pprof/.
func servePprof(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, pprofPath) {
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "cmdline":
		pprof.Cmdline(w, r)
	case "trace":
		pprof.Trace(w, r)
	default: // the index, and the named profiles (heap, goroutine, ...)
		pprof.Index(w, r)
	}
}

// setVerbosity takes the new klog verbosity as the body of a PUT, as
// upstream's /debug/flags/v.
func setVerbosity(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		http.Error(w, "flags endpoint only supports PUT", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64))
	if err != nil {
		http.Error(w, "error reading the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	val := strings.TrimSpace(string(body))
	var level klog.Level
	if err := level.Set(val); err != nil {
		http.Error(w, fmt.Sprintf("failed to set verbosity to %q: %v", val, err), http.StatusBadRequest)
		return
	}
	klog.InfoS("Log verbosity set through /debug/flags/v", "v", val)
	fmt.Fprintf(w, "successfully set klog.logging.verbosity to %s", val)
}

func disabledEndpoint(msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, msg, http.StatusMethodNotAllowed)
	}
}
