package kube

import (
	"time"

	"k8s.io/client-go/rest"
)

// NewUnthrottled is a client like the one NewForConfig(c) builds (same
// host, credentials and transport, hence the same certificate rotation
// and connections) but with no client-side rate limit and, when timeout
// is positive, a timeout on every request.
//
// The node's heartbeat (Lease and node status) uses one, as upstream's
// kubelet does, so that callers queueing on the main client's rate
// limiter cannot delay it; the timeout keeps one stuck request from
// holding the next heartbeat back.
func NewUnthrottled(c *rest.Config, timeout time.Duration) (*Clientset, error) {
	cfg := rest.CopyConfig(c)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	cfg.Timeout = timeout
	return NewForConfig(cfg)
}

// HeartbeatTimeout is upstream's heartbeat client timeout: the node
// status update frequency, or the lease duration when that is shorter.
func HeartbeatTimeout(statusUpdateFrequency time.Duration, leaseDurationSeconds int32) time.Duration {
	return min(statusUpdateFrequency, time.Duration(leaseDurationSeconds)*time.Second)
}
