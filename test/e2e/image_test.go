//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/test/registry"
)

// Image handling: real pulls from a
// real registry (test/registry) into the dev containerd, with and without
// pull secrets, each pull policy, and bad image names.

const (
	regUser = "skiff"
	regPass = "s3cret-pull"
)

// busyboxArchive builds an OCI archive of a busybox image to push into
// test registries.
func busyboxArchive(t *testing.T) string {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "busybox.tar")
	must(t, registry.BuildImage(context.Background(), archive, "e2e/busybox:1",
		"--add", "/bin/busybox:/bin/busybox", "--busybox-links", "--base-files", "--cmd", "sh",
		// Unlike skiff.local/busybox, so the image IDs differ.
		"--env", "SKIFF_E2E_REGISTRY=1"))
	return archive
}

// testRegistry starts a registry (with auth when users is set), pushes the
// busybox image under each repo:tag and returns it. It removes the images
// it served from containerd when the test ends (after the test's pods are
// gone: call it before newClusterNode).
func testRegistry(t *testing.T, auth bool, refs ...string) *registry.Registry {
	t.Helper()
	ctx := context.Background()
	opts := registry.Options{}
	if auth {
		opts.Users = map[string]string{regUser: regPass}
	}
	r, err := registry.Start(ctx, opts)
	must(t, err)
	t.Cleanup(func() {
		removeImages(t, r.Host+"/")
		if t.Failed() {
			t.Logf("registry log:\n%s", r.LogTail())
		}
		_ = r.Stop()
	})
	archive := busyboxArchive(t)
	for _, ref := range refs {
		repo, tag, _ := strings.Cut(ref, ":")
		_, err := r.Push(ctx, archive, repo, tag)
		must(t, err)
	}
	return r
}

// removeImages removes from containerd every image name (tag or digest)
// under prefix, so that runs start without them. It deletes names with ctr,
// not CRI RemoveImage: that removes every name of the image, and another
// image with the same content (another test registry's, say) would go too.
func removeImages(t *testing.T, prefix string) {
	logger := klog.Background()
	is, err := remote.NewRemoteImageService(criEndpoint, 30*time.Second, nil, &logger)
	if err != nil {
		t.Logf("image service: %v", err)
		return
	}
	imgs, err := is.ListImages(context.Background(), nil)
	if err != nil {
		t.Logf("list images: %v", err)
		return
	}
	var names []string
	for _, img := range imgs {
		for _, name := range append(img.RepoTags, img.RepoDigests...) {
			if strings.HasPrefix(name, prefix) {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return
	}
	args := append([]string{"--address", strings.TrimPrefix(criEndpoint, "unix://"), "-n", "k8s.io", "images", "rm"}, names...)
	if out, err := exec.Command(ctrBin(t), args...).CombinedOutput(); err != nil {
		t.Errorf("ctr images rm: %v: %s", err, out)
	}
}

// imageDigest is the manifest digest the dev containerd has for an image
// it pulled.
func imageDigest(t *testing.T, image string) string {
	t.Helper()
	logger := klog.Background()
	is, err := remote.NewRemoteImageService(criEndpoint, 30*time.Second, nil, &logger)
	must(t, err)
	st, err := is.ImageStatus(context.Background(), &runtimeapi.ImageSpec{Image: image}, false)
	must(t, err)
	repo := image[:strings.LastIndex(image, ":")] // the tag's colon, after the port's
	for _, d := range st.GetImage().GetRepoDigests() {
		if r, dg, ok := strings.Cut(d, "@"); ok && r == repo {
			return dg
		}
	}
	t.Fatalf("the runtime has no repo digest of %s: %+v", image, st.GetImage())
	return ""
}

func dockerConfigJSON(host string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(regUser + ":" + regPass))
	return []byte(fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, host, auth))
}

// podEvents returns "Reason: message" of the pod's events, oldest first.
func (cn *clusterNode) podEvents(t *testing.T, pod string) []v1.Event {
	t.Helper()
	list, err := cn.admin.CoreV1().Events(cn.ns).List(cn.ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	must(t, err)
	evs := list.Items
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].FirstTimestamp.Before(&evs[j].FirstTimestamp) })
	return evs
}

