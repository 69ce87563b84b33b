package kubelet

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/logs"
	"github.com/skiff-sh/skiff/internal/podruntime"
	"github.com/skiff-sh/skiff/internal/podsource"
	"github.com/skiff-sh/skiff/internal/statusmanager"
)

var _ logs.Source = (*Kubelet)(nil)

// The kubelet's log source maps a pod's containers to the right instance
// and its file, and nothing outside the pod's log directory.
func TestContainerLogSource(t *testing.T) {
	root := t.TempDir()
	pod := apiPod("web", "uid-1", "1")
	pod.Spec.InitContainers = []v1.Container{{Name: "init"}}
	pod.Spec.Containers = []v1.Container{{Name: "app"}, {Name: "pulling"}, {Name: "elsewhere"}}
	dir := podruntime.PodLogsDir(root, "ns", "web", "uid-1")
	logOf := func(name string, n int) string { return filepath.Join(dir, podruntime.ContainerLogPath(name, n)) }
	for _, p := range []string{logOf("init", 0), logOf("app", 0), logOf("app", 1)} {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte("2025-03-01T10:00:00Z stdout F from "+filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p)+"\n"), 0o644))
	}
	fake := critest.NewFakeRuntimeService()
	ctr := func(id, path string, state runtimeapi.ContainerState) *critest.FakeContainer {
		return &critest.FakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: id, LogPath: path, State: state}}
	}
	fake.SetFakeContainers([]*critest.FakeContainer{
		ctr("init0", logOf("init", 0), runtimeapi.ContainerState_CONTAINER_EXITED),
		ctr("app0", logOf("app", 0), runtimeapi.ContainerState_CONTAINER_EXITED),
		ctr("app1", logOf("app", 1), runtimeapi.ContainerState_CONTAINER_RUNNING),
		ctr("evil", "/etc/shadow", runtimeapi.ContainerState_CONTAINER_RUNNING),
	})
	k := &Kubelet{
		pods: newPodManager(), statuses: statusmanager.New(statusmanager.Config{}), logsDir: root,
		cri: &cri.Client{Runtime: fake, RuntimeName: "containerd"},
	}
	k.pods.apply(podsource.Update{Source: podsource.APIServer, Pods: []*v1.Pod{pod}})
	k.statuses.SetPodStatus(pod, v1.PodStatus{
		InitContainerStatuses: []v1.ContainerStatus{{Name: "init", ContainerID: "containerd://init0",
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "containerd://init0"}}}},
		ContainerStatuses: []v1.ContainerStatus{
			{Name: "app", ContainerID: "containerd://app1",
				State:                v1.ContainerState{Running: &v1.ContainerStateRunning{}},
				LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "containerd://app0"}}},
			{Name: "pulling", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: podruntime.ReasonImagePullBackOff}}},
			{Name: "elsewhere", ContainerID: "containerd://evil", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
		},
	})
	ctx := context.Background()
	for _, tc := range []struct {
		pod, container string
		previous       bool
		wantPath       string
		running        bool
		notFound       bool
		err            string
	}{
		{pod: "web", container: "app", wantPath: logOf("app", 1), running: true},
		{pod: "web", container: "app", previous: true, wantPath: logOf("app", 0)},
		{pod: "web", container: "init", wantPath: logOf("init", 0)},
		{pod: "web", container: "init", previous: true, err: `previous terminated container "init" in pod "web" not found`},
		{pod: "web", container: "pulling", err: "is waiting to start: trying and failing to pull image"},
		{pod: "web", container: "elsewhere", err: "has no log file under"},
		{pod: "web", container: "nope", notFound: true},
		{pod: "nope", container: "app", notFound: true},
	} {
		l, err := k.ContainerLog(ctx, "ns", tc.pod, tc.container, tc.previous)
		switch {
		case tc.notFound:
			if !errors.Is(err, logs.ErrNotFound) {
				t.Errorf("%s/%s: %v, want not found", tc.pod, tc.container, err)
			}
		case tc.err != "":
			if err == nil || errors.Is(err, logs.ErrNotFound) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s/%s previous=%v: %v, want %q", tc.pod, tc.container, tc.previous, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s/%s previous=%v: %v", tc.pod, tc.container, tc.previous, err)
		default:
			if l.Path != tc.wantPath || l.Running(ctx) != tc.running {
				t.Errorf("%s/%s previous=%v: path %s running %v, want %s %v", tc.pod, tc.container, tc.previous, l.Path, l.Running(ctx), tc.wantPath, tc.running)
			}
		}
	}

	// Through the handler, as the API server's route will mount it.
	mux := http.NewServeMux()
	mux.Handle(logs.Prefix, logs.Handler(k))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/containerLogs/ns/web/app?previous=true", nil))
	if rec.Code != 200 || rec.Body.String() != "from app/0.log\n" {
		t.Errorf("previous through the handler: %d %q", rec.Code, rec.Body.String())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
