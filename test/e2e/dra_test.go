//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"
)

// draNode is a kubelet (Skiff, or upstream's for comparison) on a
// private runtime, with upstream's DRA test driver
// (k8s.io/kubernetes/test/e2e/dra/test-driver, built by
// hack/build-tools.sh) beside it as a host process: registered through
// the kubelet's plugin registry, publishing the node's ResourceSlice and
// writing CDI specs where the runtime reads them.
type draNode struct {
	cn       *clusterNode // the cluster: admin client, the test's namespace
	name     string       // the kubelet's node name
	root     string       // the kubelet's root directory
	rt       *privateRuntime
	driver   string // the driver's name, the node's own
	cdiDir   string // where the driver writes its CDI specs
	cdi      bool   // the runtime injects CDI devices (containerd 1.7 and later)
	tolerate bool   // pods tolerate the upstream kubelet's taint
	// racyPrepare: two pods starting together may each have the claim
	// they share prepared, as upstream's kubelet does not serialize
	// preparations of one claim (the driver is idempotent). Skiff does.
	racyPrepare bool
	proc        *process // the driver, once started
}

// newDRASkiffNode is a private Skiff node with the driver.
func newDRASkiffNode(t *testing.T) *draNode {
	t.Helper()
	cn := newPrivateClusterNode(t)
	dn := &draNode{cn: cn, name: cn.hostname(), root: cn.root, rt: cn.rt}
	dn.prepareRuntime(t)
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	dn.startDriver(t)
	return dn
}

// prepareRuntime names the driver after the runtime and points a
// containerd 2.x at the driver's CDI directory (restarting it);
// containerd 1.6 has no CDI support, and ignores the CDI devices CRI
// gives it.
func (dn *draNode) prepareRuntime(t *testing.T) {
	t.Helper()
	dn.driver, dn.cdiDir = fmt.Sprintf("dra%d.skiff.test", dn.rt.id), shortDir(t)
	b, err := os.ReadFile(dn.rt.config)
	must(t, err)
	const section = `[plugins."io.containerd.cri.v1.runtime"]` + "\n"
	if !strings.Contains(string(b), section) {
		return
	}
	cfg := strings.Replace(string(b), section, section+fmt.Sprintf("  cdi_spec_dirs = [%q]\n", dn.cdiDir), 1)
	must(t, os.WriteFile(dn.rt.config, []byte(cfg), 0o644))
	dn.rt.stopDaemon(t)
	dn.rt.start(t)
	dn.cdi = true
}

// startDriver runs the driver with two devices for the node and waits
// for its ResourceSlice.
func (dn *draNode) startDriver(t *testing.T) {
	t.Helper()
	bin, err := filepath.Abs("../../_output/bin/dra-test-driver")
	must(t, err)
	// Short paths: a unix socket's must fit in 108 bytes.
	registry := filepath.Join(shortDir(t), "registry")
	must(t, os.MkdirAll(filepath.Join(dn.root, "plugins_registry"), 0o750))
	must(t, os.Symlink(filepath.Join(dn.root, "plugins_registry"), registry))
	// The driver makes its socket in <datadir>/<driver name>, which must exist.
	dataDir := shortDir(t)
	must(t, os.Mkdir(filepath.Join(dataDir, dn.driver), 0o750))
	driver := startProcess(t, filepath.Join(t.TempDir(), "dra-test-driver.log"), bin,
		"--kubeconfig", dn.cn.c.AdminKubeconfig(), "--drivername", dn.driver, "-v", "3",
		"kubelet-plugin", "--node-name", dn.name, "--num-devices", "2",
		"--cdi-dir", dn.cdiDir, "--plugin-registration-path", registry, "--datadir", dataDir)
	dn.proc = driver
	// Pods go before the driver, which unprepares their claims.
	t.Cleanup(dn.cn.deleteAllPods)
	rs := dn.cn.admin.ResourceV1().ResourceSlices()
	bySelf := metav1.ListOptions{FieldSelector: "spec.driver=" + dn.driver}
	t.Cleanup(func() { _ = rs.DeleteCollection(context.Background(), metav1.DeleteOptions{}, bySelf) })
	waitFor(t, 60*time.Second, "the driver's ResourceSlice for the node", func() (bool, error) {
		select {
		case <-driver.done:
			return false, fmt.Errorf("the DRA test driver exited")
		default:
		}
		l, err := rs.List(dn.cn.ctx(), bySelf)
		if err != nil {
			return false, nil
		}
		for _, s := range l.Items {
			if ptr.Deref(s.Spec.NodeName, "") == dn.name && len(s.Spec.Devices) == 2 {
				return true, nil
			}
		}
		return false, nil
	})
}

// deviceClass makes a DeviceClass of the driver's devices, gone with the test.
func (dn *draNode) deviceClass(t *testing.T) string {
	t.Helper()
	dc := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: dn.driver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", dn.driver)},
		}}}}
	classes := dn.cn.admin.ResourceV1().DeviceClasses()
	_, err := classes.Create(dn.cn.ctx(), dc, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { _ = classes.Delete(context.Background(), dc.Name, metav1.DeleteOptions{}) })
	return dc.Name
}