// waitPodEvent waits for an event of the pod whose reason is reason and whose
// message contains msg.
func (cn *clusterNode) waitPodEvent(t *testing.T, pod, reason, msg string, timeout time.Duration) v1.Event {
	t.Helper()
	var found v1.Event
	waitFor(t, timeout, fmt.Sprintf("event %s %q of pod %s", reason, msg, pod), func() (bool, error) {
		for _, e := range cn.podEvents(t, pod) {
			if e.Reason == reason && strings.Contains(e.Message, msg) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

func hasEvent(evs []v1.Event, reason, msg string) bool {
	for _, e := range evs {
		if e.Reason == reason && strings.Contains(e.Message, msg) {
			return true
		}
	}
	return false
}

// waitingReason returns the first container's waiting reason and message.
func waitingReason(p *v1.Pod) (string, string) {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
		return "", ""
	}
	w := p.Status.ContainerStatuses[0].State.Waiting
	return w.Reason, w.Message
}

func imagePod(name, image string, policy v1.PullPolicy, secrets ...string) *v1.Pod {
	p := busyboxPod(name, sleeper)
	p.Spec.Containers[0].Image = image
	p.Spec.Containers[0].ImagePullPolicy = policy
	for _, s := range secrets {
		p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
	}
	return p
}

// Pulls from an htpasswd registry work with either kind of pull secret;
// the status reports the image and image ID as the runtime has them.
func TestImagePullSecrets(t *testing.T) {
	r := testRegistry(t, true, "e2e/busybox:json", "e2e/busybox:cfg")
	cn := sharedNode(t)
	ctx := cn.ctx()
	_, err := cn.admin.CoreV1().Secrets(cn.ns).Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred"},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: dockerConfigJSON(r.Host)},
	}, metav1.CreateOptions{})
	must(t, err)
	auth := base64.StdEncoding.EncodeToString([]byte(regUser + ":" + regPass))
	_, err = cn.admin.CoreV1().Secrets(cn.ns).Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
		Type:       v1.SecretTypeDockercfg,
		Data:       map[string][]byte{v1.DockerConfigKey: []byte(fmt.Sprintf(`{"http://%s/v1/": {"auth": %q}}`, r.Host, auth))},
	}, metav1.CreateOptions{})
	must(t, err)

	for name, secret := range map[string]string{"json": "regcred", "cfg": "legacy"} {
		image := r.Host + "/e2e/busybox:" + name
		// A missing secret next to the right one: reported, not fatal.
		cn.createPod(t, imagePod("pull-"+name, image, v1.PullIfNotPresent, "missing", secret))
		p := cn.waitPod(t, cn.ns, "pull-"+name, 90*time.Second, "ready", isReady)
		cs := p.Status.ContainerStatuses[0]
		// containerd 1.6 names an image by its first tag and digest, which
		// may be another test registry's copy of the same busybox: any
		// name of this image is right, and the digest must be its own.
		digest := imageDigest(t, image)
		if !strings.Contains(cs.Image, "/e2e/busybox:") {
			t.Errorf("%s: status image %q, want %q or another tag of the same image", name, cs.Image, image)
		}
		if !strings.Contains(cs.ImageID, "/e2e/busybox@") || !strings.HasSuffix(cs.ImageID, "@"+digest) {
			t.Errorf("%s: status imageID %q, want a repo digest ...@%s", name, cs.ImageID, digest)
		}
		// Events are posted apart from the status, and may come after it.
		for _, want := range [][2]string{
			{"FailedToRetrieveImagePullSecret", "Unable to retrieve some image pull secrets (missing)"},
			{"Pulling", fmt.Sprintf("Pulling image %q", image)},
			{"Pulled", fmt.Sprintf("Successfully pulled image %q in ", image)},
		} {
			cn.waitPodEvent(t, "pull-"+name, want[0], want[1], 30*time.Second)
		}
	}
}

// eventMessage is the message of the first event of that reason whose
// message starts with prefix; "" if none.
func eventMessage(evs []v1.Event, reason, prefix string) string {
	for _, e := range evs {
		if e.Reason == reason && strings.HasPrefix(e.Message, prefix) {
			return e.Message
		}
	}
	return ""
}

func eventLines(evs []v1.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s %s: %s (x%d)", e.Type, e.Reason, e.Message, e.Count))
	}
	return out
}

