//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The security context: runAsUser
// and readOnlyRootFilesystem enforced inside the container, runAsNonRoot
// refusing the (root) busybox image, capabilities, privileged, no_new_privs,
// seccomp, masked /proc paths (/proc/timer_list) and sysctls as the container sees them.
func TestSecurityContext(t *testing.T) {
	cn := sharedNode(t)
	// A Localhost seccomp profile in <root-dir>/seccomp that denies mkdir.
	must(t, os.MkdirAll(filepath.Join(cn.root, "seccomp"), 0o755))
	must(t, os.WriteFile(filepath.Join(cn.root, "seccomp", "deny-mkdir.json"), []byte(
		`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`), 0o644))
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	report := "id -u; id -G; touch /tmp/probe 2>&1 && echo ROOTFS-WRITABLE; " +
		"grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; echo masked=$(grep -c ' /proc/timer_list ' /proc/self/mountinfo); " +
		"echo syncookies=$(cat /proc/sys/net/ipv4/tcp_syncookies); " + sleeper

	nobody := busyboxPod("nobody", report)
	nobody.Spec.SecurityContext = &v1.PodSecurityContext{
		RunAsUser: ptr.To[int64](1000), SupplementalGroups: []int64{4000}, FSGroup: ptr.To[int64](5000),
		SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
		Sysctls:        []v1.Sysctl{{Name: "net.ipv4.tcp_syncookies", Value: "0"}},
	}
	nobody.Spec.Containers[0].SecurityContext = &v1.SecurityContext{
		RunAsUser: ptr.To[int64](65534), RunAsGroup: ptr.To[int64](65534), // the container's wins
		ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
	}
	caps := busyboxPod("caps", report)
	caps.Spec.Containers[0].SecurityContext = &v1.SecurityContext{
		Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}, Add: []v1.Capability{"NET_ADMIN"}},
	}
	priv := busyboxPod("priv", report)
	priv.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	plain := busyboxPod("plain", report)
	rootImage := busyboxPod("rootimage", sleeper)
	rootImage.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
	unsafe := busyboxPod("unsafe-sysctl", sleeper)
	unsafe.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "9000"}}}
	localSeccomp := busyboxPod("local-seccomp", "mkdir /tmp/made 2>&1 || true; "+sleeper)
	localSeccomp.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{
		Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("deny-mkdir.json")}}
	// On a host without AppArmor a pod asking for a profile is refused.
	armored := busyboxPod("apparmor", sleeper)
	armored.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
	for _, p := range []*v1.Pod{nobody, caps, priv, plain, rootImage, unsafe, localSeccomp, armored} {
		cn.createPod(t, p)
	}

	out := func(name string, want ...string) {
		t.Helper()
		var text, missing string
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			text, missing = cn.output(t, name), ""
			for _, w := range want {
				if !regexp.MustCompile(w).MatchString(text) {
					missing = w
				}
			}
			if missing == "" {
				return
			}
			time.Sleep(300 * time.Millisecond)
		}
		p, _ := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), name, metav1.GetOptions{})
		raw, _ := os.ReadFile(filepath.Join(podLogsRoot, cn.ns+"_"+name+"_"+string(p.UID), "main", "0.log"))
		t.Errorf("%s (%s): no %q in its output:\n%s", name, p.Status.Phase, missing, raw)
	}
	// 0x1000 is CAP_NET_ADMIN alone; a0...fb is the runtime's default set.
	out("nobody", `(?m)^65534$`, `(?m)^65534 4000 5000$`, "touch: /tmp/probe: Read-only file system", `NoNewPrivs:\s+1`, `Seccomp:\s+2`, "masked=1", "syncookies=0")
	out("caps", "ROOTFS-WRITABLE", `CapEff:\s+0000000000001000`, `NoNewPrivs:\s+0`, `Seccomp:\s+0`)
	out("plain", `(?m)^0$`, "ROOTFS-WRITABLE", `CapEff:\s+00000000a80425fb`, "masked=1", "syncookies=1")
	host, err := os.ReadFile("/proc/self/status")
	must(t, err)
	hostCaps := regexp.MustCompile(`CapBnd:\s+(\w+)`).FindStringSubmatch(string(host))[1]
	// Privileged: every capability the runtime has, and /proc unmasked.
	out("priv", `CapEff:\s+`+hostCaps, "masked=0")
	out("local-seccomp", "mkdir: can't create directory '/tmp/made': Operation not permitted")

	want := "container has runAsNonRoot and image will run as root (pod: \"rootimage_" + cn.ns
	cn.waitPod(t, cn.ns, "rootimage", 60*time.Second, "CreateContainerConfigError", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError" && strings.HasPrefix(w.Message, want)
	})
	cn.waitEvent(t, "Failed", "Error: "+want)

	got := cn.waitPod(t, cn.ns, "unsafe-sysctl", 30*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if got.Status.Reason != "SysctlForbidden" || !strings.Contains(got.Status.Message, `forbidden sysctl: "kernel.msgmax" not allowlisted`) {
		t.Errorf("unsafe sysctl pod: reason %q message %q", got.Status.Reason, got.Status.Message)
	}
	if n := len(sandboxesOf(t, string(got.UID))); n != 0 {
		t.Errorf("a rejected pod got %d sandboxes", n)
	}
	cn.waitEvent(t, "SysctlForbidden", "forbidden sysctl")

	if b, _ := os.ReadFile("/sys/module/apparmor/parameters/enabled"); !strings.HasPrefix(string(b), "Y") {
		got = cn.waitPod(t, cn.ns, "apparmor", 30*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		if got.Status.Reason != "AppArmor" || !strings.Contains(got.Status.Message, "AppArmor is not enabled on the host") {
			t.Errorf("AppArmor pod: reason %q message %q", got.Status.Reason, got.Status.Message)
		}
	}
}

// A hostPID pod sees the host's processes and a
// hostIPC pod shares the host's IPC namespace; a pod that asks for a host
// port another pod holds is rejected at admission.
func TestHostNamespacesAndPortClash(t *testing.T) {
	cn := sharedNode(t)
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	script := "readlink /proc/self/ns/pid; readlink /proc/self/ns/ipc; echo procs=$(ls /proc 2>/dev/null | grep -c '^[0-9]'); " + sleeper
	hostns := busyboxPod("hostns", script)
	hostns.Spec.HostPID, hostns.Spec.HostIPC = true, true
	own := busyboxPod("ownns", script)
	port := int32(freePort(t))
	first := busyboxPod("port-first", sleeper)
	first.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 8080, HostPort: port}}
	for _, p := range []*v1.Pod{hostns, own, first} {
		cn.createPod(t, p)
	}
	// The two namespace links, then the process count; processes that go
	// while ls runs may add stderr lines, which are skipped.
	lines := func(name string) []string {
		var l []string
		waitFor(t, 60*time.Second, name+" output", func() (bool, error) {
			l = nil
			for _, line := range strings.Split(cn.output(t, name), "\n") {
				if strings.HasPrefix(line, "pid:") || strings.HasPrefix(line, "ipc:") || strings.HasPrefix(line, "procs=") {
					l = append(l, line)
				}
			}
			return len(l) >= 3, nil
		})
		return l
	}
	hostPID, _ := os.Readlink("/proc/self/ns/pid")
	hostIPC, _ := os.Readlink("/proc/self/ns/ipc")
	h, o := lines("hostns"), lines("ownns")
	if h[0] != hostPID || h[1] != hostIPC {
		t.Errorf("hostPID/hostIPC pod namespaces %v, host's %s %s", h[:2], hostPID, hostIPC)
	}
	if o[0] == hostPID || o[1] == hostIPC {
		t.Errorf("a plain pod shares the host's namespaces: %v", o[:2])
	}
	var hn, on int
	fmt.Sscanf(h[2], "procs=%d", &hn)
	fmt.Sscanf(o[2], "procs=%d", &on)
	if hn < 20 || on > 6 { // the plain pod: sh, its subshell, ls and grep
		t.Errorf("processes seen: hostPID pod %d, plain pod %d", hn, on)
	}

	cn.waitPod(t, cn.ns, "port-first", 60*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	second := busyboxPod("port-second", sleeper)
	second.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 9090, HostPort: port}}
	cn.createPod(t, second)
	got := cn.waitPod(t, cn.ns, "port-second", 30*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if got.Status.Reason != "NodePorts" || !strings.Contains(got.Status.Message, "didn't have free ports") ||
		!strings.Contains(got.Status.Message, fmt.Sprintf("hostPort %d/TCP is used by pod %s/port-first", port, cn.ns)) {
		t.Errorf("reason %q message %q", got.Status.Reason, got.Status.Message)
	}
	if n := len(sandboxesOf(t, string(got.UID))); n != 0 {
		t.Errorf("a rejected pod got %d sandboxes", n)
	}
	cn.waitEvent(t, "NodePorts", "didn't have free ports")
	if p := cn.getPod(t, "port-first"); p.Status.Phase != v1.PodRunning {
		t.Errorf("the pod holding the port is %s", p.Status.Phase)
	}
}

// waitEvent waits for an event in the test namespace with that reason and
// a message containing msg.
func (cn *clusterNode) waitEvent(t *testing.T, reason, msg string) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("event %s %q", reason, msg), func() (bool, error) {
		evs, err := cn.admin.CoreV1().Events(cn.ns).List(cn.ctx(), metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, msg) {
				return true, nil
			}
		}
		return false, nil
	})
}

// output is what the main container of a running pod of the test
// namespace printed so far, without the CRI log prefixes.
func (cn *clusterNode) output(t *testing.T, name string) string {
	t.Helper()
	p, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), name, metav1.GetOptions{})
	if err != nil || p.Status.Phase != v1.PodRunning {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(podLogsRoot, cn.ns+"_"+name+"_"+string(p.UID), "main", "0.log"))
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(line, " ", 4); len(f) == 4 {
			out = append(out, f[3]) // time stream tag text
		}
	}
	return strings.Join(out, "\n")
}