// claimSpec asks for one device of the class, with the parameter a=b
// for the driver (which the test driver turns into user_a=b in the CDI
// environment).
func (dn *draNode) claimSpec(class string) resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class}}},
		Config: []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: dn.driver, Parameters: runtime.RawExtension{Raw: []byte(`{"a":"b"}`)}},
		}}},
	}}
}

// createClaimPod creates a pod the scheduler places on the node, whose
// container "main" references the pod claim "gpu" and whose container
// "plain" does not.
func (dn *draNode) createClaimPod(t *testing.T, name string, pc v1.PodResourceClaim) {
	t.Helper()
	p := busyboxPod(name, sleeper)
	p.Spec.NodeName = ""
	p.Spec.NodeSelector = map[string]string{v1.LabelHostname: dn.name}
	if dn.tolerate {
		p.Spec.Tolerations = []v1.Toleration{{Key: "skiff.e2e/upstream", Operator: v1.TolerationOpExists}}
	}
	pc.Name = "gpu"
	p.Spec.ResourceClaims = []v1.PodResourceClaim{pc}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	plain := p.Spec.Containers[0]
	plain.Name, plain.Resources = "plain", v1.ResourceRequirements{}
	p.Spec.Containers = append(p.Spec.Containers, plain)
	dn.cn.createPod(t, p)
}

// cdiFile is the driver's CDI spec of a claim's request "gpu".
func (dn *draNode) cdiFile(claimUID string) string {
	return filepath.Join(dn.cdiDir, fmt.Sprintf("%s-%s-gpu.json", dn.driver, claimUID))
}

// envOf runs env in a container of the pod through CRI.
func (dn *draNode) envOf(t *testing.T, p *v1.Pod, container string) []string {
	t.Helper()
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			id := strings.TrimPrefix(s.ContainerID, "containerd://")
			out, stderr, err := dn.rt.rs.ExecSync(context.Background(), id, []string{"env"}, 10*time.Second)
			if err != nil {
				t.Fatalf("env in %s/%s: %v: %s", p.Name, container, err, stderr)
			}
			return strings.Split(strings.TrimSpace(string(out)), "\n")
		}
	}
	t.Fatalf("pod %s has no container %s", p.Name, container)
	return nil
}

