package envvars

import (
	"context"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/podsource"
)

func ptr[T any](v T) *T { return &v }

func testPod(c v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": "hi"},
		},
		Spec: v1.PodSpec{
			NodeName: "node-1", ServiceAccountName: "sa", EnableServiceLinks: ptr(true),
			Containers: []v1.Container{c},
		},
	}
}

func field(path string) *v1.EnvVarSource {
	return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
}

func res(container, name, divisor string) *v1.EnvVarSource {
	r := &v1.ResourceFieldSelector{ContainerName: container, Resource: name}
	if divisor != "" {
		r.Divisor = resource.MustParse(divisor)
	}
	return &v1.EnvVarSource{ResourceFieldRef: r}
}

func cmKey(name, key string, optional bool) *v1.EnvVarSource {
	return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: &optional}}
}

func secKey(name, key string, optional bool) *v1.EnvVarSource {
	return &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: &optional}}
}

func newTestBuilder(synced bool) *Builder {
	client := fake.NewClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"},
			Data: map[string]string{"color": "blue", "size": "L", "1-bad.key": "x"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sec"},
			Data: map[string][]byte{"password": []byte("s3cret"), "user": []byte("admin")}},
	)
	return New(Config{
		Client:         client.CoreV1(),
		Services:       fakeLister{svc("ns", "web", "10.0.0.3", v1.ServicePort{Port: 8080}), svc("default", "kubernetes", "10.0.0.1", v1.ServicePort{Name: "https", Port: 443})},
		ServicesSynced: func() bool { return synced },
		HostIPs:        []string{"192.168.1.10", "fd00::10"},
		NodeAllocatable: func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
		},
	})
}

// envMap runs Env and returns the variables by name, with their order.
func envMap(t *testing.T, b *Builder, pod *v1.Pod, podIPs []string) (map[string]string, []string, error) {
	t.Helper()
	vars, err := b.Env(context.Background(), pod, &pod.Spec.Containers[0], podIPs)
	m := map[string]string{}
	var order []string
	for _, v := range vars {
		if _, dup := m[v.Name]; dup {
			t.Errorf("variable %s defined twice", v.Name)
		}
		m[v.Name] = v.Value
		order = append(order, v.Name)
	}
	return m, order, err
}

