package main

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestConfigFlagsOverrideTheFile(t *testing.T) {
	fakeHostname(t, "node", nil)
	file := writeConfig(t, configHeader+`
maxPods: 42
failSwapOn: false
evictionHard: {memory.available: 1Gi}
featureGates: {KubeletCrashLoopBackOffMax: true, ContextualLogging: false}
crashLoopBackOff: {maxContainerRestartPeriod: 1m}
syncFrequency: 2m
registerWithTaints: [{key: a, value: b, effect: NoSchedule}]
`)
	cfg, err := parseConfig([]string{"--config", file,
		"--max-pods=7", "--eviction-hard=nodefs.available<1%", "--feature-gates=ContextualLogging=true",
		"--image-gc-high-threshold=100", "--fail-swap-on", "--register-with-taints=c=d:NoExecute",
		"--manifest-url=http://example.com/pods", "--manifest-url-header=a:1,a:2", "--manifest-url-header=b:3",
		"--address=127.0.0.2", "--kube-reserved=cpu=100m,memory=100Mi", "--reserved-memory=0:memory=1Gi",
		"--cpu-manager-policy-options=full-pcpus-only=true", "--cpu-manager-policy-options=a=b,c"})
	if err != nil {
		t.Fatal(err)
	}
	kc := cfg.Kubelet
	r := &result{cfg: cfg}
	r.eq(t, "maxPods", kc.MaxPods, int32(7))
	r.eq(t, "syncFrequency (file only)", kc.SyncFrequency.Duration, 2*time.Minute)
	r.eq(t, "imageGCHighThresholdPercent", *kc.ImageGCHighThresholdPercent, int32(100))
	r.eq(t, "failSwapOn", *kc.FailSwapOn, true)
	r.eq(t, "address", kc.Address, "127.0.0.2")
	r.eq(t, "staticPodURL", kc.StaticPodURL, "http://example.com/pods")
	if !reflect.DeepEqual(kc.EvictionHard, map[string]string{"nodefs.available": "1%"}) {
		t.Errorf("evictionHard %v: the flag replaces the file's map", kc.EvictionHard)
	}
	// Gates merge: the flag's gate wins, the file's other gates stay.
	if !reflect.DeepEqual(kc.FeatureGates, map[string]bool{"KubeletCrashLoopBackOffMax": true, "ContextualLogging": true}) {
		t.Errorf("featureGates %v", kc.FeatureGates)
	}
	if len(kc.RegisterWithTaints) != 1 || kc.RegisterWithTaints[0].Key != "c" {
		t.Errorf("registerWithTaints %v", kc.RegisterWithTaints)
	}
	if !reflect.DeepEqual(kc.StaticPodURLHeader, map[string][]string{"a": {"1", "2"}, "b": {"3"}}) {
		t.Errorf("staticPodURLHeader %v", kc.StaticPodURLHeader)
	}
	if kc.KubeReserved["memory"] != "100Mi" || kc.KubeReserved["cpu"] != "100m" {
		t.Errorf("kubeReserved %v", kc.KubeReserved)
	}
	if len(kc.ReservedMemory) != 1 || kc.ReservedMemory[0].Limits.Memory().String() != "1Gi" {
		t.Errorf("reservedMemory %v", kc.ReservedMemory)
	}
	if len(kc.CPUManagerPolicyOptions) != 2 || kc.CPUManagerPolicyOptions["a"] != "b,c" {
		t.Errorf("cpuManagerPolicyOptions %v", kc.CPUManagerPolicyOptions)
	}
}

func TestConfigDirDropInsMergeUnderFlags(t *testing.T) {
	fakeHostname(t, "node", nil)
	file := writeConfig(t, configHeader+"maxPods: 42\nevictionHard: {memory.available: 1Gi}\nclusterDNS: [10.0.0.10]\n")
	dir := t.TempDir()
	for name, content := range map[string]string{
		"10-a.conf":     configHeader + "maxPods: 50\nevictionHard: {nodefs.available: 1%}\n",
		"20-b.conf":     configHeader + "maxPods: 60\nclusterDNS: [10.0.0.20]\n",
		"ignored.yaml":  configHeader + "maxPods: 99\n",
		"sub/30-c.conf": configHeader + "podsPerCore: 3\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := parseConfig([]string{"--config", file, "--config-dir", dir})
	if err != nil {
		t.Fatal(err)
	}
	kc := cfg.Kubelet
	r := &result{cfg: cfg}
	r.eq(t, "maxPods (last drop-in)", kc.MaxPods, int32(60))
	r.eq(t, "podsPerCore (subdirectory)", kc.PodsPerCore, int32(3))
	if !reflect.DeepEqual(kc.ClusterDNS, []string{"10.0.0.20"}) {
		t.Errorf("clusterDNS %v: lists replace", kc.ClusterDNS)
	}
	if kc.EvictionHard["memory.available"] != "1Gi" || kc.EvictionHard["nodefs.available"] != "1%" {
		t.Errorf("evictionHard %v: maps merge", kc.EvictionHard)
	}
	cfg, err = parseConfig([]string{"--config", file, "--config-dir", dir, "--max-pods=5"})
	if err != nil {
		t.Fatal(err)
	}
	r.eq(t, "maxPods (flag over drop-ins)", cfg.Kubelet.MaxPods, int32(5))

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "x.conf"), []byte(configHeader+"maxPod: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseConfig([]string{"--config-dir", bad}); err == nil || !strings.Contains(err.Error(), `unknown field "maxPod"`) {
		t.Errorf("drop-in with an unknown field: %v", err)
	}
}

