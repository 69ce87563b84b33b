//go:build e2e

package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The node registers Ready with upstream's fields; the Lease
// renews every 10 s; a stopped Skiff turns the node NotReady after the
// 40 s grace period and a restarted one brings it back.
func TestNodeRegistersAndRenewsLease(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	// The Node may be an earlier test's, Ready still: wait for this
	// Skiff's status, which names its own API port.
	waitFor(t, 30*time.Second, "the node status of this Skiff", func() (bool, error) {
		return int(cn.getNode(t).Status.DaemonEndpoints.KubeletEndpoint.Port) == cn.apiPort, nil
	})
	n := cn.getNode(t)

	for k, want := range map[string]string{"kubernetes.io/hostname": cn.hostname(), "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"} {
		if n.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], want)
		}
	}
	if _, ok := n.Labels["node.kubernetes.io/instance-type"]; ok {
		t.Error("instance-type label must be absent")
	}
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage} {
		c, a := n.Status.Capacity[r], n.Status.Allocatable[r]
		if c.IsZero() || a.IsZero() || a.Cmp(c) > 0 {
			t.Errorf("%s: capacity %s allocatable %s", r, c.String(), a.String())
		}
	}
	if m, a := n.Status.Capacity[v1.ResourceMemory], n.Status.Allocatable[v1.ResourceMemory]; m.Cmp(a) <= 0 {
		t.Errorf("allocatable memory %s must be below capacity %s (hard eviction threshold)", a.String(), m.String())
	}
	if p := n.Status.Capacity[v1.ResourcePods]; p.Value() != 110 {
		t.Errorf("pods capacity %d, want maxPods 110", p.Value())
	}
	var internal bool
	for _, a := range n.Status.Addresses {
		internal = internal || (a.Type == v1.NodeInternalIP && a.Address != "")
	}
	if !internal {
		t.Errorf("no InternalIP address: %v", n.Status.Addresses)
	}
	info := n.Status.NodeInfo
	if !isSuiteRuntimeVersion(t, info.ContainerRuntimeVersion) || info.KubeletVersion == "" ||
		info.BootID == "" || info.KernelVersion == "" || info.OSImage == "" || info.Architecture != "amd64" {
		t.Errorf("nodeInfo: %+v", info)
	}
	for _, typ := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		found := false
		for _, c := range n.Status.Conditions {
			if c.Type == typ {
				found = c.Status == v1.ConditionFalse && strings.HasPrefix(c.Reason, "KubeletHas")
			}
		}
		if !found {
			t.Errorf("condition %s missing or not False/KubeletHas*: %v", typ, n.Status.Conditions)
		}
	}

	l := cn.lease(t)
	if l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 40 || len(l.OwnerReferences) != 1 ||
		l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != n.UID {
		t.Errorf("lease: duration %v owners %+v", l.Spec.LeaseDurationSeconds, l.OwnerReferences)
	}
	first := l.Spec.RenewTime.Time
	waitFor(t, 25*time.Second, "lease renewal", func() (bool, error) {
		return cn.lease(t).Spec.RenewTime.After(first), nil
	})
	if gap := cn.lease(t).Spec.RenewTime.Sub(first); gap < 5*time.Second || gap > 15*time.Second {
		t.Errorf("lease renewed after %v, want about 10s", gap)
	}

	cn.stop()
	stopped := time.Now()
	cn.waitNodeReady(t, v1.ConditionUnknown, 90*time.Second)
	if took := time.Since(stopped); took < 30*time.Second {
		t.Errorf("node went NotReady %v after Skiff stopped, before the 40s grace period", took)
	}
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
}

