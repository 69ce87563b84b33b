//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The test containerd's pod network: its own bridge and subnet, so it
// never meets the dev containerd's skiff0 and 10.88.0.0/16.
const (
	systemdBridge = "skiffsd0"
	systemdSubnet = "10.89.0.0/24"
)

// systemdContainerdConfig is hack/containerd.sh's configuration for a
// containerd of the test's own (root, state, socket, CNI), with runc's
// systemd cgroup driver: containers become scopes in their pod's slice.
const systemdContainerdConfig = `version = 2
root = "%[1]s/root"
state = "/run/skiff-e2e-containerd"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.internal.v1.opt",
]

[grpc]
  address = "%[1]s/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "registry.k8s.io/pause:3.10"
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "%[2]s"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[1]s/net.d"
`

// bridgeCNIConfig is the pod network of a test's own containerd: a
// bridge of its own name with host-local addresses from subnet, kept in
// dir/ipam, and portmap.
func bridgeCNIConfig(name, bridge, dir, subnet string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "%s",
  "plugins": [
    {
      "type": "bridge", "bridge": "%s", "isGateway": true, "ipMasq": true,
      "ipam": { "type": "host-local", "dataDir": "%s/ipam", "ranges": [[{ "subnet": "%s" }]] }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
`, name, bridge, dir, subnet)
}

var criPluginOK = regexp.MustCompile(`(?m)^io\.containerd\.grpc\.v1 +cri .* ok *$`)

// startSystemdContainerd runs a containerd of the test's own as a service
// of sd, with the dev containerd's pause and busybox images imported; it
// returns its CRI endpoint. It goes with sd's namespaces; its files and
// bridge are removed after.
func startSystemdContainerd(t *testing.T, sd *systemdNS) string {
	t.Helper()
	dir := "/var/lib/skiff-e2e-systemd"
	_ = os.RemoveAll(dir)
	must(t, os.MkdirAll(filepath.Join(dir, "net.d"), 0o755))
	sd.afterStop = append(sd.afterStop, func() {
		_ = os.RemoveAll(dir)
		_ = exec.Command("ip", "link", "del", systemdBridge).Run()
	})
	snapshotter := "overlayfs"
	if out, _ := exec.Command("stat", "-f", "-c", "%T", dir).Output(); strings.TrimSpace(string(out)) == "overlayfs" {
		snapshotter = "native" // overlay cannot stack on overlay
	}
	cfg := filepath.Join(dir, "containerd.toml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(systemdContainerdConfig, dir, snapshotter)), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "net.d", "10-skiff-e2e.conflist"),
		[]byte(bridgeCNIConfig("skiff-e2e-systemd", systemdBridge, dir, systemdSubnet)), 0o644))
	logPath := filepath.Join(dir, "containerd.log")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("test containerd log:\n%s", tail(string(b), 40))
		}
	})
	sd.service("skiff-e2e-containerd", logPath, "/usr/bin/containerd", "--config", cfg)
	sock := filepath.Join(dir, "containerd.sock")
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := exec.Command("ctr", "--address", sock, "plugins", "ls").CombinedOutput()
		// ctr prints the plugin's type and ID as columns: "io.containerd.grpc.v1  cri  ...  ok".
		if err == nil && criPluginOK.Match(out) {
			break
		}
		if time.Now().After(deadline) {
			// containerd dumps its goroutines into its log on SIGUSR1.
			status, _ := sd.run("systemctl", "status", "--no-pager", "skiff-e2e-containerd")
			_, _ = sd.run("systemctl", "kill", "-s", "SIGUSR1", "skiff-e2e-containerd")
			time.Sleep(2 * time.Second)
			b, _ := os.ReadFile(logPath)
			t.Fatalf("the test containerd's CRI plugin did not answer within 90s: %v\n%s\n%s\nlog:\n%s", err, out, status, tail(string(b), 300))
		}
		time.Sleep(500 * time.Millisecond)
	}
	tarball := filepath.Join(t.TempDir(), "images.tar")
	dev := strings.TrimPrefix(criEndpoint, "unix://")
	for _, args := range [][]string{
		{"--address", dev, "-n", "k8s.io", "images", "export", tarball, "registry.k8s.io/pause:3.10", busybox},
		{"--address", sock, "-n", "k8s.io", "images", "import", "--snapshotter", snapshotter, tarball},
	} {
		if out, err := exec.Command("ctr", args...).CombinedOutput(); err != nil {
			t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return "unix://" + sock
}

// startSkiffIn runs the node's Skiff as a service of sd, as a node's unit
// would, with the container runtime at endpoint, and waits for its
// healthz. The cleanup stops it.
func startSkiffIn(t *testing.T, sd *systemdNS, n *node, endpoint string) {
	t.Helper()
	argv := append([]string{skiffBin,
		"--config", n.config,
		"--container-runtime-endpoint", endpoint,
		"--root-dir", n.root,
		"--pod-manifest-path", n.manifests,
		"--hostname-override", nodeName,
		"--device-plugin-dir", n.devicePluginDir(),
		"--v", "2",
	}, n.args...)
	sd.service("skiff-e2e-kubelet", n.logPath, argv...)
	t.Cleanup(func() {
		if out, err := sd.run("systemctl", "stop", "skiff-e2e-kubelet"); err != nil {
			t.Logf("stop skiff: %v\n%s", err, out)
		}
	})
	waitFor(t, 60*time.Second, "skiff healthz", func() (bool, error) {
		if s := sd.unitProperty("skiff-e2e-kubelet", "ActiveState"); s == "failed" || s == "inactive" {
			return false, fmt.Errorf("skiff exited: %s", tail(n.log(), 20))
		}
		resp, err := http.Get(n.url("/healthz"))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// Under a real systemd (PID 1 of its own namespaces) and a containerd
// whose runc uses the systemd cgroup driver, Skiff with cgroupDriver
// systemd (containerd 1.6 does not implement RuntimeConfig, so the
// configured driver holds) puts pods in systemd slices: the QoS slices
// and kubepods-<qos>-pod<uid>.slice are active units carrying the pod's
// limits, the containers are scopes in them, and deleting the pods stops
// and removes their slices.
func TestSystemdCgroupDriver(t *testing.T) {
	cn := newClusterNode(t)
	b, err := os.ReadFile(cn.config)
	must(t, err)
	cfg := strings.Replace(string(b), "cgroupRoot: "+e2eCgroupRoot+"\n", "cgroupRoot: /\ncgroupDriver: systemd\n", 1)
	if cfg == string(b) {
		t.Fatalf("the node config has no cgroupRoot line to replace:\n%s", b)
	}
	must(t, os.WriteFile(cn.config, []byte(cfg), 0o644))

	sd := startSystemd(t, "node")
	endpoint := startSystemdContainerd(t, sd)
	startSkiffIn(t, sd, cn.node, endpoint)
	cn.waitNodeReady(t, v1.ConditionTrue, 90*time.Second)

	for _, slice := range []string{"kubepods.slice", "kubepods-burstable.slice", "kubepods-besteffort.slice"} {
		if s := sd.unitProperty(slice, "ActiveState"); s != "active" {
			t.Errorf("QoS slice %s is %q, want active", slice, s)
		}
	}

	limited := busyboxPod("limited", sleeper)
	limited.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	cn.createPod(t, limited)
	cn.createPod(t, busyboxPod("besteffort", sleeper))
	running := func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning && isReady(p) }
	lp := cn.waitPod(t, cn.ns, "limited", 90*time.Second, "Running and Ready", running)
	bp := cn.waitPod(t, cn.ns, "besteffort", 90*time.Second, "Running and Ready", running)

	unit := "kubepods-burstable-pod" + strings.ReplaceAll(string(lp.UID), "-", "_") + ".slice"
	slicePath := "/kubepods.slice/kubepods-burstable.slice/" + unit
	if s := sd.unitProperty(unit, "ActiveState"); s != "active" {
		t.Errorf("pod slice %s is %q, want active", unit, s)
	}
	if got := sd.unitProperty(unit, "ControlGroup"); got != slicePath {
		t.Errorf("pod slice's cgroup %q, want %q", got, slicePath)
	}
	hostPath := sd.cgroup + slicePath // where the namespace's cgroups are on the host
	if v2 := cgroupV2(); v2 {
		if got := cgroupFile(t, "cpu", hostPath, "cpu.max"); got != "50000 100000" {
			t.Errorf("pod slice cpu.max %q, want 50000 100000 (500m)", got)
		}
		if got := cgroupFile(t, "memory", hostPath, "memory.max"); got != "67108864" {
			t.Errorf("pod slice memory.max %q, want 64Mi", got)
		}
	} else {
		if got := cgroupFile(t, "cpu", hostPath, "cpu.cfs_quota_us"); got != "50000" {
			t.Errorf("pod slice CFS quota %q, want 50000 (500m)", got)
		}
		if got := cgroupFile(t, "cpu", hostPath, "cpu.shares"); got != "256" {
			t.Errorf("pod slice cpu.shares %q, want 256 (250m)", got)
		}
		if got := cgroupFile(t, "memory", hostPath, "memory.limit_in_bytes"); got != "67108864" {
			t.Errorf("pod slice memory limit %q, want 64Mi", got)
		}
	}
	id := strings.TrimPrefix(lp.Status.ContainerStatuses[0].ContainerID, "containerd://")
	scope := "cri-containerd-" + id + ".scope"
	if got := sd.unitProperty(scope, "Slice"); got != unit {
		t.Errorf("container scope %s is in slice %q, want %s", scope, got, unit)
	}
	if got := cgroupFile(t, "memory", filepath.Join(hostPath, scope), memoryLimitFile()); got != "67108864" {
		t.Errorf("container memory limit %q, want 64Mi", got)
	}
	beUnit := "kubepods-besteffort-pod" + strings.ReplaceAll(string(bp.UID), "-", "_") + ".slice"
	if s := sd.unitProperty(beUnit, "ActiveState"); s != "active" {
		t.Errorf("BestEffort pod slice %s is %q, want active", beUnit, s)
	}

	cn.deleteAllPods()
	for _, u := range []string{unit, beUnit} {
		waitFor(t, 60*time.Second, "pod slice "+u+" stopped", func() (bool, error) {
			return sd.unitProperty(u, "ActiveState") == "inactive", nil
		})
	}
	for _, c := range []string{"cpu", "memory"} {
		if _, err := os.Stat(cgroupDir(c, hostPath)); !os.IsNotExist(err) {
			t.Errorf("pod slice's %s cgroup left after the pod: %v", c, err)
		}
	}
	if s := sd.unitProperty("kubepods-burstable.slice", "ActiveState"); s != "active" {
		t.Errorf("QoS slice went with the pods: %q", s)
	}
}

func cgroupV2() bool {
	_, err := os.Stat(filepath.Join(cgroupMount, "cgroup.controllers"))
	return err == nil
}

func memoryLimitFile() string {
	if cgroupV2() {
		return "memory.max"
	}
	return "memory.limit_in_bytes"
}
