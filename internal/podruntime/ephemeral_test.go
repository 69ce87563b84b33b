package podruntime

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/container"
)

func debugContainer(name, target string) v1.EphemeralContainer {
	return v1.EphemeralContainer{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: name, Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent},
		TargetContainerName:      target,
	}
}

// createRecorder keeps the config of every container created, by name.
type createRecorder struct {
	*critest.FakeRuntimeService
	configs map[string]*runtimeapi.ContainerConfig
}

func (r *createRecorder) CreateContainer(ctx context.Context, sb string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	r.configs[cfg.GetMetadata().GetName()] = cfg
	return r.FakeRuntimeService.CreateContainer(ctx, sb, cfg, sbCfg)
}

func recordCreates(f *fixture) *createRecorder {
	r := &createRecorder{FakeRuntimeService: f.rt, configs: map[string]*runtimeapi.ContainerConfig{}}
	f.m.cfg.CRI.Runtime = r
	return r
}

func TestEphemeralContainerRunsOnceInTargetNamespace(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	created := recordCreates(f)
	f.sync()
	// kubectl debug adds it to the running pod.
	f.pod.Spec.EphemeralContainers = []v1.EphemeralContainer{debugContainer("debugger", "app")}
	if res := f.sync(); !res.Started || len(res.Waiting) > 0 {
		t.Fatalf("sync: started=%v waiting=%v", res.Started, res.Waiting)
	}
	dbg := f.status().FindContainer("debugger")
	if dbg == nil || dbg.State != container.StateRunning {
		t.Fatalf("debugger: %+v", dbg)
	}
	ns := created.configs["debugger"].GetLinux().GetSecurityContext().GetNamespaceOptions()
	if app := f.status().FindContainer("app"); ns.GetPid() != runtimeapi.NamespaceMode_TARGET || ns.GetTargetId() != app.ID {
		t.Errorf("debugger namespaces %v, want PID of the app container %s", ns, app.ID)
	}
	if ns := created.configs["app"].GetLinux().GetSecurityContext().GetNamespaceOptions(); ns.GetPid() != runtimeapi.NamespaceMode_CONTAINER {
		t.Errorf("app namespaces %v", ns)
	}

	// Exited, it is never restarted, whatever the pod's policy.
	f.exit("debugger", 1)
	if res := f.sync(); res.Started || len(res.Waiting) > 0 {
		t.Errorf("an exited ephemeral container was restarted: started=%v waiting=%v", res.Started, res.Waiting)
	}
	if got := f.status().Instances("debugger"); len(got) != 1 {
		t.Errorf("debugger instances: %d, want 1", len(got))
	}
}

func TestEphemeralContainerTargetNotRunning(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	f.sync()
	// The target crashed: ephemeral containers are synced before it is
	// restarted, so the debugger finds it exited.
	f.exit("app", 1)
	f.pod.Spec.EphemeralContainers = []v1.EphemeralContainer{debugContainer("debugger", "app")}
	res := f.sync()
	w := res.Waiting["debugger"]
	if w == nil || w.Reason != ReasonCreateContainerConfig || w.Message != "unable to find target container app" {
		t.Fatalf("debugger waiting %+v, want CreateContainerConfigError", w)
	}
	if f.status().FindContainer("debugger") != nil {
		t.Error("debugger created without its target")
	}
	// The next sync, the target running again, starts it.
	if res := f.sync(); res.Waiting["debugger"] != nil {
		t.Errorf("debugger still waits: %+v", res.Waiting["debugger"])
	}
	if dbg := f.status().FindContainer("debugger"); dbg == nil || dbg.State != container.StateRunning {
		t.Errorf("debugger: %+v", dbg)
	}
}

func TestEphemeralContainerSharedPIDNamespaceKept(t *testing.T) {
	f := newFixture(t, v1.RestartPolicyAlways)
	f.pod.Spec.ShareProcessNamespace = ptr.To(true)
	created := recordCreates(f)
	f.sync()
	f.pod.Spec.EphemeralContainers = []v1.EphemeralContainer{debugContainer("debugger", "app")}
	f.sync()
	if ns := created.configs["debugger"].GetLinux().GetSecurityContext().GetNamespaceOptions(); ns.GetPid() != runtimeapi.NamespaceMode_POD || ns.GetTargetId() != "" {
		t.Errorf("debugger namespaces %v, want the pod's shared PID namespace", ns)
	}
}
