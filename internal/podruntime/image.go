package podruntime

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/images"
	"github.com/skiff-sh/skiff/internal/images/keyring"
)

// ReasonImageInspectError: the runtime could not say whether it has the image.
const ReasonImageInspectError = "ImageInspectError"

// ensureImage makes the image present as the pull policy asks and returns
// the runtime's image ID, with upstream's events and waiting reasons. Failed
// pulls back off (10 s doubling to 300 s) per pod and image. The sandbox
// image is the runtime's own business (as upstream 1.34: the kubelet pulls
// none), so every image here is a container's.
func (m *Manager) ensureImage(ctx context.Context, pod *v1.Pod, image string, policy v1.PullPolicy, sandbox *runtimeapi.PodSandboxConfig) (string, *ContainerError) {
	fail := func(reason, eventReason, msg string) (string, *ContainerError) {
		m.event(pod, v1.EventTypeWarning, eventReason, "%s", msg)
		m.event(pod, v1.EventTypeWarning, "Failed", "Error: %s", reason)
		return "", &ContainerError{reason, msg}
	}
	pull, repo, err := images.Normalize(image)
	if err != nil {
		return fail(ReasonInvalidImageName, "InspectFailed", fmt.Sprintf("Failed to apply default image tag %q: %v", image, err))
	}
	if policy != v1.PullAlways {
		resp, err := m.cfg.CRI.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: pull}, false)
		if err != nil {
			return fail(ReasonImageInspectError, "InspectFailed", fmt.Sprintf("Failed to inspect image %q: %v", image, err))
		}
		if resp.Image != nil {
			m.event(pod, v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", image)
			return resp.Image.Id, nil
		}
		if policy == v1.PullNever {
			return fail(ReasonErrImageNeverPull, ReasonErrImageNeverPull, fmt.Sprintf("Container image %q is not present with pull policy of Never", image))
		}
	}
	key := pullBackOffKey(pod, image)
	if m.pullBackOff.IsInBackOffSinceUpdate(key, m.cfg.Clock.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", image)
		m.event(pod, v1.EventTypeNormal, "BackOff", "%s", msg)
		m.event(pod, v1.EventTypeWarning, "Failed", "Error: %s", ReasonImagePullBackOff)
		if prev, ok := m.pullErrs.Load(key); ok {
			msg += ": " + prev.(pullFailure).msg
		}
		return "", &ContainerError{ReasonImagePullBackOff, msg}
	}
	creds, cerr := m.pullCredentials(ctx, pod, repo)
	if cerr != nil {
		return fail(cerr.Reason, "Failed", cerr.Message)
	}
	m.event(pod, v1.EventTypeNormal, "Pulling", "Pulling image %q", image)
	start := m.cfg.Clock.Now()
	res, err := m.cfg.Puller.Pull(ctx, pull, creds, sandbox)
	if err != nil {
		now := m.cfg.Clock.Now()
		m.pullBackOff.Next(key, now)
		m.pullErrs.Store(key, pullFailure{ReasonErrImagePull + ": " + err.Error(), now})
		klog.InfoS("Image pull failed", "pod", klog.KObj(pod), "image", image, "credentials", len(creds), "err", err)
		m.event(pod, v1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", image, err)
		m.event(pod, v1.EventTypeWarning, "Failed", "Error: %s", ReasonErrImagePull)
		return "", &ContainerError{ReasonErrImagePull, err.Error()}
	}
	m.pullBackOff.Reset(key)
	m.pullErrs.Delete(key)
	end := m.cfg.Clock.Now()
	m.event(pod, v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.",
		image, res.Pulling.Truncate(time.Millisecond), end.Sub(start).Truncate(time.Millisecond), res.Size)
	// The pull's duration by image size; the pod start tracker leaves pull
	// time out of the start SLI.
	m.cfg.Metrics.Runtime.ObserveImagePull(end.Sub(start), res.Size)
	if m.cfg.Timer != nil {
		m.cfg.Timer.Pulled(pod.UID, start, end)
	}
	return res.ImageRef, nil
}

// CredentialProvider gives registry credentials for an image repository.
type CredentialProvider interface {
	Credentials(ctx context.Context, repo string) []keyring.Credential
}

// pullCredentials returns the credentials for repo: the pod's pull
// secrets', then the credential provider plugins', each tried in turn. A
// secret that cannot be read is skipped with an event, as upstream (the
// pull may still work); a malformed one fails the pull visibly.
func (m *Manager) pullCredentials(ctx context.Context, pod *v1.Pod, repo string) ([]keyring.Credential, *ContainerError) {
	var creds []keyring.Credential
	if m.cfg.PullSecrets != nil && len(pod.Spec.ImagePullSecrets) > 0 {
		k, err := keyring.FromSecrets(m.cfg.PullSecrets(ctx, pod))
		if err != nil {
			return nil, &ContainerError{ReasonErrImagePull, err.Error()}
		}
		creds = k.Lookup(repo)
	}
	if m.cfg.CredentialProvider != nil {
		creds = append(creds, m.cfg.CredentialProvider.Credentials(ctx, repo)...)
	}
	return creds, nil
}

// pullBackOffKey identifies the pull back-off of one image of one pod.
func pullBackOffKey(pod *v1.Pod, image string) string {
	if pod == nil {
		return image
	}
	return string(pod.UID) + "_" + image
}

// pullFailure is the last failed pull of a back-off key.
type pullFailure struct {
	msg string
	at  time.Time
}

// pullRetryAfter is when to sync the pod again for a failed image (zero
// when the image has not failed): when its back-off ends, but at least every
// 10 s as upstream's pod workers do after an error, so the status moves from
// ErrImagePull (just failed) to ImagePullBackOff (waiting) as users expect.
func (m *Manager) pullRetryAfter(pod *v1.Pod, image string) time.Duration {
	key := pullBackOffKey(pod, image)
	v, ok := m.pullErrs.Load(key)
	if !ok {
		return 0
	}
	// Get is the back-off's full length; it runs from the last failure.
	left := m.pullBackOff.Get(key) - m.cfg.Clock.Since(v.(pullFailure).at)
	return min(max(left, 100*time.Millisecond), backOffInitial)
}

// event records an event about a pod.
func (m *Manager) event(pod *v1.Pod, eventtype, reason, format string, args ...interface{}) {
	if m.cfg.Recorder == nil {
		return
	}
	m.cfg.Recorder.Eventf(pod, eventtype, reason, format, args...)
}

// gcPullErrors forgets pull failures whose back-off has long run out (the
// back-off entries themselves go in pullBackOff.GC after 2 × max).
func (m *Manager) gcPullErrors() {
	now := m.cfg.Clock.Now()
	m.pullErrs.Range(func(k, v any) bool {
		if now.Sub(v.(pullFailure).at) > 2*backOffMax {
			m.pullErrs.Delete(k)
		}
		return true
	})
}
