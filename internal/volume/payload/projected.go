package payload

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
)

// ConfigMapGetter returns a ConfigMap; a missing one is (nil, nil) or an
// API NotFound error.
type ConfigMapGetter interface {
	GetConfigMap(namespace, name string) (*v1.ConfigMap, error)
}

// SecretGetter returns a Secret; a missing one is (nil, nil) or an API
// NotFound error.
type SecretGetter interface {
	GetSecret(namespace, name string) (*v1.Secret, error)
}

// ConfigMapGetterFunc adapts a function to ConfigMapGetter.
type ConfigMapGetterFunc func(namespace, name string) (*v1.ConfigMap, error)

// GetConfigMap calls f.
func (f ConfigMapGetterFunc) GetConfigMap(namespace, name string) (*v1.ConfigMap, error) {
	return f(namespace, name)
}

// SecretGetterFunc adapts a function to SecretGetter.
type SecretGetterFunc func(namespace, name string) (*v1.Secret, error)

// GetSecret calls f.
func (f SecretGetterFunc) GetSecret(namespace, name string) (*v1.Secret, error) {
	return f(namespace, name)
}

// Getters is what a projected volume reads besides the pod. A nil getter
// fails only the sources that need it.
type Getters struct {
	ConfigMaps   ConfigMapGetter
	Secrets      SecretGetter
	TrustBundles TrustBundleGetter
	// NodeAllocatable stands in for unset limits in downwardAPI sources.
	NodeAllocatable v1.ResourceList
}

// TokenFunc returns a service account token for the pod being set up,
// requested with the audience ("" for the apiserver's default) and
// lifetime given.
type TokenFunc func(audience string, expirationSeconds int64) (string, error)

// defaultTokenExpiration is the API default of a serviceAccountToken
// source's expirationSeconds.
const defaultTokenExpiration int64 = 3600

// ErrPodCertificateUnsupported fails projected volumes using that (alpha)
// source, rather than mounting them without the files.
var ErrPodCertificateUnsupported = errors.New("podCertificate projections are not supported")

// Projected returns the files of a projected volume: the union of its
// sources, later sources winning on a shared path, each with the volume's
// defaultMode (0644 when unset) unless an item says otherwise. Every
// failing source is reported, in one aggregated error, as upstream does.
//
// A serviceAccountToken file gets mode 0600 instead when the pod has an
// fsGroup or a single runAsUser, and that user as owner: the token is a
// credential, readable by the pod's user and, once SetFSGroup is applied,
// its group.
func Projected(source *v1.ProjectedVolumeSource, pod *v1.Pod, getters Getters, tokenFunc TokenFunc) (map[string]atomic.File, error) {
	if pod == nil {
		return nil, errNoPod
	}
	defaultMode := modeOr(source.DefaultMode, DefaultMode)
	fsUser := FSUser(pod)
	credentialMode := defaultMode
	if fsUser != nil || FSGroup(pod) != nil {
		// Upstream relies on the fsGroup pass to turn 0600 into 0640.
		credentialMode = 0o600
	}

	var errs []error
	files := make(map[string]atomic.File)
	add := func(part map[string]atomic.File, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		for p, f := range part {
			files[p] = f
		}
	}
	for _, s := range source.Sources {
		switch {
		case s.Secret != nil:
			add(projectSecret(s.Secret, pod.Namespace, getters.Secrets, defaultMode))
		case s.ConfigMap != nil:
			add(projectConfigMap(s.ConfigMap, pod.Namespace, getters.ConfigMaps, defaultMode))
		case s.DownwardAPI != nil:
			add(downwardAPIFiles(s.DownwardAPI.Items, pod, getters.NodeAllocatable, defaultMode))
		case s.ServiceAccountToken != nil:
			add(projectToken(s.ServiceAccountToken, tokenFunc, credentialMode, fsUser))
		case s.ClusterTrustBundle != nil:
			add(projectTrustBundle(s.ClusterTrustBundle, getters.TrustBundles, defaultMode))
		case s.PodCertificate != nil:
			errs = append(errs, ErrPodCertificateUnsupported)
		}
	}
	if err := aggregate(errs); err != nil {
		return nil, err
	}
	return files, nil
}

func projectSecret(p *v1.SecretProjection, namespace string, get SecretGetter, defaultMode int32) (map[string]atomic.File, error) {
	if get == nil {
		return nil, fmt.Errorf("cannot get secret %q: no secret getter", p.Name)
	}
	optional := isTrue(p.Optional)
	secret, err := get.GetSecret(namespace, p.Name)
	if missing(secret, err) {
		if !optional {
			if err == nil {
				err = apierrors.NewNotFound(v1.Resource("secret"), p.Name)
			}
			return nil, err
		}
		secret = &v1.Secret{}
	} else if err != nil {
		return nil, err
	}
	return secretFiles(p.Items, secret, defaultMode, optional)
}

func projectConfigMap(p *v1.ConfigMapProjection, namespace string, get ConfigMapGetter, defaultMode int32) (map[string]atomic.File, error) {
	if get == nil {
		return nil, fmt.Errorf("cannot get configmap %q: no configmap getter", p.Name)
	}
	optional := isTrue(p.Optional)
	cm, err := get.GetConfigMap(namespace, p.Name)
	if missing(cm, err) {
		if !optional {
			if err == nil {
				err = apierrors.NewNotFound(v1.Resource("configmap"), p.Name)
			}
			return nil, err
		}
		cm = &v1.ConfigMap{}
	} else if err != nil {
		return nil, err
	}
	return configMapFiles(p.Items, cm, defaultMode, optional)
}

func projectToken(p *v1.ServiceAccountTokenProjection, tokenFunc TokenFunc, mode int32, fsUser *int64) (map[string]atomic.File, error) {
	if tokenFunc == nil {
		return nil, errors.New("cannot request a service account token: no token source")
	}
	exp := defaultTokenExpiration
	if p.ExpirationSeconds != nil {
		exp = *p.ExpirationSeconds
	}
	token, err := tokenFunc(p.Audience, exp)
	if err != nil {
		return nil, err
	}
	return map[string]atomic.File{p.Path: {Data: []byte(token), Mode: mode, FsUser: fsUser}}, nil
}
