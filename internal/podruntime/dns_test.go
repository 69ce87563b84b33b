package podruntime

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestDNSPolicies(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("# node\nnameserver 192.0.2.53\nsearch corp.example\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cluster := DNS{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: resolv}
	two := "2"
	pod := func(policy v1.DNSPolicy, hostNet bool, dc *v1.PodDNSConfig) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: v1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet, DNSConfig: dc}}
	}
	cases := []struct {
		name                      string
		dns                       DNS
		pod                       *v1.Pod
		servers, searches, option []string
		ok                        bool
	}{
		{"cluster first", cluster, pod(v1.DNSClusterFirst, false, nil),
			[]string{"10.96.0.10"}, []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, []string{"ndots:5"}, true},
		{"cluster first on the host network is Default", cluster, pod(v1.DNSClusterFirst, true, nil),
			[]string{"192.0.2.53"}, []string{"corp.example"}, []string{"edns0"}, true},
		{"cluster first with host net", cluster, pod(v1.DNSClusterFirstWithHostNet, true, nil),
			[]string{"10.96.0.10"}, []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, []string{"ndots:5"}, true},
		{"no cluster DNS falls back to Default", DNS{ResolvConf: resolv}, pod(v1.DNSClusterFirst, false, nil),
			[]string{"192.0.2.53"}, []string{"corp.example"}, []string{"edns0"}, false},
		{"none with dnsConfig", cluster, pod(v1.DNSNone, false, &v1.PodDNSConfig{
			Nameservers: []string{"1.2.3.4"}, Searches: []string{"a.example"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}}}),
			[]string{"1.2.3.4"}, []string{"a.example"}, []string{"ndots:2"}, true},
		{"dnsConfig merges into cluster first", cluster, pod(v1.DNSClusterFirst, false, &v1.PodDNSConfig{
			Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "rotate"}}}),
			[]string{"10.96.0.10"}, []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, []string{"ndots:2", "rotate"}, true},
	}
	for _, c := range cases {
		cfg, ok, err := c.dns.dnsConfig(c.pod)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ok != c.ok || !reflect.DeepEqual(cfg.Servers, c.servers) || !reflect.DeepEqual(cfg.Searches, c.searches) || !reflect.DeepEqual(cfg.Options, c.option) {
			t.Errorf("%s: ok=%v servers=%v searches=%v options=%v", c.name, ok, cfg.Servers, cfg.Searches, cfg.Options)
		}
	}
}

func TestHostsFile(t *testing.T) {
	dir := t.TempDir()
	m := New(Config{PodDir: func(uid types.UID) string { return filepath.Join(dir, string(uid)) }, DNS: DNS{ClusterDomain: "cluster.local"}})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: "u1"}, Spec: v1.PodSpec{
		Subdomain:   "web",
		HostAliases: []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"foo.local", "bar.local"}}},
		Containers:  []v1.Container{{Name: "c"}},
	}}
	path, err := m.writeHostsFile(pod, []string{"10.88.0.9"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	for _, want := range []string{"127.0.0.1\tlocalhost", "10.88.0.9\tweb-0.web.ns.svc.cluster.local\tweb-0", "# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("hosts file lacks %q:\n%s", want, b)
		}
	}
	if hostsMount(&pod.Spec.Containers[0], path) == nil {
		t.Error("no /etc/hosts mount")
	}
	own := &v1.Container{VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/etc/hosts"}}}
	if hostsMount(own, path) != nil {
		t.Error("a container mounting its own /etc/hosts got Skiff's too")
	}
}
