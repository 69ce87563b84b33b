package config

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/featuregate"

	tracingapi "k8s.io/component-base/tracing/api/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// TestFieldTableCoversTheType walks every field of the v1beta1 type,
// nested structs included, and fails on any the table does not know, and
// on table entries the type does not have.
func TestFieldTableCoversTheType(t *testing.T) {
	paths := FieldPaths()
	if len(paths) < 130 {
		t.Fatalf("walked only %d fields", len(paths))
	}
	for _, want := range []string{"authentication.x509.clientCAFile", "logging.options.json.infoBufferSize",
		"crashLoopBackOff.maxContainerRestartPeriod", "tracing.endpoint", "memorySwap.swapBehavior", "userNamespaces.idsPerPod"} {
		if !contains(paths, want) {
			t.Errorf("walk did not reach %s", want)
		}
	}
	inType := map[string]bool{}
	for _, p := range paths {
		inType[p] = true
		if _, ok := FieldByPath(p); !ok {
			t.Errorf("KubeletConfiguration field %s is not in config.Fields", p)
		}
	}
	seen := map[string]bool{}
	for _, f := range Fields {
		if seen[f.Path] {
			t.Errorf("%s twice in config.Fields", f.Path)
		}
		seen[f.Path] = true
		if !inType[f.Path] {
			t.Errorf("config.Fields has %s, which KubeletConfiguration does not", f.Path)
		}
		if f.Handling != Honoured && f.Note == "" {
			t.Errorf("%s is %s without a note saying why", f.Path, f.Handling)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func warnedPaths(c *kubeletconfigv1beta1.KubeletConfiguration) []string {
	var out []string
	for _, w := range Unhonoured(c) {
		out = append(out, w.Path)
	}
	sort.Strings(out)
	return out
}

func TestUnhonouredNamesNonDefaultFields(t *testing.T) {
	c := &kubeletconfigv1beta1.KubeletConfiguration{}
	SetDefaults(c)
	if got := warnedPaths(c); len(got) != 0 {
		t.Fatalf("defaults warn about %v", got)
	}

	c = &kubeletconfigv1beta1.KubeletConfiguration{
		CPUManagerPolicy:            "static",
		ImageGCHighThresholdPercent: ptr.To[int32](100), // honoured
		MemoryManagerPolicy:         "Static",
		TopologyManagerPolicy:       "restricted",
		EvictionSoft:                map[string]string{}, // empty says nothing
		RegistryPullQPS:             ptr.To[int32](5),    // the default
		MaxPods:                     7,                   // honoured
		RunOnce:                     true,                // refused, by Validate
	}
	c.Tracing = &tracingapi.TracingConfiguration{Endpoint: ptr.To("otel:4317")}
	SetDefaults(c)
	want := []string{"cpuManagerPolicy", "memoryManagerPolicy", "topologyManagerPolicy", "tracing.endpoint"}
	if got := warnedPaths(c); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("warned about %v, want %v", got, want)
	}
}

func TestFeatureGateNamesAreChecked(t *testing.T) {
	for _, tc := range []struct {
		gates map[string]bool
		want  string // "" for valid
	}{
		{map[string]bool{"KubeletCrashLoopBackOffMax": true, "ContextualLogging": false}, ""},
		{map[string]bool{"NoSuchGate": true}, "unrecognized feature gate: NoSuchGate"},
		{map[string]bool{"APIServerTracing": false}, "cannot set feature gate APIServerTracing to false, feature is locked to true"},
		{map[string]bool{"PreventStaticPodAPIReferences": true}, ""},
		{map[string]bool{"PreventStaticPodAPIReferences": false}, "featureGates[PreventStaticPodAPIReferences]: Forbidden"},
	} {
		c := &kubeletconfigv1beta1.KubeletConfiguration{FeatureGates: tc.gates}
		SetDefaults(c)
		if tc.gates["KubeletCrashLoopBackOffMax"] {
			c.CrashLoopBackOff.MaxContainerRestartPeriod = nil
			SetDefaults(c)
		}
		err := Validate(c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.gates, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: got %v, want %q", tc.gates, err, tc.want)
		}
	}
}

func TestMergeDropInsLikeAJSONMergePatch(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("b.conf", "systemReserved: {cpu: 200m}\nallowedUnsafeSysctls: [net.x]\n")
	write("a.conf", "systemReserved: {memory: 1Gi, cpu: 100m}\nallowedUnsafeSysctls: [kernel.y, kernel.z]\nmaxPods: 9\n")
	base := &kubeletconfigv1beta1.KubeletConfiguration{MaxPods: 3, NodeStatusMaxImages: ptr.To[int32](7)}
	SetDefaults(base)
	got, err := MergeDropIns(base, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.SystemReserved["cpu"] != "200m" || got.SystemReserved["memory"] != "1Gi" {
		t.Errorf("systemReserved %v", got.SystemReserved)
	}
	if strings.Join(got.AllowedUnsafeSysctls, ",") != "net.x" {
		t.Errorf("allowedUnsafeSysctls %v", got.AllowedUnsafeSysctls)
	}
	if got.MaxPods != 9 || *got.NodeStatusMaxImages != 7 || got.Port != DefaultKubeletPort {
		t.Errorf("maxPods %d, nodeStatusMaxImages %d, port %d", got.MaxPods, *got.NodeStatusMaxImages, got.Port)
	}
	if err := os.WriteFile(filepath.Join(dir, "c.conf"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := MergeDropIns(base, dir); err == nil {
		t.Error("an empty drop-in was accepted")
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	for _, tc := range []struct {
		gates       map[string]bool
		max         time.Duration
		wantInitial time.Duration
		wantMaximum time.Duration
	}{
		{nil, 0, 10 * time.Second, 300 * time.Second},
		{map[string]bool{"KubeletCrashLoopBackOffMax": true}, 30 * time.Second, 10 * time.Second, 30 * time.Second},
		{map[string]bool{"KubeletCrashLoopBackOffMax": true}, 2 * time.Second, 2 * time.Second, 2 * time.Second},
		{map[string]bool{"ReduceDefaultCrashLoopBackOffDecay": true}, 0, time.Second, 60 * time.Second},
	} {
		c := &kubeletconfigv1beta1.KubeletConfiguration{FeatureGates: tc.gates}
		if tc.max > 0 {
			c.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: tc.max}
		}
		SetDefaults(c)
		if err := Validate(c); err != nil {
			t.Fatal(err)
		}
		initial, maximum := CrashLoopBackOff(c)
		if initial != tc.wantInitial || maximum != tc.wantMaximum {
			t.Errorf("%v max %v: got %v..%v, want %v..%v", tc.gates, tc.max, initial, maximum, tc.wantInitial, tc.wantMaximum)
		}
	}
}

// TestFeatureGatesMatchUpstreamKubelet checks the gate registry against
// the gates `kubelet --help` of the upstream binary lists (it lists the
// alpha, beta and deprecated ones, with their defaults).
func TestFeatureGatesMatchUpstreamKubelet(t *testing.T) {
	bin, err := filepath.Abs("../../_output/bin/kubelet")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("upstream kubelet not built: %v", err)
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("kubelet --help: %v", err)
	}
	line := regexp.MustCompile(`^\s+([A-Za-z0-9]+)=true\|false \((ALPHA|BETA|DEPRECATED) - default=(true|false)\)`)
	listed := 0
	for _, l := range strings.Split(string(out), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil || m[1] == "AllAlpha" || m[1] == "AllBeta" {
			continue
		}
		listed++
		spec, ok := kubeletFeatureGates1_34[featuregate.Feature(m[1])]
		if !ok {
			t.Errorf("upstream gate %s is unknown to Skiff", m[1])
			continue
		}
		if string(spec.PreRelease) != m[2] || fmt.Sprint(spec.Default) != m[3] {
			t.Errorf("gate %s: Skiff has %s default %v, upstream %s default %s", m[1], spec.PreRelease, spec.Default, m[2], m[3])
		}
	}
	if listed < 100 {
		t.Errorf("only %d gates parsed from kubelet --help", listed)
	}
}
