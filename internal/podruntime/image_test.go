package podruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/cri"
	"github.com/skiff-sh/skiff/internal/images/keyring"
)

// events records "Type Reason: message" lines.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) Eventf(_ runtime.Object, eventtype, reason, format string, args ...interface{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, eventtype+" "+reason+": "+fmt.Sprintf(format, args...))
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	got := e.got
	e.got = nil
	return got
}

// authImages is a fake image service whose pulls need credentials when
// password is set, and which records the auth of every pull.
type authImages struct {
	*critest.FakeImageService
	password string
	mu       sync.Mutex
	auths    []string // "user:pass" or "anonymous", per pull
}

func (a *authImages) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	a.mu.Lock()
	who := "anonymous"
	if auth != nil {
		who = auth.Username + ":" + auth.Password
	}
	a.auths = append(a.auths, who)
	a.mu.Unlock()
	if a.password != "" && (auth == nil || auth.Password != a.password) {
		return "", errors.New("401 Unauthorized")
	}
	return a.FakeImageService.PullImage(ctx, img, auth, sb)
}

type imageFixture struct {
	img     *authImages
	m       *Manager
	clock   *testclock.FakeClock
	events  *events
	pod     *v1.Pod
	secrets []v1.Secret
}

func newImageFixture(t *testing.T) *imageFixture {
	f := &imageFixture{
		img:    &authImages{FakeImageService: critest.NewFakeImageService()},
		clock:  testclock.NewFakeClock(time.Now()),
		events: &events{},
		pod: &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
			Spec:       v1.PodSpec{ImagePullSecrets: []v1.LocalObjectReference{{Name: "s"}}},
		},
	}
	f.img.SetFakeImages([]string{"busybox:1"})
	f.m = New(Config{
		CRI:         &cri.Client{Runtime: critest.NewFakeRuntimeService(), Images: f.img, RuntimeName: "fake"},
		Recorder:    f.events,
		PullSecrets: func(context.Context, *v1.Pod) []v1.Secret { return f.secrets },
		Clock:       f.clock,
	})
	return f
}

func (f *imageFixture) ensure(image string, policy v1.PullPolicy) (string, *ContainerError) {
	return f.m.ensureImage(context.Background(), f.pod, image, policy, &runtimeapi.PodSandboxConfig{})
}

func TestEnsureImagePolicies(t *testing.T) {
	for _, tt := range []struct {
		name, image string
		policy      v1.PullPolicy
		wantReason  string // "" for success
		wantPulls   int
		wantEvents  []string // prefixes, in order
	}{
		{"present, IfNotPresent", "busybox:1", v1.PullIfNotPresent, "", 0,
			[]string{`Normal Pulled: Container image "busybox:1" already present on machine`}},
		{"present, Never", "busybox:1", v1.PullNever, "", 0,
			[]string{`Normal Pulled: Container image "busybox:1" already present on machine`}},
		{"present, Always pulls", "busybox:1", v1.PullAlways, "", 1,
			[]string{`Normal Pulling: Pulling image "busybox:1"`, `Normal Pulled: Successfully pulled image "busybox:1" in `}},
		{"absent, IfNotPresent pulls", "app:2", v1.PullIfNotPresent, "", 1,
			[]string{`Normal Pulling: Pulling image "app:2"`, `Normal Pulled: Successfully pulled image "app:2" in `}},
		{"absent, Never", "app:2", v1.PullNever, ReasonErrImageNeverPull, 0,
			[]string{`Warning ErrImageNeverPull: Container image "app:2" is not present with pull policy of Never`, `Warning Failed: Error: ErrImageNeverPull`}},
		{"upper case", "Busybox:1", v1.PullIfNotPresent, ReasonInvalidImageName, 0,
			[]string{`Warning InspectFailed: Failed to apply default image tag "Busybox:1": couldn't parse image name "Busybox:1": `, `Warning Failed: Error: InvalidImageName`}},
		{"bad tag", "busybox:-1", v1.PullAlways, ReasonInvalidImageName, 0, nil},
		{"image ID as name", strings.Repeat("ab", 32), v1.PullAlways, ReasonInvalidImageName, 0, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newImageFixture(t)
			ref, cerr := f.ensure(tt.image, tt.policy)
			if got := reasonOf(cerr); got != tt.wantReason {
				t.Fatalf("reason %q (%v), want %q", got, cerr, tt.wantReason)
			}
			if cerr == nil && ref == "" {
				t.Error("no image ref on success")
			}
			if len(f.img.auths) != tt.wantPulls {
				t.Errorf("%d pulls, want %d", len(f.img.auths), tt.wantPulls)
			}
			checkEvents(t, f.events.take(), tt.wantEvents)
		})
	}
}