// A Deployment of 3 replicas reaches 3/3 Ready and is removed
// promptly on delete.
func TestDeploymentRunsAndIsDeleted(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)

	replicas := int32(3)
	pod := busyboxPod("", sleeper)
	labels := map[string]string{"app": "web", testLabel: "true"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
	// The scheduler places them, on this node of the several the
	// parallel tests run.
	d.Spec.Template.Spec.NodeName = ""
	d.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": cn.hostname()}
	_, err := cn.admin.AppsV1().Deployments(cn.ns).Create(cn.ctx(), d, metav1.CreateOptions{})
	must(t, err)
	start := time.Now()
	waitFor(t, 90*time.Second, "deployment 3/3 ready", func() (bool, error) {
		d, err := cn.admin.AppsV1().Deployments(cn.ns).Get(cn.ctx(), "web", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 3, nil
	})
	t.Logf("3/3 ready %v after the Deployment was created", time.Since(start).Round(time.Millisecond))

	pods, err := cn.admin.CoreV1().Pods(cn.ns).List(cn.ctx(), metav1.ListOptions{LabelSelector: "app=web"})
	must(t, err)
	for _, p := range pods.Items {
		s := p.Status
		if s.Phase != v1.PodRunning || s.PodIP == "" || s.HostIP == "" || s.StartTime == nil || s.QOSClass != v1.PodQOSBestEffort {
			t.Errorf("pod %s status: phase %s podIP %q hostIP %q qos %q", p.Name, s.Phase, s.PodIP, s.HostIP, s.QOSClass)
		}
		cs := s.ContainerStatuses[0]
		if !strings.HasPrefix(cs.ContainerID, "containerd://") || cs.ImageID == "" || !cs.Ready || cs.Started == nil || !*cs.Started {
			t.Errorf("pod %s container status: %+v", p.Name, cs)
		}
		conds := map[v1.PodConditionType]v1.ConditionStatus{}
		for _, c := range s.Conditions {
			conds[c.Type] = c.Status
		}
		for _, c := range []v1.PodConditionType{v1.PodScheduled, v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady} {
			if conds[c] != v1.ConditionTrue {
				t.Errorf("pod %s condition %s = %q", p.Name, c, conds[c])
			}
		}
	}
	// The kubelet's events made it to the apiserver.
	waitFor(t, 20*time.Second, "Started events from the kubelet", func() (bool, error) {
		evs, err := cn.admin.CoreV1().Events(cn.ns).List(cn.ctx(), metav1.ListOptions{FieldSelector: "reason=Started"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Source.Component == "kubelet" && e.Source.Host == cn.hostname() {
				return true, nil
			}
		}
		return false, nil
	})

	// Every pod's sandbox is stopped once: a StopPodSandbox beyond that is
	// a pod stopped again (as an orphan) after its cleanup.
	sandboxStops := func() float64 {
		mfs, err := scrape(cn.url("/metrics"))
		must(t, err)
		return gauge(mfs, "kubelet_runtime_operations_total", map[string]string{"operation_type": "stop_podsandbox"})
	}
	stopsBefore := sandboxStops()
	must(t, cn.admin.AppsV1().Deployments(cn.ns).Delete(cn.ctx(), "web", metav1.DeleteOptions{}))
	deleted := time.Now()
	waitFor(t, 30*time.Second, "all pods of the deployment gone", func() (bool, error) {
		pods, err := cn.admin.CoreV1().Pods(cn.ns).List(cn.ctx(), metav1.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(pods.Items) == 0, nil
	})
	t.Logf("pods gone %v after the Deployment was deleted", time.Since(deleted).Round(time.Millisecond))
	// Runtime state goes once the API objects are gone (the kubelet removes
	// it after the apiserver forgets the pod, as upstream): the containers
	// at once, the stopped sandboxes a minute later (sandboxRemovalDelay).
	noneLeft := func(left func(uid string) int) func() (bool, error) {
		return func() (bool, error) {
			for _, p := range pods.Items {
				if left(string(p.UID)) != 0 {
					return false, nil
				}
			}
			return true, nil
		}
	}
	waitFor(t, 15*time.Second, "containers of the deleted pods removed",
		noneLeft(func(uid string) int { return len(cn.containersOf(uid)) }))
	waitFor(t, 90*time.Second, "sandboxes of the deleted pods removed",
		noneLeft(func(uid string) int { return len(cn.sandboxesOf(uid)) }))
	// Cleaned up once: a pod whose sandbox is being (or was just) removed
	// is no orphan to stop again. Housekeeping runs every 2 s.
	time.Sleep(3 * time.Second)
	if stops := sandboxStops() - stopsBefore; stops != float64(len(pods.Items)) {
		t.Errorf("%v StopPodSandbox calls for %d deleted pods: a pod was stopped again after its cleanup", stops, len(pods.Items))
	}
}

// A pod exiting 1 with restartPolicy Never ends Failed with
// its exit code.
func TestFailedPodReportsExitCode(t *testing.T) {
	cn := sharedNode(t)
	p := busyboxPod("fails", "echo bye; exit 1")
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	cn.createPod(t, p)
	got := cn.waitPod(t, cn.ns, "fails", 60*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	term := got.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 1 || term.Reason != "Error" {
		t.Errorf("container state: %+v", got.Status.ContainerStatuses[0].State)
	}
	for _, c := range got.Status.Conditions {
		if c.Type == v1.PodReady && (c.Status != v1.ConditionFalse || c.Reason != "PodFailed") {
			t.Errorf("Ready condition of a failed pod: %+v", c)
		}
	}
	// Deleting a finished pod is prompt too.
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "fails", metav1.DeleteOptions{}))
	waitFor(t, 20*time.Second, "finished pod deleted", func() (bool, error) {
		_, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), "fails", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// A static pod appears as a mirror pod; deleting the mirror
// pod brings it back and does not touch the static pod.
func TestStaticPodHasMirrorPod(t *testing.T) {
	cn := newPrivateClusterNode(t)
	name := "mirrored-" + cn.hostname()
	cn.writeManifest("mirrored.yaml", staticPod("mirrored", sleeper, ""))
	cn.start()
	mp := cn.waitPod(t, "default", name, 60*time.Second, "mirror pod Running", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && isReady(p)
	})
	if _, ok := mp.Annotations["kubernetes.io/config.mirror"]; !ok {
		t.Errorf("mirror pod lacks the config.mirror annotation: %v", mp.Annotations)
	}
	if len(mp.OwnerReferences) != 1 || mp.OwnerReferences[0].Kind != "Node" || mp.OwnerReferences[0].Name != cn.hostname() {
		t.Errorf("mirror pod owner references: %+v", mp.OwnerReferences)
	}
	containerID := mp.Status.ContainerStatuses[0].ContainerID

	must(t, cn.admin.CoreV1().Pods("default").Delete(cn.ctx(), name, metav1.DeleteOptions{}))
	back := cn.waitPod(t, "default", name, 60*time.Second, "mirror pod recreated", func(p *v1.Pod) bool {
		return p.UID != mp.UID && p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1
	})
	if got := back.Status.ContainerStatuses[0]; got.ContainerID != containerID || got.RestartCount != 0 {
		t.Errorf("static pod was disturbed: container %s restarts %d, was %s", got.ContainerID, got.RestartCount, containerID)
	}

	// Removing the manifest removes the mirror pod too.
	cn.removeManifest("mirrored.yaml")
	waitFor(t, 30*time.Second, "mirror pod deleted with its static pod", func() (bool, error) {
		_, err := cn.admin.CoreV1().Pods("default").Get(cn.ctx(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// A pod requesting more CPU than allocatable is rejected.
func TestPodOverAllocatableIsRejected(t *testing.T) {
	cn := sharedNode(t)
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	p := busyboxPod("greedy", sleeper)
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000")}
	cn.createPod(t, p)
	got := cn.waitPod(t, cn.ns, "greedy", 30*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if got.Status.Reason != "OutOfcpu" || !strings.Contains(got.Status.Message, "Node didn't have enough resource: cpu") {
		t.Errorf("reason %q message %q", got.Status.Reason, got.Status.Message)
	}
	if n := len(sandboxesOf(t, string(got.UID))); n != 0 {
		t.Errorf("a rejected pod got %d sandboxes", n)
	}
	waitFor(t, 20*time.Second, "OutOfcpu event", func() (bool, error) {
		evs, err := cn.admin.CoreV1().Events(cn.ns).List(cn.ctx(), metav1.ListOptions{FieldSelector: "reason=OutOfcpu"})
		return err == nil && len(evs.Items) > 0, nil
	})
}

// Resilience: the apiserver away for a minute. Pods keep running, status
// changes made meanwhile catch up, the lease is renewed again.
func TestAPIServerOutage(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.start()
	cn.createPod(t, busyboxPod("steady", "exec sleep 3600"))
	p := cn.waitPod(t, cn.ns, "steady", 60*time.Second, "ready", isReady)
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")

	cn.proxy.cut()
	cut := time.Now()
	time.Sleep(5 * time.Second)
	cn.killContainerProcess(id) // a change the apiserver has to learn about later
	waitFor(t, 30*time.Second, "restart while the apiserver is away", func() (bool, error) {
		for _, c := range cn.containersOf(string(p.UID)) {
			if c.Metadata.Attempt == 1 && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return true, nil
			}
		}
		return false, nil
	})
	time.Sleep(time.Until(cut.Add(60 * time.Second)))
	if err := cn.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("skiff died during the outage: %v", err)
	}
	cn.proxy.restore(t)
	restored := time.Now()

	cn.waitPod(t, cn.ns, "steady", 60*time.Second, "restartCount 1 reported", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount == 1 && isReady(p)
	})
	waitFor(t, 30*time.Second, "lease renewed after the outage", func() (bool, error) {
		return cn.lease(t).Spec.RenewTime.After(restored), nil
	})
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	if n := len(cn.containersOf(string(p.UID))); n > 2 {
		t.Errorf("%d containers after the outage; only the one kill should have restarted it", n)
	}
}

// Resilience: Skiff restarted while pods run adopts them; their API status
// stays right and restartCount does not jump.
func TestSkiffRestartKeepsAPIPods(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.start()
	cn.createPod(t, busyboxPod("kept", "exec sleep 3600"))
	before := cn.waitPod(t, cn.ns, "kept", 60*time.Second, "ready", isReady).Status.ContainerStatuses[0]
	cn.stop()
	cn.start()
	time.Sleep(5 * time.Second) // several relists and syncs
	after := cn.waitPod(t, cn.ns, "kept", 30*time.Second, "ready", isReady).Status.ContainerStatuses[0]
	if after.ContainerID != before.ContainerID || after.RestartCount != 0 {
		t.Errorf("after Skiff restart: container %s restarts %d, before %s", after.ContainerID, after.RestartCount, before.ContainerID)
	}
	// An adopted pod is deleted as promptly as any other.
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "kept", metav1.DeleteOptions{}))
	waitFor(t, 20*time.Second, "adopted pod deleted", func() (bool, error) {
		_, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), "kept", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// Resilience: containerd restarted. The node goes NotReady while it is
// away and Ready again after; pods keep their containers. It restarts
// the dev containerd the way hack/containerd.sh does, so it runs alone.
func TestContainerdRestart(t *testing.T) {
	cn := newClusterNode(t)
	cn.start()
	cn.createPod(t, busyboxPod("survivor", "exec sleep 3600"))
	before := cn.waitPod(t, cn.ns, "survivor", 60*time.Second, "ready", isReady).Status.ContainerStatuses[0]
	cn.waitNodeReady(t, v1.ConditionTrue, 30*time.Second)

	cn.stopRuntime(t)
	restarted := false
	defer func() {
		if !restarted {
			cn.startRuntime(t)
		}
	}()
	waitFor(t, 40*time.Second, "node NotReady with the runtime down", func() (bool, error) {
		s, msg := nodeReady(cn.getNode(t))
		return s == v1.ConditionFalse && strings.Contains(strings.ToLower(msg), "runtime"), nil
	})
	cn.startRuntime(t)
	restarted = true
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	after := cn.waitPod(t, cn.ns, "survivor", 30*time.Second, "ready", isReady).Status.ContainerStatuses[0]
	if after.ContainerID != before.ContainerID || after.RestartCount != 0 {
		t.Errorf("containerd restart disturbed the pod: %s/%d, was %s", after.ContainerID, after.RestartCount, before.ContainerID)
	}
}
