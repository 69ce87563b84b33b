//go:build e2e

package e2e

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// claimTemplate makes the ResourceClaimTemplate "gpu" of one device of
// the driver's class.
func (dn *draNode) claimTemplate(t *testing.T) {
	t.Helper()
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: dn.claimSpec(dn.deviceClass(t))}}
	_, err := dn.cn.admin.ResourceV1().ResourceClaimTemplates(dn.cn.ns).Create(dn.cn.ctx(), tmpl, metav1.CreateOptions{})
	must(t, err)
}

// signalDriver sends the driver process a signal.
func (dn *draNode) signalDriver(t *testing.T, sig syscall.Signal) {
	t.Helper()
	must(t, dn.proc.cmd.Process.Signal(sig))
}

// checkWaiting fails unless the pod is Pending with no container ever
// started: it waits, it does not crash-loop.
func checkWaiting(t *testing.T, p *v1.Pod) {
	t.Helper()
	if p.Status.Phase != v1.PodPending {
		t.Fatalf("pod %s is %s, want Pending while its claim cannot be prepared", p.Name, p.Status.Phase)
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running != nil || s.State.Terminated != nil || s.RestartCount != 0 || s.LastTerminationState.Terminated != nil {
			t.Fatalf("container %s of pod %s started though its claim is not prepared: %+v", s.Name, p.Name, s)
		}
	}
}

// TestDRADriverHangs: a DRA driver frozen (SIGSTOP) never answers
// NodePrepareResources. The pod with a claim on it waits, Pending, with
// a FailedPrepareDynamicResources event carrying the call's deadline
// error and naming the driver; meanwhile a pod without claims starts on
// the same node and the node's Lease is renewed. Once the driver runs
// again (SIGCONT) the pod starts by itself.
func TestDRADriverHangs(t *testing.T) {
	dn := newDRASkiffNode(t)
	dn.claimTemplate(t)
	dn.signalDriver(t, syscall.SIGSTOP)
	// Before the driver's kill and the pods' deletion, which it must answer.
	t.Cleanup(func() { _ = dn.proc.cmd.Process.Signal(syscall.SIGCONT) })
	frozen := time.Now()

	dn.createClaimPod(t, "dra-hung", v1.PodResourceClaim{ResourceClaimTemplateName: ptr.To("gpu")})
	plain := busyboxPod("dra-hung-neighbour", sleeper)
	plain.Spec.NodeName = dn.name
	dn.cn.createPod(t, plain)
	dn.cn.waitPod(t, dn.cn.ns, plain.Name, 40*time.Second, "running beside the hung claim", isRunning)

	ev := dn.cn.waitPodEvent(t, "dra-hung", "FailedPrepareDynamicResources", dn.driver, 90*time.Second)
	if !strings.Contains(ev.Message, "DeadlineExceeded") && !strings.Contains(ev.Message, "deadline exceeded") {
		t.Errorf("the event does not carry the deadline error: %s", ev.Message)
	}
	checkWaiting(t, dn.cn.getPod(t, "dra-hung"))
	if renewed := dn.cn.lease(t).Spec.RenewTime; renewed == nil || !renewed.After(frozen) {
		t.Errorf("the node's Lease was not renewed while the driver hung (renewed %v, frozen at %v)", renewed, frozen)
	}

	dn.signalDriver(t, syscall.SIGCONT)
	dn.cn.waitPod(t, dn.cn.ns, "dra-hung", 60*time.Second, "running once the driver answers", isRunning)
}

// TestDRADriverFails: the DRA test driver cannot write its CDI spec (a
// read-only bind mount covers its CDI directory), so
// NodePrepareResources answers the claim with the driver's error. The
// pod waits, Pending, with upstream's FailedPrepareDynamicResources
// event carrying the driver's message; once the mount is gone the pod
// starts, with the device's CDI environment where the runtime injects
// CDI devices. (The directory itself stays: containerd's CDI cache
// watches it, and would miss specs written to a replacement.)
func TestDRADriverFails(t *testing.T) {
	dn := newDRASkiffNode(t)
	dn.claimTemplate(t)
	must(t, syscall.Mount(dn.cdiDir, dn.cdiDir, "", syscall.MS_BIND, ""))
	mounted := true
	restore := func() {
		if mounted {
			must(t, syscall.Unmount(dn.cdiDir, 0))
			mounted = false
		}
	}
	t.Cleanup(restore)
	must(t, syscall.Mount("", dn.cdiDir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""))

	dn.createClaimPod(t, "dra-failing", v1.PodResourceClaim{ResourceClaimTemplateName: ptr.To("gpu")})
	ev := dn.cn.waitPodEvent(t, "dra-failing", "FailedPrepareDynamicResources", "failed to write CDI file", 60*time.Second)
	if !strings.Contains(ev.Message, "read-only file system") || !strings.Contains(ev.Message, dn.driver) {
		t.Errorf("the event lacks the driver's name or cause: %s", ev.Message)
	}
	checkWaiting(t, dn.cn.getPod(t, "dra-failing"))

	restore()
	p := dn.cn.waitPod(t, dn.cn.ns, "dra-failing", 60*time.Second, "running once the driver can prepare", isRunning)
	if dn.cdi {
		if env := dn.envOf(t, p, "main"); !slices.Contains(env, "user_a=b") {
			t.Errorf("the claim's container lacks the device's CDI environment: %v", env)
		}
	} else {
		t.Log("containerd 1.6 has no CDI support: the CDI environment is not checked")
	}
}

// TestDRADriverGoneSlicesWiped: a DRA driver killed (its registration
// left behind, its socket dead) has its ResourceSlices of the node
// deleted by Skiff after upstream's 30 s grace (TestWiperWipesDriverAwayPastDelay
// checks the grace on a fake clock), so the scheduler stops placing
// claims on devices nobody prepares.
func TestDRADriverGoneSlicesWiped(t *testing.T) {
	dn := newDRASkiffNode(t)
	must(t, dn.proc.cmd.Process.Kill())
	<-dn.proc.done
	rs := dn.cn.admin.ResourceV1().ResourceSlices()
	mine := metav1.ListOptions{FieldSelector: "spec.nodeName=" + dn.name + ",spec.driver=" + dn.driver}
	waitFor(t, 90*time.Second, "the dead driver's ResourceSlices wiped", func() (bool, error) {
		l, err := rs.List(dn.cn.ctx(), mine)
		if err != nil {
			return false, nil
		}
		return len(l.Items) == 0, nil
	})
}
