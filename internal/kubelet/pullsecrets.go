package kubelet

import (
	"context"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/credentialprovider"
	"github.com/skiff-sh/skiff/internal/podruntime"
)

// credentialProviders loads the image credential provider plugins the
// configuration names, or returns nil when it names none.
func credentialProviders(cfg Config) (podruntime.CredentialProvider, error) {
	if cfg.ImageCredentialProviderConfig == "" {
		return nil, nil
	}
	return credentialprovider.New(cfg.ImageCredentialProviderConfig, cfg.ImageCredentialProviderBinDir)
}

// pullSecrets reads a pod's imagePullSecrets from the apiserver (the Node
// authorizer lets a node read the secrets its pods reference). As upstream,
// a secret that cannot be read is left out with a warning event: the pull
// may still work without it.
func (k *Kubelet) pullSecrets(ctx context.Context, pod *v1.Pod) []v1.Secret {
	var secrets []v1.Secret
	var failed []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue // the API allows empty names; they mean nothing
		}
		s, err := k.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			klog.InfoS("Unable to retrieve pull secret, the image pull may not succeed", "pod", klog.KObj(pod), "secret", ref.Name, "err", err)
			failed = append(failed, ref.Name)
			continue
		}
		secrets = append(secrets, *s)
	}
	if len(failed) > 0 {
		k.recorder.Eventf(pod, v1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(failed, ", "))
	}
	return secrets
}
