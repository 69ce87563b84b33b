package server

import (
	"crypto/tls"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

// timeouts are an http.Server's connection timeouts.
type timeouts struct {
	// idle closes a keep-alive connection that has no request for this
	// long, so idle connections do not pile up.
	idle time.Duration
	// read and write bound a request's reading and its answer.
	read, write time.Duration
}

// upstreamTimeouts are those of upstream's kubelet API and read-only
// servers (ListenAndServeKubeletServer): idle 90 s, as client-go's
// keep-alive, and 4 h to read a request and write its answer.
var upstreamTimeouts = timeouts{idle: 90 * time.Second, read: 4 * time.Hour, write: 4 * time.Hour}

// maxHeaderBytes is upstream's MaxHeaderBytes for both servers.
const maxHeaderBytes = 1 << 20

// newHTTPServer is a server of h with these timeouts (and TLS when
// tlsConfig is set).
func newHTTPServer(h http.Handler, tlsConfig *tls.Config, t timeouts) *http.Server {
	return &http.Server{
		Handler: h, TLSConfig: tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       t.idle, ReadTimeout: t.read, WriteTimeout: t.write,
		MaxHeaderBytes: maxHeaderBytes,
	}
}

// untilClientLeaves lifts the read and write timeouts of a request
// that streams until the client leaves: a followed log (follow=true).
// exec, attach and port-forward need nothing: net/http lifts the
// deadlines of a connection once a handler hijacks it to upgrade.
// Without this, the read deadline would end the request's context after
// the read timeout, and the write deadline its answer.
func untilClientLeaves(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var follow bool
		if v, ok := r.URL.Query()["follow"]; ok && runtime.Convert_Slice_string_To_bool(&v, &follow, nil) == nil && follow {
			rc := http.NewResponseController(w)
			if err := rc.SetReadDeadline(time.Time{}); err != nil {
				klog.V(2).InfoS("Could not lift the read timeout of a followed log", "path", r.URL.Path, "err", err)
			}
			if err := rc.SetWriteDeadline(time.Time{}); err != nil {
				klog.V(2).InfoS("Could not lift the write timeout of a followed log", "path", r.URL.Path, "err", err)
			}
		}
		h.ServeHTTP(w, r)
	})
}
