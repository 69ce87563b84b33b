//go:build e2e

package e2e

import "testing"

// TestCSIDriverPodsServeAStatefulSetOnUpstreamKubelet runs
// TestCSIDriverPodsServeAStatefulSet's steps with the upstream kubelet
// v1.34 as the node: the driver pod's hostPath mounts are that kubelet's
// root directory, and the restart step restarts that kubelet. It shows
// the test's expectations are upstream's behaviour, not Skiff's own.
func TestCSIDriverPodsServeAStatefulSetOnUpstreamKubelet(t *testing.T) {
	cn := newUpstreamClusterNode(t, "")
	csiDriverPodsServeAStatefulSet(t, cn)
}