// Without credentials the pull fails (ErrImagePull), then backs off
// (ImagePullBackOff), and each back-off is longer than the one before.
func TestImagePullBackOff(t *testing.T) {
	r := testRegistry(t, true, "e2e/busybox:locked")
	cn := sharedNode(t)
	image := r.Host + "/e2e/busybox:locked"
	cn.createPod(t, imagePod("nocred", image, v1.PullIfNotPresent))

	seen := map[string]string{}
	var pulls []time.Time // when Skiff started each pull, from the Pulling event
	lastCount := int32(0)
	waitFor(t, 120*time.Second, "three pulls, ErrImagePull and ImagePullBackOff", func() (bool, error) {
		p, err := cn.admin.CoreV1().Pods(cn.ns).Get(cn.ctx(), "nocred", metav1.GetOptions{})
		if err == nil {
			if reason, msg := waitingReason(p); reason != "" {
				seen[reason] = msg
			}
		}
		for _, e := range cn.podEvents(t, "nocred") {
			// The recorder folds repeats into one Event whose count and
			// lastTimestamp grow.
			if e.Reason == "Pulling" && e.Count > lastCount {
				for ; lastCount < e.Count; lastCount++ {
					pulls = append(pulls, e.LastTimestamp.Time)
				}
			}
		}
		return len(pulls) >= 3 && seen["ImagePullBackOff"] != "", nil
	})
	// ErrImagePull lasts until the next sync. With the runtime's container
	// events that sync can come before the status manager reports it, so
	// the reason may show only in the Failed event (as with upstream's
	// evented PLEG); its message is the same.
	errPull := seen["ErrImagePull"]
	if errPull == "" {
		errPull = eventMessage(cn.podEvents(t, "nocred"), "Failed", fmt.Sprintf("Failed to pull image %q: ", image))
	}
	// The runtime's words for the registry's 401: containerd 1.6 quotes the
	// status, 2.x says its credentials were refused.
	if msg := errPull; !strings.Contains(msg, "401 Unauthorized") &&
		!strings.Contains(msg, "authorization failed: no basic auth credentials") {
		t.Errorf("ErrImagePull message %q does not give the registry's answer", msg)
	}
	wantBackOff := fmt.Sprintf("Back-off pulling image %q: ErrImagePull: ", image)
	if msg := seen["ImagePullBackOff"]; !strings.HasPrefix(msg, wantBackOff) {
		t.Errorf("ImagePullBackOff message %q, want prefix %q", msg, wantBackOff)
	}
	// Event times have whole seconds: the first back-off is about 10 s, the
	// second about 20 s.
	first, second := pulls[1].Sub(pulls[0]), pulls[2].Sub(pulls[1])
	t.Logf("pulls at %v: back-offs %v, %v", pulls, first, second)
	if first < 8*time.Second || second < first+5*time.Second {
		t.Errorf("back-offs %v then %v: want about 10 s growing to about 20 s", first, second)
	}
	evs := cn.podEvents(t, "nocred")
	for _, want := range [][2]string{
		{"Failed", fmt.Sprintf("Failed to pull image %q: ", image)},
		{"Failed", "Error: ErrImagePull"},
		{"BackOff", fmt.Sprintf("Back-off pulling image %q", image)},
		{"Failed", "Error: ImagePullBackOff"},
	} {
		if !hasEvent(evs, want[0], want[1]) {
			t.Errorf("no event %s %q in %v", want[0], want[1], eventLines(evs))
		}
	}
}

// IfNotPresent uses an image already there; Never refuses a missing one;
// Always pulls even a present one; a malformed name is InvalidImageName.
func TestImagePullPolicies(t *testing.T) {
	r := testRegistry(t, false, "e2e/busybox:always")
	cn := sharedNode(t)
	always := r.Host + "/e2e/busybox:always"
	cn.createPod(t, imagePod("present", busybox, v1.PullIfNotPresent))
	cn.createPod(t, imagePod("never", r.Host+"/e2e/absent:1", v1.PullNever))
	cn.createPod(t, imagePod("invalid", "skiff.local/BusyBox:1.35", v1.PullIfNotPresent))
	cn.createPod(t, imagePod("always", always, v1.PullAlways))

	cn.waitPod(t, cn.ns, "present", 60*time.Second, "ready", isReady)
	cn.waitPodEvent(t, "present", "Pulled", fmt.Sprintf("Container image %q already present on machine", busybox), 10*time.Second)
	if evs := cn.podEvents(t, "present"); hasEvent(evs, "Pulling", "") {
		t.Errorf("IfNotPresent pulled a present image: %v", eventLines(evs))
	}

	p := cn.waitPod(t, cn.ns, "never", 60*time.Second, "ErrImageNeverPull", func(p *v1.Pod) bool {
		reason, _ := waitingReason(p)
		return reason == "ErrImageNeverPull"
	})
	if _, msg := waitingReason(p); msg != fmt.Sprintf("Container image %q is not present with pull policy of Never", r.Host+"/e2e/absent:1") {
		t.Errorf("ErrImageNeverPull message %q", msg)
	}
	cn.waitPodEvent(t, "never", "ErrImageNeverPull", "is not present with pull policy of Never", 10*time.Second)

	p = cn.waitPod(t, cn.ns, "invalid", 60*time.Second, "InvalidImageName", func(p *v1.Pod) bool {
		reason, _ := waitingReason(p)
		return reason == "InvalidImageName"
	})
	if _, msg := waitingReason(p); !strings.Contains(msg, `couldn't parse image name "skiff.local/BusyBox:1.35"`) {
		t.Errorf("InvalidImageName message %q", msg)
	}
	cn.waitPodEvent(t, "invalid", "InspectFailed", "Failed to apply default image tag", 10*time.Second)

	// Always pulls, then a second pod with Always pulls again although the
	// image is now present.
	cn.waitPod(t, cn.ns, "always", 60*time.Second, "ready", isReady)
	cn.waitPodEvent(t, "always", "Pulled", fmt.Sprintf("Successfully pulled image %q", always), 10*time.Second)
	cn.createPod(t, imagePod("always2", always, v1.PullAlways))
	cn.waitPod(t, cn.ns, "always2", 60*time.Second, "ready", isReady)
	cn.waitPodEvent(t, "always2", "Pulled", fmt.Sprintf("Successfully pulled image %q", always), 10*time.Second)
}