func TestEnvValues(t *testing.T) {
	cases := []struct {
		name   string
		env    []v1.EnvVar
		from   []v1.EnvFromSource
		want   map[string]string // name → value; "<unset>" means absent
		podIPs []string
	}{
		{name: "expansion in declared order, escapes, unknown kept", env: []v1.EnvVar{
			{Name: "A", Value: "a"},
			{Name: "B", Value: "$(A)-b"},
			{Name: "C", Value: "$(LATER)"},
			{Name: "LATER", Value: "l"},
			{Name: "D", Value: "$$(A)"},
			{Name: "E", Value: "$(WEB_SERVICE_HOST):$(WEB_SERVICE_PORT)"},
			{Name: "EMPTY"},
		}, want: map[string]string{"A": "a", "B": "a-b", "C": "$(LATER)", "LATER": "l", "D": "$(A)", "E": "10.0.0.3:8080", "EMPTY": ""}},
		{name: "fieldRef of every kind", podIPs: []string{"fd00::5", "10.88.0.5"}, env: []v1.EnvVar{
			{Name: "NAME", ValueFrom: field("metadata.name")},
			{Name: "NS", ValueFrom: field("metadata.namespace")},
			{Name: "UID", ValueFrom: field("metadata.uid")},
			{Name: "LABEL", ValueFrom: field("metadata.labels['app']")},
			{Name: "NOLABEL", ValueFrom: field("metadata.labels['none']")},
			{Name: "ANN", ValueFrom: field("metadata.annotations['note']")},
			{Name: "NODE", ValueFrom: field("spec.nodeName")},
			{Name: "SA", ValueFrom: field("spec.serviceAccountName")},
			{Name: "HOSTIP", ValueFrom: field("status.hostIP")},
			{Name: "HOSTIPS", ValueFrom: field("status.hostIPs")},
			{Name: "PODIP", ValueFrom: field("status.podIP")},
			{Name: "PODIPS", ValueFrom: field("status.podIPs")},
			{Name: "USES", Value: "$(NAME).$(NS)"},
		}, want: map[string]string{
			"NAME": "p", "NS": "ns", "UID": "uid-1", "LABEL": "web", "NOLABEL": "", "ANN": "hi",
			"NODE": "node-1", "SA": "sa", "HOSTIP": "192.168.1.10", "HOSTIPS": "192.168.1.10,fd00::10",
			// The node's family (IPv4) first, as upstream sorts them.
			"PODIP": "10.88.0.5", "PODIPS": "10.88.0.5,fd00::5", "USES": "p.ns",
		}},
		{name: "resourceFieldRef with divisors and allocatable defaults", env: []v1.EnvVar{
			{Name: "CPU_REQ_M", ValueFrom: res("", "requests.cpu", "1m")},
			{Name: "CPU_REQ", ValueFrom: res("", "requests.cpu", "")},
			{Name: "MEM_LIM_MI", ValueFrom: res("c", "limits.memory", "1Mi")},
			{Name: "CPU_LIM", ValueFrom: res("", "limits.cpu", "")}, // unset: node allocatable
		}, want: map[string]string{"CPU_REQ_M": "250", "CPU_REQ": "1", "MEM_LIM_MI": "64", "CPU_LIM": "4"}},
		{name: "configMapKeyRef and secretKeyRef, optional missing ones unset", env: []v1.EnvVar{
			{Name: "COLOR", ValueFrom: cmKey("cm", "color", false)},
			{Name: "PASS", ValueFrom: secKey("sec", "password", false)},
			{Name: "OPT_KEY", ValueFrom: cmKey("cm", "nokey", true)},
			{Name: "OPT_CM", ValueFrom: cmKey("nocm", "k", true)},
			{Name: "OPT_SKEY", ValueFrom: secKey("sec", "nokey", true)},
			{Name: "OPT_SEC", ValueFrom: secKey("nosec", "k", true)},
		}, want: map[string]string{"COLOR": "blue", "PASS": "s3cret",
			"OPT_KEY": "<unset>", "OPT_CM": "<unset>", "OPT_SKEY": "<unset>", "OPT_SEC": "<unset>"}},
		{name: "envFrom with prefix; env overrides; keys as they are", from: []v1.EnvFromSource{
			{Prefix: "CM_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}},
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nocm"}, Optional: ptr(true)}},
		}, env: []v1.EnvVar{
			{Name: "user", Value: "override-$(CM_color)"},
		}, want: map[string]string{"CM_color": "blue", "CM_size": "L", "CM_1-bad.key": "x", "password": "s3cret", "user": "override-blue"}},
		{name: "the pod's variables win over service variables", env: []v1.EnvVar{
			{Name: "WEB_SERVICE_HOST", Value: "mine"},
		}, want: map[string]string{"WEB_SERVICE_HOST": "mine", "WEB_SERVICE_PORT": "8080", "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT_HTTPS": "443"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod(v1.Container{Name: "c", Env: c.env, EnvFrom: c.from, Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
			}})
			got, _, err := envMap(t, newTestBuilder(true), pod, c.podIPs)
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range c.want {
				v, ok := got[k]
				if want == "<unset>" {
					if ok {
						t.Errorf("%s = %q, want it unset", k, v)
					}
					continue
				}
				if !ok || v != want {
					t.Errorf("%s = %q (set %v), want %q", k, v, ok, want)
				}
			}
		})
	}
}

func TestEnvOrder(t *testing.T) {
	pod := testPod(v1.Container{Name: "c",
		EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
		Env:     []v1.EnvVar{{Name: "Z", Value: "z"}, {Name: "color", Value: "red"}, {Name: "A", Value: "a"}},
	})
	pod.Spec.EnableServiceLinks = ptr(false)
	got, order, err := envMap(t, newTestBuilder(true), pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1-bad.key", "color", "size", "Z", "A", // envFrom sorted, then env as declared
		"KUBERNETES_PORT", "KUBERNETES_PORT_443_TCP", "KUBERNETES_PORT_443_TCP_ADDR", "KUBERNETES_PORT_443_TCP_PORT",
		"KUBERNETES_PORT_443_TCP_PROTO", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS"}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("order = %v\nwant    %v", order, want)
	}
	if got["color"] != "red" {
		t.Errorf("color = %q: env must override envFrom", got["color"])
	}
	if _, ok := got["WEB_SERVICE_HOST"]; ok {
		t.Error("enableServiceLinks false must leave out the namespace's services")
	}
}

