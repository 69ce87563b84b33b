// Package envvars computes a container's environment as the upstream kubelet
// does: envFrom (ConfigMaps and Secrets, with prefix and optional), then env
// in order (values with $(VAR) expansion, or valueFrom: fieldRef,
// resourceFieldRef, configMapKeyRef, secretKeyRef), then the variables of
// the Services the pod sees. Errors carry upstream's messages: they become
// the container's CreateContainerConfigError.
package envvars

import (
	"context"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/skiff-sh/skiff/internal/expansion"
	"github.com/skiff-sh/skiff/internal/podsource"
)

// Config configures a Builder.
type Config struct {
	// Client reads ConfigMaps and Secrets; nil when standalone.
	Client corev1client.CoreV1Interface
	// Services lists the cluster's Services, and ServicesSynced tells
	// whether it has listed them once; both nil when standalone.
	Services       ServiceLister
	ServicesSynced func() bool
	// HostIPs are the node's IPs, the first one primary.
	HostIPs []string
	// NodeAllocatable is what limits a container does not set default to.
	NodeAllocatable func() v1.ResourceList
}

// Builder builds container environments.
type Builder struct{ cfg Config }

// New returns a Builder.
func New(cfg Config) *Builder { return &Builder{cfg: cfg} }

// env is an environment under construction: values by name, and the order
// names were first defined in, so the result is stable.
type env struct {
	vals  map[string]string
	order []string
}

func (e *env) set(k, v string) {
	if _, ok := e.vals[k]; !ok {
		e.order = append(e.order, k)
	}
	e.vals[k] = v
}

