package imagegc

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"
)

// verboseRuntime answers Status with containerd's verbose config.
type verboseRuntime struct {
	*critest.FakeRuntimeService
	config string
}

func (r verboseRuntime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Info: map[string]string{"config": r.config}}, nil
}

// Told no sandbox image, the collector keeps the one the runtime names in
// its status, unpinned and used by no container; other unused images go.
func TestGarbageCollectKeepsRuntimeSandboxImage(t *testing.T) {
	clock := testclock.NewFakeClock(time.Unix(1e9, 0))
	rt := verboseRuntime{critest.NewFakeRuntimeService(), `{"sandboxImage":"registry.k8s.io/pause:3.10","x":1}`}
	is := critest.NewFakeImageService()
	is.Images = map[string]*runtimeapi.Image{
		"sha256:p": {Id: "sha256:p", RepoTags: []string{"registry.k8s.io/pause:3.10"}, Size: 500},
		"sha256:a": {Id: "sha256:a", RepoTags: []string{"example.com/a:1"}, Size: 500},
	}
	m := New(Config{Runtime: rt, Images: is, HighThresholdPercent: 50, LowThresholdPercent: 10, MinAge: time.Minute, Clock: clock})
	m.fs = func(context.Context) (uint64, uint64, error) { return 10000, 1000, nil }
	ctx := context.Background()
	if _, err := m.detect(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Step(2 * time.Minute)
	_ = m.GarbageCollect(ctx) // cannot free enough: the error is not the point
	if got := remaining(is); got != "sha256:p" {
		t.Errorf("images left %s; want the sandbox image sha256:p only", got)
	}
}

// A runtime that names no sandbox image leaves only pinned and used
// images protected; a status it cannot give is not fatal.
func TestRuntimeSandboxImage(t *testing.T) {
	ctx := context.Background()
	for cfg, want := range map[string]string{
		`{"sandboxImage":"registry.k8s.io/pause:3.10"}`: "registry.k8s.io/pause:3.10",
		`{"containerd":{}}`:                             "",
		`not json`:                                      "",
		``:                                              "",
	} {
		if got := runtimeSandboxImage(ctx, verboseRuntime{critest.NewFakeRuntimeService(), cfg}); got != want {
			t.Errorf("config %q: %q, want %q", cfg, got, want)
		}
	}
	rt := critest.NewFakeRuntimeService()
	rt.InjectError("Status", context.DeadlineExceeded)
	if got := runtimeSandboxImage(ctx, rt); got != "" {
		t.Errorf("failing Status: %q", got)
	}
}