func TestEnvErrors(t *testing.T) {
	static := func(p *v1.Pod) { p.Annotations[podsource.ConfigSourceAnnotation] = podsource.File }
	cases := []struct {
		name    string
		env     []v1.EnvVar
		from    []v1.EnvFromSource
		b       *Builder
		mutate  func(*v1.Pod)
		wantErr string
	}{
		{name: "missing configmap", env: []v1.EnvVar{{Name: "X", ValueFrom: cmKey("x", "k", false)}}, wantErr: `configmap "x" not found`},
		{name: "missing configmap key", env: []v1.EnvVar{{Name: "X", ValueFrom: cmKey("cm", "k", false)}}, wantErr: "couldn't find key k in ConfigMap ns/cm"},
		{name: "missing secret", env: []v1.EnvVar{{Name: "X", ValueFrom: secKey("x", "k", false)}}, wantErr: `secret "x" not found`},
		{name: "missing secret key", env: []v1.EnvVar{{Name: "X", ValueFrom: secKey("sec", "k", false)}}, wantErr: "couldn't find key k in Secret ns/sec"},
		{name: "missing envFrom configmap", from: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}}}}, wantErr: `configmap "x" not found`},
		{name: "missing envFrom secret", from: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}}}}, wantErr: `secret "x" not found`},
		{name: "standalone configmap", b: New(Config{}), mutate: static, env: []v1.EnvVar{{Name: "X", ValueFrom: cmKey("cm", "k", true)}}, wantErr: "couldn't get configMap ns/cm, no kubeClient defined"},
		{name: "standalone secret", b: New(Config{}), mutate: static, from: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}}, wantErr: "couldn't get secret ns/s, no kubeClient defined"},
		{name: "services not listed yet", b: newTestBuilder(false), wantErr: "services have not yet been read at least once, cannot construct envvars"},
		{name: "bad fieldRef version", env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}}}, wantErr: "unsupported pod version: v2"},
		{name: "unsupported fieldRef", env: []v1.EnvVar{{Name: "X", ValueFrom: field("spec.restartPolicy")}}, wantErr: "unsupported fieldPath: spec.restartPolicy"},
		{name: "bad subscript", env: []v1.EnvVar{{Name: "X", ValueFrom: field("metadata.name['x']")}}, wantErr: "field label does not support subscript: metadata.name['x']"},
		{name: "unknown resource container", env: []v1.EnvVar{{Name: "X", ValueFrom: res("nope", "limits.cpu", "")}}, wantErr: "container nope not found"},
		{name: "fileKeyRef", env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k"}}}}, wantErr: "fileKeyRef is not supported"},
		{name: "nil enableServiceLinks", mutate: func(p *v1.Pod) { p.Spec.EnableServiceLinks = nil }, wantErr: "nil pod.spec.enableServiceLinks"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod(v1.Container{Name: "c", Env: c.env, EnvFrom: c.from})
			if c.mutate != nil {
				c.mutate(pod)
			}
			b := c.b
			if b == nil {
				b = newTestBuilder(true)
			}
			_, _, err := envMap(t, b, pod, nil)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("error = %v, want %q", err, c.wantErr)
			}
		})
	}
}

func TestEnvStaticPodNeedsNoServices(t *testing.T) {
	pod := testPod(v1.Container{Name: "c", Env: []v1.EnvVar{{Name: "A", Value: "a"}}})
	pod.Annotations[podsource.ConfigSourceAnnotation] = podsource.File
	got, _, err := envMap(t, newTestBuilder(false), pod, nil)
	if err != nil || got["A"] != "a" {
		t.Errorf("static pod env = %v, %v", got, err)
	}
}

func TestResourceFieldDefaults(t *testing.T) {
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init"}},
		Containers:     []v1.Container{{Name: "app"}},
	}}
	lim := func(container, divisor string) string {
		v, err := resourceFieldValue(&v1.ResourceFieldSelector{ContainerName: container, Resource: "limits.memory", Divisor: resource.MustParse(divisor)}, pod, &pod.Spec.InitContainers[0], alloc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := lim("", "1Gi"); got != "8" {
		t.Errorf("current container's unset limit = %s, want allocatable 8", got)
	}
	if got := lim("app", "1Gi"); got != "8" {
		t.Errorf("app container's unset limit = %s, want allocatable 8", got)
	}
	if got := lim("init", "1Gi"); got != "0" {
		t.Errorf("named init container's unset limit = %s, want 0 as upstream", got)
	}
	pod.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Gi")}}
	if got := lim("app", "1Gi"); got != "2" {
		t.Errorf("with a pod-level limit = %s, want 2", got)
	}
}

func TestPodIPsHostNetwork(t *testing.T) {
	b := New(Config{HostIPs: []string{"fd00::10", "192.168.1.10"}})
	pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: true}}
	if got := b.podIPs(pod, nil); !reflect.DeepEqual(got, []string{"fd00::10", "192.168.1.10"}) {
		t.Errorf("host network podIPs = %v", got)
	}
	if got := b.podIPs(&v1.Pod{}, []string{"10.0.0.1", "10.0.0.2", "fd00::1"}); !reflect.DeepEqual(got, []string{"fd00::1", "10.0.0.1"}) {
		t.Errorf("podIPs = %v, want one per family, the node's (IPv6) first", got)
	}
}