func reasonOf(cerr *ContainerError) string {
	if cerr == nil {
		return ""
	}
	return cerr.Reason
}

// checkEvents checks that got starts with the want prefixes, in order
// (nil want: not checked).
func checkEvents(t *testing.T, got, want []string) {
	t.Helper()
	if want == nil {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("events %q, want %d: %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}

// A tagless image is pulled and looked up as :latest.
func TestEnsureImageDefaultTag(t *testing.T) {
	f := newImageFixture(t)
	f.img.SetFakeImages([]string{"busybox:latest"})
	if _, cerr := f.ensure("busybox", v1.PullIfNotPresent); cerr != nil {
		t.Fatal(cerr)
	}
	if len(f.img.auths) != 0 {
		t.Errorf("pulled busybox although busybox:latest is present")
	}
}

func TestEnsureImageInspectError(t *testing.T) {
	f := newImageFixture(t)
	f.img.InjectError("ImageStatus", errors.New("boom"))
	_, cerr := f.ensure("busybox:1", v1.PullIfNotPresent)
	if reasonOf(cerr) != ReasonImageInspectError || !strings.Contains(cerr.Message, "boom") {
		t.Errorf("got %v, want ImageInspectError with the cause", cerr)
	}
}

// Failed pulls back off 10 s, 20 s, 40 s ...; in back-off no pull happens
// and the message carries the last pull error.
func TestEnsureImagePullBackOff(t *testing.T) {
	f := newImageFixture(t)
	f.img.password = "secret" // anonymous pulls fail
	_, cerr := f.ensure("app:1", v1.PullIfNotPresent)
	if reasonOf(cerr) != ReasonErrImagePull || cerr.Message != "401 Unauthorized" {
		t.Fatalf("first pull: %v", cerr)
	}
	checkEvents(t, f.events.take(), []string{"Normal Pulling", `Warning Failed: Failed to pull image "app:1": 401 Unauthorized`, "Warning Failed: Error: ErrImagePull"})
	pulls := 1
	for _, backOff := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
		// Synced again when the back-off ends, or within 10 s to show it.
		if got := f.m.pullRetryAfter(f.pod, "app:1"); got != min(backOff, 10*time.Second) {
			t.Errorf("retry after %v, want %v", got, min(backOff, 10*time.Second))
		}
		f.clock.Step(backOff - time.Second)
		_, cerr = f.ensure("app:1", v1.PullIfNotPresent)
		want := `Back-off pulling image "app:1": ErrImagePull: 401 Unauthorized`
		if reasonOf(cerr) != ReasonImagePullBackOff || cerr.Message != want {
			t.Fatalf("within %v back-off: %v, want ImagePullBackOff %q", backOff, cerr, want)
		}
		checkEvents(t, f.events.take(), []string{`Normal BackOff: Back-off pulling image "app:1"`, "Warning Failed: Error: ImagePullBackOff"})
		if got := f.m.pullRetryAfter(f.pod, "app:1"); got != time.Second {
			t.Errorf("retry after %v, want the 1s left", got)
		}
		f.clock.Step(time.Second)
		_, cerr = f.ensure("app:1", v1.PullIfNotPresent)
		pulls++
		if reasonOf(cerr) != ReasonErrImagePull || len(f.img.auths) != pulls {
			t.Fatalf("after %v: %v with %d pulls, want ErrImagePull with %d", backOff, cerr, len(f.img.auths), pulls)
		}
		f.events.take()
	}
	// A success clears the back-off.
	f.img.password = ""
	f.clock.Step(80 * time.Second)
	if _, cerr := f.ensure("app:1", v1.PullAlways); cerr != nil {
		t.Fatal(cerr)
	}
	if got := f.m.pullRetryAfter(f.pod, "app:1"); got != 0 {
		t.Errorf("retry after %v after a success", got)
	}
}

func dockerConfigSecret(name, registry, user, pass string) v1.Secret {
	return v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Type:       v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(fmt.Sprintf(
			`{"auths": {%q: {"username": %q, "password": %q}}}`, registry, user, pass))},
	}
}

