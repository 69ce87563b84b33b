package podspec

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestDefaultMinimalPod(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
	Default(pod)
	want := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "c", Image: "nginx:1.27",
				ImagePullPolicy:          v1.PullIfNotPresent,
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
			}},
			RestartPolicy:                 v1.RestartPolicyAlways,
			DNSPolicy:                     v1.DNSClusterFirst,
			TerminationGracePeriodSeconds: ptr(int64(30)),
			SchedulerName:                 "default-scheduler",
			SecurityContext:               &v1.PodSecurityContext{},
			EnableServiceLinks:            ptr(true),
		},
	}
	assertEqual(t, pod, want)

	// Default must be idempotent: a second pass changes nothing.
	again := pod.DeepCopy()
	Default(again)
	assertEqual(t, again, pod)
}

func TestDefaultKeepsSetFields(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "kube-system"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "c", Image: "nginx", ImagePullPolicy: v1.PullNever,
				TerminationMessagePath: "/tmp/x", TerminationMessagePolicy: v1.TerminationMessageFallbackToLogsOnError,
			}},
			RestartPolicy:                 v1.RestartPolicyNever,
			DNSPolicy:                     v1.DNSDefault,
			TerminationGracePeriodSeconds: ptr(int64(5)),
			SchedulerName:                 "mine",
			EnableServiceLinks:            ptr(false),
		},
	}
	want := pod.DeepCopy()
	want.Spec.SecurityContext = &v1.PodSecurityContext{}
	Default(pod)
	assertEqual(t, pod, want)
}

func TestDefaultContainers(t *testing.T) {
	tests := []struct {
		name  string
		in    v1.Container
		check func(t *testing.T, c *v1.Container)
	}{
		{
			name: "latest pulls always",
			in:   v1.Container{Image: "nginx"},
			check: func(t *testing.T, c *v1.Container) {
				expect(t, c.ImagePullPolicy, v1.PullAlways)
			},
		},
		{
			name: "port protocol",
			in:   v1.Container{Ports: []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: v1.ProtocolUDP}}},
			check: func(t *testing.T, c *v1.Container) {
				expect(t, c.Ports[0].Protocol, v1.ProtocolTCP)
				expect(t, c.Ports[1].Protocol, v1.ProtocolUDP)
				expect(t, c.Ports[0].HostPort, int32(0))
			},
		},
		{
			name: "probes",
			in: v1.Container{
				LivenessProbe:  &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(8080)}}},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9000}}, PeriodSeconds: 3},
				StartupProbe:   &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}},
			},
			check: func(t *testing.T, c *v1.Container) {
				l := c.LivenessProbe
				expect(t, [4]int32{l.TimeoutSeconds, l.PeriodSeconds, l.SuccessThreshold, l.FailureThreshold}, [4]int32{1, 10, 1, 3})
				expect(t, l.HTTPGet.Path, "/")
				expect(t, l.HTTPGet.Scheme, v1.URISchemeHTTP)
				expect(t, c.ReadinessProbe.PeriodSeconds, int32(3))
				expect(t, *c.ReadinessProbe.GRPC.Service, "")
				expect(t, c.StartupProbe.FailureThreshold, int32(3))
			},
		},
		{
			name: "lifecycle httpGet",
			in: v1.Container{Lifecycle: &v1.Lifecycle{
				PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("http"), Path: "/quit"}},
			}},
			check: func(t *testing.T, c *v1.Container) {
				expect(t, c.Lifecycle.PreStop.HTTPGet.Path, "/quit")
				expect(t, c.Lifecycle.PreStop.HTTPGet.Scheme, v1.URISchemeHTTP)
			},
		},
		{
			name: "env fieldRef apiVersion",
			in: v1.Container{Env: []v1.EnvVar{
				{Name: "A", Value: "x"},
				{Name: "B", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			}},
			check: func(t *testing.T, c *v1.Container) {
				expect(t, c.Env[1].ValueFrom.FieldRef.APIVersion, "v1")
			},
		},
		{
			name: "requests from limits, rounded up to milli",
			in: v1.Container{Resources: v1.ResourceRequirements{
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")},
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("0.0001")},
			}},
			check: func(t *testing.T, c *v1.Container) {
				expect(t, c.Resources.Requests.Cpu().String(), "1m")
				expect(t, c.Resources.Requests.Memory().String(), "1Gi")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, kind := range []string{"init", "app", "ephemeral"} {
				spec := v1.PodSpec{}
				c := tt.in.DeepCopy()
				c.Name = "c"
				switch kind {
				case "init":
					spec.InitContainers = []v1.Container{*c}
				case "app":
					spec.Containers = []v1.Container{*c}
				case "ephemeral":
					spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon(*c)}}
				}
				pod := &v1.Pod{Spec: spec}
				Default(pod)
				var got *v1.Container
				ForEachContainer(&pod.Spec, func(c *v1.Container) { got = c })
				expect(t, got.TerminationMessagePath, "/dev/termination-log")
				if kind == "ephemeral" && tt.name == "requests from limits, rounded up to milli" {
					continue // upstream copies limits to requests only for init and app containers
				}
				t.Run(kind, func(t *testing.T) { tt.check(t, got) })
			}
		})
	}
}

