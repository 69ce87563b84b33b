package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// StatsProvider is what /stats/summary, /metrics/resource and
// /metrics/cadvisor show.
type StatsProvider interface {
	Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)
	ResourceHandler() http.Handler
	CadvisorHandler() http.Handler
}

// StatsRoutes returns what adds /stats/summary, /metrics/resource and
// /metrics/cadvisor to a mux; both servers serve them, as upstream does.
func StatsRoutes(sp StatsProvider) func(mux *http.ServeMux) {
	return func(mux *http.ServeMux) { registerStats(mux, sp) }
}

func registerStats(mux *http.ServeMux, sp StatsProvider) {
	if sp == nil {
		return
	}
	mux.Handle("GET /metrics/resource", sp.ResourceHandler())
	mux.Handle("GET /metrics/cadvisor", sp.CadvisorHandler())
	mux.HandleFunc("GET /stats/summary", func(w http.ResponseWriter, r *http.Request) {
		only := false
		if v := r.URL.Query().Get("only_cpu_and_memory"); v != "" {
			var err error
			if only, err = strconv.ParseBool(v); err != nil {
				http.Error(w, fmt.Sprintf("invalid only_cpu_and_memory %q: want true or false", v), http.StatusBadRequest)
				return
			}
		}
		s, err := sp.Summary(r.Context(), only)
		if err != nil {
			klog.ErrorS(err, "Building the stats summary failed")
			http.Error(w, fmt.Sprintf("internal error: %v", err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(s); err != nil {
			klog.ErrorS(err, "Writing /stats/summary response failed")
		}
	})
}
