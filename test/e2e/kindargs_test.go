//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// kindCgroupRoot is the cgroupRoot of kind's kubelet configuration.
const kindCgroupRoot = "/kubelet"

// kindConfig is /var/lib/kubelet/config.yaml as kubeadm v1.34 writes it on
// a kind node from kind's KubeletConfiguration patch (cgroupRoot /kubelet,
// failSwapOn false, image GC off at 100 %, evictionHard at 0 %), with the
// cgroupfs driver; only what must differ on this shared machine (ports,
// the cluster's CA, the static pod directory, the dev pod CIDR) is the
// test's.
func kindConfig(n *node, caFile string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: cgroupfs
cgroupRoot: %s
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionHard:
  imagefs.available: 0%%
  nodefs.available: 0%%
  nodefs.inodesFree: 0%%
evictionPressureTransitionPeriod: 0s
failSwapOn: false
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: %d
httpCheckFrequency: 0s
imageGCHighThresholdPercent: 100
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
podCIDR: 10.88.0.0/16
port: %d
readOnlyPort: %d
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: %s
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
`, caFile, kindCgroupRoot, n.healthzPort, n.apiPort, n.port, n.manifests)
}

// hostIPv4 is an IPv4 address of this machine's own network interface
// (not loopback, not a bridge or veth of the pods), as kind's node IP.
func hostIPv4(t *testing.T) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	must(t, err)
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		if strings.HasPrefix(iface.Name, "veth") || strings.HasPrefix(iface.Name, "skiff") || strings.HasPrefix(iface.Name, "cni") {
			continue
		}
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	t.Skip("no IPv4 address on a host interface")
	return ""
}

// removeCgroupTree removes root's cgroups in every hierarchy, deepest
// first (a cgroup with children cannot be removed).
func removeCgroupTree(root string) {
	dirs, _ := filepath.Glob(filepath.Join(cgroupMount, "*", root))
	dirs = append(dirs, filepath.Join(cgroupMount, root))
	for _, d := range dirs {
		var all []string
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(all[i])
		}
	}
}

// TestKindKubeletArgumentsRunAPod starts Skiff with the arguments and the
// config file a kind worker gives its kubelet; it registers, turns Ready
// and runs a pod in cgroups under /kubelet, and reports status.images.
func TestKindKubeletArgumentsRunAPod(t *testing.T) {
	t.Cleanup(func() { removeCgroupTree(kindCgroupRoot) }) // runs after Skiff stops
	nodeIP := hostIPv4(t)
	cn := newClusterNode(t)
	must(t, os.WriteFile(cn.config, []byte(kindConfig(cn.node, cn.c.CAFile())), 0o644))
	cn.start(
		"--node-ip="+nodeIP,
		"--provider-id=kind://docker/kind/kind-worker",
		"--node-labels=",
		"--runtime-cgroups=/system.slice/containerd.service",
	)
	cn.waitNodeReady(t, v1.ConditionTrue, 90*time.Second)

	node := cn.getNode(t)
	var internal []string
	for _, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			internal = append(internal, a.Address)
		}
	}
	if len(internal) != 1 || internal[0] != nodeIP {
		t.Errorf("InternalIP %v, want %s (--node-ip)", internal, nodeIP)
	}

	p := cn.createPod(t, busyboxPod("kind-pod", "exec sleep 3600"))
	running := cn.waitPod(t, cn.ns, p.Name, 90*time.Second, "Running and Ready", func(p *v1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				return p.Status.Phase == v1.PodRunning
			}
		}
		return false
	})
	// The pod's cgroup is under cgroupRoot /kubelet (BestEffort QoS).
	podCgroup := cgroupDir("cpu", filepath.Join(kindCgroupRoot, "kubepods", "besteffort", "pod"+string(running.UID)))
	if _, err := os.Stat(podCgroup); err != nil {
		t.Errorf("pod cgroup under %s: %v", kindCgroupRoot, err)
	}

	// status.images: the runtime's images, largest first, busybox among them.
	waitFor(t, 60*time.Second, "busybox in the Node's status.images", func() (bool, error) {
		for _, img := range cn.getNode(t).Status.Images {
			for _, name := range img.Names {
				if name == busybox {
					return true, nil
				}
			}
		}
		return false, nil
	})
	images := cn.getNode(t).Status.Images
	for i := 1; i < len(images); i++ {
		if images[i].SizeBytes > images[i-1].SizeBytes {
			t.Errorf("status.images not largest first: %d bytes after %d", images[i].SizeBytes, images[i-1].SizeBytes)
		}
	}
	if len(images) > 50 {
		t.Errorf("%d images reported, more than nodeStatusMaxImages' default 50", len(images))
	}
}