func TestDefaultHostNetworkPorts(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		HostNetwork: true,
		Containers:  []v1.Container{{Name: "c", Ports: []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 81, HostPort: 81}}}},
	}}
	Default(pod)
	expect(t, pod.Spec.Containers[0].Ports[0].HostPort, int32(80))
	expect(t, pod.Spec.Containers[0].Ports[1].HostPort, int32(81))
}

func TestDefaultVolumes(t *testing.T) {
	mode := int32(0o644)
	tests := []struct {
		name string
		in   v1.VolumeSource
		want v1.VolumeSource
	}{
		{
			name: "no source becomes emptyDir",
			in:   v1.VolumeSource{},
			want: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}},
		},
		{
			name: "hostPath type",
			in:   v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}},
			want: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x", Type: ptr(v1.HostPathUnset)}},
		},
		{
			name: "secret mode",
			in:   v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}},
			want: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", DefaultMode: &mode}},
		},
		{
			name: "secret mode kept",
			in:   v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr(int32(0o400))}},
			want: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr(int32(0o400))}},
		},
		{
			name: "configMap mode",
			in:   v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}},
			want: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{DefaultMode: &mode}},
		},
		{
			name: "downwardAPI mode and apiVersion",
			in: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "n", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			}}},
			want: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{DefaultMode: &mode, Items: []v1.DownwardAPIVolumeFile{
				{Path: "n", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}},
			}}},
		},
		{
			name: "projected",
			in: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
			}}},
			want: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3600))}},
			}}},
		},
		{
			name: "image pull policy",
			in:   v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "data:latest"}},
			want: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "data:latest", PullPolicy: v1.PullAlways}},
		},
		{
			name: "rbd",
			in:   v1.VolumeSource{RBD: &v1.RBDVolumeSource{}},
			want: v1.VolumeSource{RBD: &v1.RBDVolumeSource{RBDPool: "rbd", RadosUser: "admin", Keyring: "/etc/ceph/keyring"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "v", VolumeSource: tt.in}}}}
			Default(pod)
			assertEqual(t, &pod.Spec.Volumes[0].VolumeSource, &tt.want)
		})
	}
}

func TestDefaultNil(t *testing.T) {
	Default(nil) // must not panic
}

func expect[T comparable](t *testing.T, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

func assertEqual(t *testing.T, got, want any) {
	t.Helper()
	if !apiequality.Semantic.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("mismatch\ngot:  %s\nwant: %s", g, w)
	}
}

func TestContainer(t *testing.T) {
	spec := &v1.PodSpec{
		InitContainers:      []v1.Container{{Name: "init"}},
		Containers:          []v1.Container{{Name: "app"}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}},
	}
	for _, name := range []string{"init", "app", "debug"} {
		if c := Container(spec, name); c == nil || c.Name != name {
			t.Errorf("Container(%q) = %v", name, c)
		}
	}
	if c := Container(spec, "none"); c != nil {
		t.Errorf("Container(none) = %v", c)
	}
	// It is the spec's own container, not a copy.
	Container(spec, "debug").Image = "busybox"
	if spec.EphemeralContainers[0].Image != "busybox" {
		t.Error("Container returned a copy")
	}
}

func TestIsSidecar(t *testing.T) {
	always, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicy("Never")
	for _, tc := range []struct {
		policy *v1.ContainerRestartPolicy
		want   bool
	}{{nil, false}, {&never, false}, {&always, true}} {
		if got := IsSidecar(&v1.Container{RestartPolicy: tc.policy}); got != tc.want {
			t.Errorf("IsSidecar(restartPolicy %v) = %v, want %v", tc.policy, got, tc.want)
		}
	}
}