// build carries one Env call: the objects read so far, each read once.
type build struct {
	b          *Builder
	ctx        context.Context
	pod        *v1.Pod
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

// Env returns container c's environment: envFrom and env variables in the
// order they are defined, then the Services' variables sorted by name.
// podIPs are the sandbox's IPs.
func (b *Builder) Env(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]v1.EnvVar, error) {
	if pod.Spec.EnableServiceLinks == nil {
		return nil, fmt.Errorf("nil pod.spec.enableServiceLinks encountered, cannot construct envvars")
	}
	// As upstream: without one list of the Services, an API pod would miss
	// KUBERNETES_SERVICE_HOST, which in-cluster clients need.
	if !isStatic(pod) && b.cfg.ServicesSynced != nil && !b.cfg.ServicesSynced() {
		return nil, fmt.Errorf("services have not yet been read at least once, cannot construct envvars")
	}
	svcEnv, err := serviceEnv(b.cfg.Services, pod.Namespace, *pod.Spec.EnableServiceLinks)
	if err != nil {
		return nil, err
	}
	bl := &build{b: b, ctx: ctx, pod: pod, configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}}
	e := &env{vals: map[string]string{}}
	// envFrom first: env entries override what it defines.
	for _, from := range c.EnvFrom {
		data, err := bl.envFrom(from)
		if err != nil {
			return nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			e.set(from.Prefix+k, data[k])
		}
	}
	lookup := expansion.MapLookup(e.vals, svcEnv)
	for _, ev := range c.Env {
		val := ev.Value
		switch {
		case val != "":
			val = expansion.Expand(val, lookup)
		case ev.ValueFrom != nil:
			v, ok, err := bl.valueFrom(ev.ValueFrom, c, podIPs)
			if err != nil {
				return nil, err
			}
			if !ok { // an optional source that is missing: no variable
				continue
			}
			val = v
		}
		e.set(ev.Name, val)
	}
	out := make([]v1.EnvVar, 0, len(e.order)+len(svcEnv))
	for _, k := range e.order {
		out = append(out, v1.EnvVar{Name: k, Value: e.vals[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(svcEnv)) {
		if _, ok := e.vals[k]; !ok { // the pod's own variables win
			out = append(out, v1.EnvVar{Name: k, Value: svcEnv[k]})
		}
	}
	return out, nil
}

// envFrom returns the data of one envFrom source; nil when it is optional
// and missing. Keys are used as they are, even those that are not C
// identifiers: upstream v1.34 (RelaxedEnvironmentVariableValidation, GA)
// no longer skips them.
func (bl *build) envFrom(from v1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := bl.configMap(from.ConfigMapRef.Name, isTrue(from.ConfigMapRef.Optional))
		if cm == nil || err != nil {
			return nil, err
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := bl.secret(from.SecretRef.Name, isTrue(from.SecretRef.Optional))
		if s == nil || err != nil {
			return nil, err
		}
		data := make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return data, nil
	}
	return nil, nil
}

// valueFrom resolves an env source; ok is false for an optional
// ConfigMap or Secret (or key) that is missing.
func (bl *build) valueFrom(src *v1.EnvVarSource, c *v1.Container, podIPs []string) (val string, ok bool, err error) {
	pod := bl.pod
	switch {
	case src.FieldRef != nil:
		val, err = fieldRefValue(src.FieldRef, pod, bl.b.podIPs(pod, podIPs), bl.b.cfg.HostIPs)
		return val, err == nil, err
	case src.ResourceFieldRef != nil:
		val, err = resourceFieldValue(src.ResourceFieldRef, pod, c, bl.b.allocatable())
		return val, err == nil, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := bl.configMap(ref.Name, isTrue(ref.Optional))
		if cm == nil || err != nil {
			return "", false, err
		}
		if val, ok = cm.Data[ref.Key]; !ok && !isTrue(ref.Optional) {
			return "", false, fmt.Errorf("couldn't find key %v in ConfigMap %v/%v", ref.Key, pod.Namespace, ref.Name)
		}
		return val, ok, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := bl.secret(ref.Name, isTrue(ref.Optional))
		if s == nil || err != nil {
			return "", false, err
		}
		b, ok := s.Data[ref.Key]
		if !ok && !isTrue(ref.Optional) {
			return "", false, fmt.Errorf("couldn't find key %v in Secret %v/%v", ref.Key, pod.Namespace, ref.Name)
		}
		return string(b), ok, nil
	case src.FileKeyRef != nil:
		// Alpha upstream (feature gate EnvFiles, off by default).
		return "", false, fmt.Errorf("valueFrom.fileKeyRef is not supported by this version of Skiff")
	}
	return "", true, nil
}

// configMap reads a ConfigMap once per build. A missing one is (nil, nil)
// when optional, else upstream's NotFound ("configmap \"x\" not found").
func (bl *build) configMap(name string, optional bool) (*v1.ConfigMap, error) {
	if cm, ok := bl.configMaps[name]; ok {
		return cm, nil
	}
	if bl.b.cfg.Client == nil {
		return nil, fmt.Errorf("couldn't get configMap %v/%v, no kubeClient defined", bl.pod.Namespace, name)
	}
	cm, err := bl.b.cfg.Client.ConfigMaps(bl.pod.Namespace).Get(bl.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, notFound(err, "configmap", name, optional)
	}
	bl.configMaps[name] = cm
	return cm, nil
}

func (bl *build) secret(name string, optional bool) (*v1.Secret, error) {
	if s, ok := bl.secrets[name]; ok {
		return s, nil
	}
	if bl.b.cfg.Client == nil {
		return nil, fmt.Errorf("couldn't get secret %v/%v, no kubeClient defined", bl.pod.Namespace, name)
	}
	s, err := bl.b.cfg.Client.Secrets(bl.pod.Namespace).Get(bl.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, notFound(err, "secret", name, optional)
	}
	bl.secrets[name] = s
	return s, nil
}

// notFound maps a GET error: nil for a missing optional object, and the
// message upstream's object managers give ("configmap \"x\" not found")
// for a missing required one.
func notFound(err error, resource, name string, optional bool) error {
	if !apierrors.IsNotFound(err) {
		return err
	}
	if optional {
		return nil
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name)
}

func (b *Builder) allocatable() v1.ResourceList {
	if b.cfg.NodeAllocatable == nil {
		return nil
	}
	return b.cfg.NodeAllocatable()
}

func isStatic(pod *v1.Pod) bool {
	s := pod.Annotations[podsource.ConfigSourceAnnotation]
	return s != "" && s != podsource.APIServer
}

func isTrue(b *bool) bool { return b != nil && *b }