// draCalls is how many calls of a DRA method the kubelet made to the
// driver that succeeded, from its dra_grpc_operations_duration_seconds
// histogram (/metrics through the apiserver's node proxy).
func (dn *draNode) draCalls(t *testing.T, method string) uint64 {
	t.Helper()
	var n uint64
	mf := parseScrape(t, dn.cn.proxyGetNode(t, dn.name, "metrics"))["dra_grpc_operations_duration_seconds"]
	for _, m := range mf.GetMetric() {
		l := labelsOf(m)
		if l["driver_name"] == dn.driver && strings.HasSuffix(l["method_name"], "/"+method) && l["grpc_status_code"] == "OK" {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// deletePod deletes a pod and waits until the apiserver no longer has it.
func (dn *draNode) deletePod(t *testing.T, name string) {
	t.Helper()
	pods := dn.cn.admin.CoreV1().Pods(dn.cn.ns)
	must(t, pods.Delete(dn.cn.ctx(), name, metav1.DeleteOptions{}))
	waitFor(t, 60*time.Second, "pod "+name+" gone", func() (bool, error) {
		_, err := pods.Get(dn.cn.ctx(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestDRATestDriver: upstream's DRA test driver publishes its devices
// in ResourceSlices; the scheduler allocates a claim from a
// ResourceClaimTemplate; Skiff prepares it, and the container that
// references the claim (only it) gets the device's CDI environment; the
// pod resources API reports the claim; the claim is unprepared (the
// driver removes its CDI spec) once the pod is deleted. A ResourceClaim
// two pods share is prepared once and unprepared after the second.
func TestDRATestDriver(t *testing.T) {
	runDRAScenario(t, newDRASkiffNode(t))
}

// TestDRATestDriverUpstreamKubelet runs TestDRATestDriver's scenario on
// the upstream kubelet v1.34 (on a private containerd, joined to the
// suite cluster): the same checks pass there, so they test what a
// kubelet must do, not what Skiff happens to do; but upstream may prepare
// a shared claim once per pod when both start together.
func TestDRATestDriverUpstreamKubelet(t *testing.T) {
	cn := sharedNode(t)
	rt := newPrivateRuntime(t)
	dn := &draNode{cn: cn, rt: rt, tolerate: true, racyPrepare: true}
	dn.prepareRuntime(t)
	up := startUpstreamNodeOn(t, cn.c, rt, "")
	dn.name, dn.root = up.hostname(), up.root
	dn.startDriver(t)
	runDRAScenario(t, dn)
}

// runDRAScenario is TestDRATestDriver's scenario on a kubelet.
func runDRAScenario(t *testing.T, dn *draNode) {
	class := dn.deviceClass(t)
	ns, ctx := dn.cn.ns, dn.cn.ctx()
	claims := dn.cn.admin.ResourceV1().ResourceClaims(ns)
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: dn.claimSpec(class)}}
	_, err := dn.cn.admin.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{})
	must(t, err)

	dn.createClaimPod(t, "dra-inline", v1.PodResourceClaim{ResourceClaimTemplateName: ptr.To("gpu")})
	p := dn.cn.waitPod(t, ns, "dra-inline", 90*time.Second, "running", isRunning)
	if len(p.Status.ResourceClaimStatuses) != 1 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("the pod's claim statuses: %+v", p.Status.ResourceClaimStatuses)
	}
	claimName := *p.Status.ResourceClaimStatuses[0].ResourceClaimName
	claim, err := claims.Get(ctx, claimName, metav1.GetOptions{})
	must(t, err)
	inlineSpec := dn.cdiFile(string(claim.UID))
	if !fileExists(inlineSpec) {
		t.Fatalf("the driver's CDI spec %s is missing: the claim was not prepared", inlineSpec)
	}
	if dn.cdi {
		want := "claim_" + strings.NewReplacer("-", "_", ".", "_").Replace(claimName) + "_gpu=true"
		if env := dn.envOf(t, p, "main"); !slices.Contains(env, "user_a=b") || !slices.Contains(env, want) {
			t.Errorf("the claim's container lacks the device's CDI environment (user_a=b, %s): %v", want, env)
		}
		if env := dn.envOf(t, p, "plain"); slices.Contains(env, "user_a=b") {
			t.Errorf("a container not referencing the claim got its CDI environment: %v", env)
		}
	} else {
		t.Log("containerd 1.6 has no CDI support: the CDI environment is not checked")
	}
	dn.checkPodResources(t, "dra-inline", claimName, fmt.Sprintf("%s/test=claim-%s-gpu", dn.driver, claim.UID))

	shared := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: dn.claimSpec(class)}
	shared, err = claims.Create(ctx, shared, metav1.CreateOptions{})
	must(t, err)
	for _, name := range []string{"dra-shared-1", "dra-shared-2"} {
		dn.createClaimPod(t, name, v1.PodResourceClaim{ResourceClaimName: ptr.To("shared")})
	}
	for _, name := range []string{"dra-shared-1", "dra-shared-2"} {
		dn.cn.waitPod(t, ns, name, 90*time.Second, "running", isRunning)
	}
	if n := dn.draCalls(t, "NodePrepareResources"); n != 2 && !(dn.racyPrepare && n == 3) {
		t.Errorf("NodePrepareResources succeeded %d times for two claims (one shared by two pods), want 2", n)
	}
	sharedSpec := dn.cdiFile(string(shared.UID))
	if !fileExists(sharedSpec) {
		t.Fatalf("the driver's CDI spec of the shared claim is missing")
	}

	dn.deletePod(t, "dra-inline")
	waitFor(t, 30*time.Second, "the inline claim unprepared (its CDI spec removed)", func() (bool, error) {
		return !fileExists(inlineSpec), nil
	})
	dn.deletePod(t, "dra-shared-1")
	if !fileExists(sharedSpec) {
		t.Fatalf("the shared claim was unprepared while pod dra-shared-2 still uses it")
	}
	dn.deletePod(t, "dra-shared-2")
	waitFor(t, 30*time.Second, "the shared claim unprepared after its last pod", func() (bool, error) {
		return !fileExists(sharedSpec), nil
	})
	if n := dn.draCalls(t, "NodeUnprepareResources"); n != 2 {
		t.Errorf("NodeUnprepareResources succeeded %d times for two claims, want 2", n)
	}
}

// checkPodResources checks that the pod resources API reports the
// claim, with the driver's CDI device, for the container that references
// it, and nothing for the other.
func (dn *draNode) checkPodResources(t *testing.T, pod, claimName, cdiID string) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dn.root, "pod-resources", "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	r, err := podresourcesv1.NewPodResourcesListerClient(conn).Get(dn.cn.ctx(),
		&podresourcesv1.GetPodResourcesRequest{PodName: pod, PodNamespace: dn.cn.ns})
	must(t, err)
	for _, c := range r.PodResources.Containers {
		var got []string
		for _, d := range c.DynamicResources {
			for _, cr := range d.ClaimResources {
				for _, cdi := range cr.CdiDevices {
					got = append(got, fmt.Sprintf("%s/%s %s %s", d.ClaimNamespace, d.ClaimName, cr.DriverName, cdi.Name))
				}
			}
		}
		want := []string{fmt.Sprintf("%s/%s %s %s", dn.cn.ns, claimName, dn.driver, cdiID)}
		if c.Name == "plain" {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("pod resources of container %s: %v, want %v", c.Name, got, want)
		}
	}
}