func TestNodeLabelsAsUpstream(t *testing.T) {
	fakeHostname(t, "node", nil)
	cfg, err := parseConfig([]string{"--node-labels="}) // kind passes this
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.NodeLabels) != 0 {
		t.Errorf("labels %v", cfg.NodeLabels)
	}
	cfg, err = parseConfig([]string{"--node-labels=node.kubernetes.io/pool=,topology.kubernetes.io/zone=z1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.NodeLabels) != 2 {
		t.Errorf("labels %v", cfg.NodeLabels)
	}
	for _, bad := range []string{"node-role.kubernetes.io/worker=", "kubernetes.io/role=x", "a=b c"} {
		if _, err := parseConfig([]string{"--node-labels=" + bad}); err == nil {
			t.Errorf("--node-labels=%s accepted", bad)
		}
	}
}

func TestUnimplementedFlagsAreAcceptedWithAWarning(t *testing.T) {
	fakeHostname(t, "node", nil)
	p, err := parse([]string{"--lock-file=/var/run/lock", "--housekeeping-interval=10s", "--cloud-provider=external",
		"--runtime-cgroups=/rt", "--cert-dir=/x/pki", "--pod-infra-container-image=registry.k8s.io/pause:3.10.1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for _, w := range p.warnings {
		flags = append(flags, w.flag)
	}
	joined := strings.Join(flags, "\n")
	// --pod-infra-container-image gets upstream's own line: the runtime
	// owns the sandbox image there too.
	for _, name := range []string{"--lock-file", "--housekeeping-interval", "--runtime-cgroups", "--pod-infra-container-image"} {
		if !strings.Contains(joined, name) {
			t.Errorf("no warning names %s: %q", name, joined)
		}
	}
	for _, name := range []string{"--cert-dir", "--cloud-provider"} {
		if strings.Contains(joined, name) {
			t.Errorf("%s is honoured, yet warned about: %q", name, joined)
		}
	}
	r := &result{cfg: p.cfg}
	r.eq(t, "cert dir", p.cfg.CertDir, "/x/pki")
	if _, err := parseConfig([]string{"--cloud-provider=aws"}); err == nil || !strings.Contains(err.Error(), "built-in cloud providers are disabled") {
		t.Errorf("--cloud-provider=aws: %v", err)
	}
}

// TestKindNodeArguments parses what a kind node gives its kubelet: the
// config kubeadm writes and the flags of kubeadm-flags.env and
// /etc/default/kubelet.
func TestKindNodeArguments(t *testing.T) {
	p, err := parse([]string{
		"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--config=testdata/kind-kubelet-config.yaml",
		"--container-runtime-endpoint=unix:///run/containerd/containerd.sock", "--node-ip=172.18.0.3",
		"--node-labels=", "--provider-id=kind://docker/kind/kind-worker",
		"--runtime-cgroups=/system.slice/containerd.service", "--hostname-override=kind-worker",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	kc := p.cfg.Kubelet
	r := &result{cfg: p.cfg}
	r.eq(t, "cgroupRoot", kc.CgroupRoot, "/kubelet")
	r.eq(t, "providerID", kc.ProviderID, "kind://docker/kind/kind-worker")
	r.eq(t, "endpoint", kc.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock")
	r.eq(t, "syncFrequency (0s defaults)", kc.SyncFrequency.Duration, time.Minute)
	r.eq(t, "failSwapOn", *kc.FailSwapOn, false)
	if len(p.warnings) != 1 || p.warnings[0].flag != "--runtime-cgroups" {
		t.Errorf("flag warnings %v", p.warnings)
	}
}
