package podspec

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// validPod returns a defaulted pod that passes validation; each case below
// breaks one thing.
func validPod() *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "kube-system"},
		Spec: v1.PodSpec{
			NodeName: "node1",
			Volumes: []v1.Volume{
				{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "etc", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc/app"}}},
			},
			InitContainers: []v1.Container{
				{Name: "setup", Image: "busybox:1.36", Command: []string{"true"}},
				{Name: "proxy", Image: "envoy:1", RestartPolicy: ptr(v1.ContainerRestartPolicyAlways),
					ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(15000)}}}},
			},
			Containers: []v1.Container{{
				Name:  "app",
				Image: "registry.example.com/app:v1",
				Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env: []v1.EnvVar{
					{Name: "A", Value: "1"},
					{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "TIER", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['tier']"}}},
				},
				VolumeMounts: []v1.VolumeMount{
					{Name: "data", MountPath: "/data", SubPath: "sub/dir"},
					{Name: "etc", MountPath: "/etc/app", ReadOnly: true},
				},
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
					Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("64Mi")},
				},
				LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("http")}}},
			}},
			Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}},
		},
	}
	Default(pod)
	return pod
}

func TestValidateValidPod(t *testing.T) {
	if errs := Validate(validPod()); len(errs) != 0 {
		t.Fatalf("valid pod rejected: %v", errs.ToAggregate())
	}
}