func TestEnsureImagePullSecrets(t *testing.T) {
	for _, tt := range []struct {
		name       string
		image      string
		secrets    []v1.Secret
		noRefs     bool // the pod references no secrets
		wantAuths  []string
		wantReason string
	}{
		{"matching credentials, in order until one works", "reg.example:5000/team/app:1",
			[]v1.Secret{dockerConfigSecret("s1", "reg.example:5000/team", "team", "wrong"), dockerConfigSecret("s2", "reg.example:5000", "host", "secret")},
			false, []string{"team:wrong", "host:secret"}, ""},
		{"no matching secret: anonymous", "other.example/app:1",
			[]v1.Secret{dockerConfigSecret("s1", "reg.example:5000", "host", "secret")},
			false, []string{"anonymous"}, ReasonErrImagePull},
		{"matching but wrong: no anonymous fallback", "reg.example:5000/app:1",
			[]v1.Secret{dockerConfigSecret("s1", "reg.example:5000", "host", "nope")},
			false, []string{"host:nope"}, ReasonErrImagePull},
		{"docker hub short name", "app:1",
			[]v1.Secret{dockerConfigSecret("hub", "https://index.docker.io/v1/", "hub", "secret")},
			false, []string{"hub:secret"}, ""},
		{"secrets not referenced are not read", "reg.example:5000/app:1",
			[]v1.Secret{dockerConfigSecret("s1", "reg.example:5000", "host", "secret")},
			true, []string{"anonymous"}, ReasonErrImagePull},
		{"malformed secret", "reg.example:5000/app:1",
			[]v1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bad"}, Type: v1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{v1.DockerConfigJsonKey: []byte("{")}}},
			false, nil, ReasonErrImagePull},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newImageFixture(t)
			f.img.password = "secret"
			f.secrets = tt.secrets
			if tt.noRefs {
				f.pod.Spec.ImagePullSecrets = nil
			}
			_, cerr := f.ensure(tt.image, v1.PullAlways)
			if got := reasonOf(cerr); got != tt.wantReason {
				t.Fatalf("reason %q (%v), want %q", got, cerr, tt.wantReason)
			}
			if fmt.Sprint(f.img.auths) != fmt.Sprint(tt.wantAuths) {
				t.Errorf("pulls with %v, want %v", f.img.auths, tt.wantAuths)
			}
			if tt.name == "malformed secret" && !strings.Contains(cerr.Message, "ns/bad") {
				t.Errorf("message %q does not name the secret", cerr.Message)
			}
		})
	}
}

// fakeProvider is a credential provider plugin set giving creds for repos
// under prefix.
type fakeProvider struct {
	prefix string
	creds  []keyring.Credential
	asked  []string
}

func (p *fakeProvider) Credentials(_ context.Context, repo string) []keyring.Credential {
	p.asked = append(p.asked, repo)
	if strings.HasPrefix(repo, p.prefix) {
		return p.creds
	}
	return nil
}

// Credential provider plugins' credentials are tried after the pull
// secrets', with or without secrets, as upstream's keyring unions them.
func TestEnsureImageCredentialProvider(t *testing.T) {
	for _, tt := range []struct {
		name      string
		secrets   []v1.Secret
		noRefs    bool
		image     string
		wantAuths []string
		wantAsked string
	}{
		{"plugin alone", nil, true, "reg.example:5000/app:1", []string{"plugin:secret"}, "reg.example:5000/app"},
		{"after a failing secret", []v1.Secret{dockerConfigSecret("s1", "reg.example:5000", "host", "nope")}, false,
			"reg.example:5000/app:1", []string{"host:nope", "plugin:secret"}, "reg.example:5000/app"},
		{"plugin has none: anonymous", nil, true, "other.example/app:1", []string{"anonymous"}, "other.example/app"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newImageFixture(t)
			f.img.password = "secret"
			f.secrets = tt.secrets
			if tt.noRefs {
				f.pod.Spec.ImagePullSecrets = nil
			}
			p := &fakeProvider{prefix: "reg.example:5000/", creds: []keyring.Credential{{Username: "plugin", Password: "secret"}}}
			f.m.cfg.CredentialProvider = p
			f.ensure(tt.image, v1.PullAlways)
			if fmt.Sprint(f.img.auths) != fmt.Sprint(tt.wantAuths) {
				t.Errorf("pulls with %v, want %v", f.img.auths, tt.wantAuths)
			}
			if len(p.asked) != 1 || p.asked[0] != tt.wantAsked {
				t.Errorf("plugins asked for %v, want [%s]", p.asked, tt.wantAsked)
			}
		})
	}
}
