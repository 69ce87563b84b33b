package images

import (
	"context"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// slowImages holds every pull until release is closed and tracks how many
// run at once.
type slowImages struct {
	*critest.FakeImageService
	release chan struct{}
	mu      sync.Mutex
	running int
	peak    int
}

func (s *slowImages) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	s.mu.Lock()
	s.running++
	s.peak = max(s.peak, s.running)
	s.mu.Unlock()
	<-s.release
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	return s.FakeImageService.PullImage(ctx, img, auth, sb)
}

func (s *slowImages) current() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

func TestPullerParallelism(t *testing.T) {
	for _, tt := range []struct {
		name        string
		serialize   bool
		maxParallel int32
		want        int // pulls at once, of 4 started together
	}{
		{"serialized", true, 0, 1},
		{"serialized wins over a max", true, 3, 1},
		{"at most 2", false, 2, 2},
		{"unlimited", false, 0, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := &slowImages{FakeImageService: critest.NewFakeImageService(), release: make(chan struct{})}
			p := NewPuller(svc, tt.serialize, tt.maxParallel)
			var wg sync.WaitGroup
			for _, img := range []string{"a:1", "b:1", "c:1", "d:1"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := p.Pull(context.Background(), img, nil, nil); err != nil {
						t.Error(err)
					}
				}()
			}
			// Wait until as many pulls run as may, then a little more to
			// catch any that should not.
			deadline := time.Now().Add(5 * time.Second)
			for svc.current() < tt.want && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			close(svc.release)
			wg.Wait()
			if svc.peak != tt.want {
				t.Errorf("%d pulls ran at once, want %d", svc.peak, tt.want)
			}
		})
	}
}

func TestPullResult(t *testing.T) {
	svc := critest.NewFakeImageService()
	svc.SetFakeImageSize(1234)
	res, err := NewPuller(svc, true, 0).Pull(context.Background(), "a:1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ImageRef != "a:1" || res.Size != 1234 {
		t.Errorf("result %+v, want ref a:1 size 1234", res)
	}
}

func TestNormalize(t *testing.T) {
	for _, tt := range []struct {
		in, pull, repo string
		bad            bool
	}{
		{in: "busybox", pull: "busybox:latest", repo: "docker.io/library/busybox"},
		{in: "busybox:1.35", pull: "busybox:1.35", repo: "docker.io/library/busybox"},
		{in: "127.0.0.1:5000/team/app", pull: "127.0.0.1:5000/team/app:latest", repo: "127.0.0.1:5000/team/app"},
		{in: "localhost/app@sha256:" + sha, pull: "localhost/app@sha256:" + sha, repo: "localhost/app"},
		{in: "team/App", bad: true},
		{in: "app:", bad: true},
		{in: "app@sha256:short", bad: true},
		{in: sha, bad: true},
	} {
		pull, repo, err := Normalize(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("Normalize(%q) = %q, %q; want an error", tt.in, pull, repo)
			}
			continue
		}
		if err != nil || pull != tt.pull || repo != tt.repo {
			t.Errorf("Normalize(%q) = %q, %q, %v; want %q, %q", tt.in, pull, repo, err, tt.pull, tt.repo)
		}
	}
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