func TestValidateMessage(t *testing.T) {
	pod := validPod()
	pod.Spec.Containers[0].Image = ""
	errs := Validate(pod)
	if len(errs) != 1 || errs[0].Error() != "spec.containers[0].image: Required value" {
		t.Fatalf("got %v, want exactly spec.containers[0].image: Required value", errs.ToAggregate())
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *v1.Pod)
		want   []string // "field: type" of each expected error
	}{
		{"name not a subdomain", func(p *v1.Pod) { p.Name = "Web_1" }, []string{"metadata.name: Invalid value"}},
		{"name missing", func(p *v1.Pod) { p.Name = "" }, []string{"metadata.name: Required value"}},
		{"namespace not a label", func(p *v1.Pod) { p.Namespace = "a.b" }, []string{"metadata.namespace: Invalid value"}},
		{"bad label", func(p *v1.Pod) { p.Labels = map[string]string{"a": "-x"} }, []string{"metadata.labels: Invalid value"}},
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil }, []string{"spec.containers: Required value"}},
		{"container name duplicate across init and app", func(p *v1.Pod) { p.Spec.Containers[0].Name = "setup" },
			[]string{"spec.containers[0].name: Duplicate value"}},
		{"container name not a label", func(p *v1.Pod) { p.Spec.Containers[0].Name = "App" },
			[]string{"spec.containers[0].name: Invalid value"}},
		{"container name missing", func(p *v1.Pod) { p.Spec.InitContainers[0].Name = "" },
			[]string{"spec.initContainers[0].name: Required value"}},
		{"image whitespace", func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx " },
			[]string{"spec.containers[0].image: Invalid value"}},
		{"pull policy", func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" },
			[]string{"spec.containers[0].imagePullPolicy: Unsupported value"}},
		{"restart policy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" },
			[]string{"spec.restartPolicy: Unsupported value"}},
		{"restart policy missing", func(p *v1.Pod) { p.Spec.RestartPolicy = "" },
			[]string{"spec.restartPolicy: Required value"}},
		{"init container restart policy Never", func(p *v1.Pod) { p.Spec.InitContainers[0].RestartPolicy = ptr(v1.ContainerRestartPolicyNever) },
			[]string{"spec.initContainers[0].restartPolicy: Unsupported value"}},
		{"app container restart policy", func(p *v1.Pod) { p.Spec.Containers[0].RestartPolicy = ptr(v1.ContainerRestartPolicyAlways) },
			[]string{"spec.containers[0].restartPolicy: Forbidden"}},
		{"probe on plain init container", func(p *v1.Pod) {
			p.Spec.InitContainers[0].ReadinessProbe = p.Spec.InitContainers[1].ReadinessProbe
		}, []string{"spec.initContainers[0].readinessProbe: Forbidden"}},
		{"volume name duplicate", func(p *v1.Pod) { p.Spec.Volumes[1].Name = "data" },
			[]string{"spec.volumes[1].name: Duplicate value", "spec.containers[0].volumeMounts[1].name: Not found"}},
		{"volume name invalid", func(p *v1.Pod) {
			p.Spec.Volumes[1].Name = "Etc"
			p.Spec.Containers[0].VolumeMounts[1].Name = "Etc"
		}, []string{"spec.volumes[1].name: Invalid value"}},
		{"volume without source", func(p *v1.Pod) { p.Spec.Volumes[0].EmptyDir = nil },
			[]string{"spec.volumes[0]: Required value"}},
		{"volume with two sources", func(p *v1.Pod) { p.Spec.Volumes[0].Secret = &v1.SecretVolumeSource{SecretName: "s"} },
			[]string{"spec.volumes[0].secret: Forbidden"}},
		{"hostPath relative", func(p *v1.Pod) { p.Spec.Volumes[1].HostPath.Path = "etc" },
			[]string{"spec.volumes[1].hostPath.path: Invalid value"}},
		{"secret mode too large", func(p *v1.Pod) {
			p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr(int32(0o1777))}}
		}, []string{"spec.volumes[0].secret.defaultMode: Invalid value"}},
		{"mount of unknown volume", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].Name = "nope" },
			[]string{"spec.containers[0].volumeMounts[0].name: Not found"}},
		{"mount path relative", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "data" },
			[]string{"spec.containers[0].volumeMounts[0].mountPath: Invalid value"}},
		{"mount path missing", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "" },
			[]string{"spec.containers[0].volumeMounts[0].mountPath: Required value"}},
		{"mount path duplicate", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[1].MountPath = "/data/" },
			[]string{"spec.containers[0].volumeMounts[1].mountPath: Invalid value"}},
		{"subPath absolute", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "/x" },
			[]string{"spec.containers[0].volumeMounts[0].subPath: Invalid value"}},
		{"subPath climbs", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "a/../../b" },
			[]string{"spec.containers[0].volumeMounts[0].subPath: Invalid value"}},
		{"subPath with dots in a name is fine", func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "a/..b/c.." }, nil},
		{"bidirectional needs privileged", func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts[0].MountPropagation = ptr(v1.MountPropagationBidirectional)
		}, []string{"spec.containers[0].volumeMounts[0].mountPropagation: Forbidden"}},
		{"port out of range", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 70000 },
			[]string{"spec.containers[0].ports[0].containerPort: Invalid value"}},
		{"port missing", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 0 },
			[]string{"spec.containers[0].ports[0].containerPort: Required value"}},
		{"host port out of range", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = -1 },
			[]string{"spec.containers[0].ports[0].hostPort: Invalid value"}},
		{"port protocol", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "ICMP" },
			[]string{"spec.containers[0].ports[0].protocol: Unsupported value"}},
		{"port name duplicate", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, v1.ContainerPort{Name: "http", ContainerPort: 81, Protocol: v1.ProtocolTCP})
		}, []string{"spec.containers[0].ports[1].name: Duplicate value"}},
		{"hostNetwork port mismatch", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports[0].HostPort = 9090
		}, []string{"spec.containers[0].ports[0].hostPort: Invalid value"}},
		{"env name with =", func(p *v1.Pod) { p.Spec.Containers[0].Env[0].Name = "A=B" },
			[]string{"spec.containers[0].env[0].name: Invalid value"}},
		{"env name relaxed", func(p *v1.Pod) { p.Spec.Containers[0].Env[0].Name = "1-a b" }, nil},
		{"env value and valueFrom", func(p *v1.Pod) { p.Spec.Containers[0].Env[1].Value = "x" },
			[]string{"spec.containers[0].env[1].valueFrom: Invalid value"}},
		{"env fieldPath unsupported", func(p *v1.Pod) { p.Spec.Containers[0].Env[1].ValueFrom.FieldRef.FieldPath = "spec.foo" },
			[]string{"spec.containers[0].env[1].valueFrom.fieldRef.fieldPath: Unsupported value"}},
		{"env secret key missing", func(p *v1.Pod) {
			p.Spec.Containers[0].Env[1].ValueFrom = &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}
		}, []string{"spec.containers[0].env[1].valueFrom.secretKeyRef.key: Required value"}},
		{"env valueFrom empty", func(p *v1.Pod) { p.Spec.Containers[0].Env[1].ValueFrom = &v1.EnvVarSource{} },
			[]string{"spec.containers[0].env[1].valueFrom: Invalid value"}},
		{"request above limit", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2") },
			[]string{"spec.containers[0].resources.requests[cpu]: Invalid value"}},
		{"negative quantity", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = resource.MustParse("-1") },
			[]string{"spec.containers[0].resources.requests[memory]: Invalid value"}},
		{"probe without handler", func(p *v1.Pod) { p.Spec.Containers[0].LivenessProbe.HTTPGet = nil },
			[]string{"spec.containers[0].livenessProbe: Required value"}},
		{"probe with two handlers", func(p *v1.Pod) {
			p.Spec.Containers[0].LivenessProbe.Exec = &v1.ExecAction{Command: []string{"true"}}
		}, []string{"spec.containers[0].livenessProbe.httpGet: Forbidden"}},
		{"liveness success threshold", func(p *v1.Pod) { p.Spec.Containers[0].LivenessProbe.SuccessThreshold = 2 },
			[]string{"spec.containers[0].livenessProbe.successThreshold: Invalid value"}},
		{"probe negative period", func(p *v1.Pod) { p.Spec.Containers[0].LivenessProbe.PeriodSeconds = -1 },
			[]string{"spec.containers[0].livenessProbe.periodSeconds: Invalid value"}},
		{"probe bad port name", func(p *v1.Pod) { p.Spec.Containers[0].LivenessProbe.HTTPGet.Port = intstr.FromString("Not_A_Port") },
			[]string{"spec.containers[0].livenessProbe.httpGet.port: Invalid value"}},
		{"dnsPolicy None without config", func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone },
			[]string{"spec.dnsConfig: Required value"}},
		{"dns nameserver not an IP", func(p *v1.Pod) { p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"dns"}} },
			[]string{"spec.dnsConfig.nameservers[0]: Invalid value"}},
		{"toleration Exists with value", func(p *v1.Pod) { p.Spec.Tolerations[0].Value = "x" },
			[]string{"spec.tolerations[0].value: Invalid value"}},
		{"negative grace period", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(-1)) },
			[]string{"spec.terminationGracePeriodSeconds: Invalid value"}},
		{"ephemeral containers", func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
		}, []string{"spec.ephemeralContainers: Forbidden"}},
		{"node name invalid", func(p *v1.Pod) { p.Spec.NodeName = "Node_1" },
			[]string{"spec.nodeName: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := validPod()
			tt.mutate(pod)
			var got []string
			for _, e := range Validate(pod) {
				got = append(got, e.Field+": "+e.Type.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("errors:\n got  %q\n want %q\n (%v)", got, tt.want, Validate(pod).ToAggregate())
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	if errs := Validate(nil); len(errs) == 0 {
		t.Fatal("nil pod accepted")
	}
}
