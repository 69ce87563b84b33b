package payload

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
)

// Secret returns the files of a secret volume, with ConfigMap's rules:
// secret is nil when the Secret does not exist (`secret "x" not found`
// unless optional), items select keys, and a missing key fails the volume
// unless it is optional. Only data is read: the apiserver has already
// merged stringData into it.
func Secret(source *v1.SecretVolumeSource, secret *v1.Secret) (map[string]atomic.File, error) {
	optional := isTrue(source.Optional)
	if secret == nil {
		if !optional {
			return nil, apierrors.NewNotFound(v1.Resource("secret"), source.SecretName)
		}
		secret = &v1.Secret{}
	}
	return secretFiles(source.Items, secret, modeOr(source.DefaultMode, DefaultMode), optional)
}

func secretFiles(items []v1.KeyToPath, secret *v1.Secret, defaultMode int32, optional bool) (map[string]atomic.File, error) {
	files := make(map[string]atomic.File, len(secret.Data))
	if len(items) == 0 {
		for k, v := range secret.Data {
			files[k] = atomic.File{Data: v, Mode: defaultMode}
		}
		return files, nil
	}
	for _, item := range items {
		data, ok := secret.Data[item.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("references non-existent secret key: %s", item.Key)
		}
		files[item.Path] = atomic.File{Data: data, Mode: modeOr(item.Mode, defaultMode)}
	}
	return files, nil
}
