package admission

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func withSysctls(hostNet, hostIPC bool, names ...string) *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{HostNetwork: hostNet, HostIPC: hostIPC, SecurityContext: &v1.PodSecurityContext{}}}
	for _, n := range names {
		p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
	}
	return p
}

func TestSysctls(t *testing.T) {
	s, err := NewSysctls([]string{"kernel.msg*", "net.core.somaxconn"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		want string // "" = admitted
	}{
		{"none", &v1.Pod{}, ""},
		{"safe", withSysctls(false, false, "net.ipv4.ip_local_port_range", "kernel.shm_rmid_forced"), ""},
		{"slash form of a safe one", withSysctls(false, false, "net/ipv4/tcp_syncookies"), ""},
		{"allowed unsafe name", withSysctls(false, false, "net.core.somaxconn"), ""},
		{"allowed unsafe prefix", withSysctls(false, false, "kernel.msgmax"), ""},
		{"unsafe", withSysctls(false, false, "kernel.sem"), `forbidden sysctl: "kernel.sem" not allowlisted`},
		{"net sysctl with host network", withSysctls(true, false, "net.ipv4.tcp_syncookies"), `not allowed with host Net enabled`},
		{"ipc sysctl with host ipc", withSysctls(false, true, "kernel.shm_rmid_forced"), `not allowed with host IPC enabled`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.Admit(tc.pod)
			if tc.want == "" {
				if !r.Admit {
					t.Fatalf("rejected: %+v", r)
				}
				return
			}
			if r.Admit || r.Reason != ReasonSysctlForbidden || !strings.Contains(r.Message, tc.want) {
				t.Fatalf("got %+v, want SysctlForbidden %q", r, tc.want)
			}
		})
	}
	for _, bad := range []string{"vm.swappiness", "kernel.*", "net.*.x*"} {
		if _, err := NewSysctls([]string{bad}); err == nil {
			t.Errorf("allowedUnsafeSysctls %q accepted", bad)
		}
	}
}

func portPod(name string, ports ...v1.ContainerPort) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Ports: ports}}}}
}

func TestLocalAdmit(t *testing.T) {
	held := portPod("web", v1.ContainerPort{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP, HostIP: "10.0.0.1"})
	strict := v1.SupplementalGroupsPolicyStrict
	cases := []struct {
		name   string
		local  Local
		pod    *v1.Pod
		reason string
	}{
		{"different port", Local{}, portPod("a", v1.ContainerPort{ContainerPort: 80, HostPort: 8081}), ""},
		{"same port, other protocol", Local{}, portPod("a", v1.ContainerPort{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolUDP}), ""},
		{"same port, other address", Local{}, portPod("a", v1.ContainerPort{ContainerPort: 80, HostPort: 8080, HostIP: "10.0.0.2"}), ""},
		{"same port, wildcard address", Local{}, portPod("a", v1.ContainerPort{ContainerPort: 80, HostPort: 8080, HostIP: "0.0.0.0"}), ReasonNodePorts},
		{"same port, default protocol", Local{}, portPod("a", v1.ContainerPort{ContainerPort: 81, HostPort: 8080, HostIP: "10.0.0.1"}), ReasonNodePorts},
		{"the pod itself", Local{}, held, ""},
		{"apparmor without apparmor", Local{}, &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}}}, ReasonAppArmor},
		{"apparmor annotation", Local{}, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}}}, ReasonAppArmor},
		{"apparmor unconfined", Local{}, &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", SecurityContext: &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}}}}}}, ""},
		{"apparmor on an apparmor host", Local{AppArmor: true}, &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}}}, ""},
		{"strict supplemental groups", Local{}, &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{SupplementalGroupsPolicy: &strict}}}, ReasonSupplementalGroupsPolicy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.local.Admit(tc.pod, []*v1.Pod{held})
			if r.Admit != (tc.reason == "") || r.Reason != tc.reason {
				t.Fatalf("got %+v, want reason %q", r, tc.reason)
			}
			if tc.reason == ReasonNodePorts && !strings.Contains(r.Message, "didn't have free ports") {
				t.Errorf("message %q", r.Message)
			}
		})
	}
}
