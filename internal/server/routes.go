package server

import (
	"encoding/json"
	"net/http"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// Provider is what the endpoints both servers share show.
type Provider interface {
	// Pods are the pods the kubelet wants, with their latest status.
	Pods() []*v1.Pod
	// Healthy reports whether the sync loop is alive (/healthz/syncloop).
	Healthy() error
}

// installCommon adds what the read-only and the secure server both serve,
// as upstream's InstallAuthNotRequiredHandlers: /healthz (with the ping,
// log and syncloop checks, each also at /healthz/<name>), /pods, /metrics,
// /metrics/probes (from m; nil: a registry of its own) and, when sp is
// set, /stats/summary and /metrics/resource.
func installCommon(mux *http.ServeMux, p Provider, sp StatsProvider, m *metrics.Registry) {
	if m == nil {
		m = metrics.New()
	}
	installHealthz(mux, pingCheck, logCheck,
		healthCheck{"syncloop", func(*http.Request) error { return p.Healthy() }})
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) {
		writePods(w, p.Pods())
	})
	MetricsRoutes(mux, m)
	registerStats(mux, sp)
}

// writePods writes pods as a v1 PodList.
func writePods(w http.ResponseWriter, pods []*v1.Pod) {
	list := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for _, pod := range pods {
		list.Items = append(list.Items, *pod)
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&list); err != nil {
		klog.ErrorS(err, "Writing a pod list failed")
	}
}
