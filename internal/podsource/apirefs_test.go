package podsource

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A static pod that refers to an API object is refused with upstream's
// words; one that refers to none (host paths, emptyDirs, the downward
// API, also projected) is not.
func TestMakeStaticRefusesAPIReferences(t *testing.T) {
	vol := func(name string, s v1.VolumeSource) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: s}) }
	}
	projected := func(s v1.VolumeProjection) v1.VolumeSource {
		return v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{s}}}
	}
	initEnv := func(e v1.EnvVar) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "busybox", Env: []v1.EnvVar{e}}}
		}
	}
	ref := v1.LocalObjectReference{Name: "x"}
	for name, tt := range map[string]struct {
		mutate func(*v1.Pod)
		want   string // "" when allowed
	}{
		"service account":  {func(p *v1.Pod) { p.Spec.ServiceAccountName = "sa" }, "serviceaccounts"},
		"pull secret":      {func(p *v1.Pod) { p.Spec.ImagePullSecrets = []v1.LocalObjectReference{ref} }, "secrets"},
		"secret volume":    {vol("s", v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}}), "secrets"},
		"secret env, init": {initEnv(v1.EnvVar{Name: "A", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref, Key: "k"}}}), "secrets"},
		"configMap envFrom": {func(p *v1.Pod) {
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref}}}
		}, "configmaps"},
		"projected configMap": {vol("p", projected(v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: ref}})), "configmaps"},
		"token":               {vol("t", projected(v1.VolumeProjection{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "t"}})), "serviceaccounts (via projected volumes)"},
		"claim":               {vol("c", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "x"}}), "persistentvolumeclaims"},
		"csi":                 {vol("c", v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d"}}), "csidrivers"},
		"downward, projected": {vol("d", projected(v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{}})), ""},
		"host path and emptyDir": {func(p *v1.Pod) {
			vol("h", v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc"}})(p)
			vol("e", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}})(p)
		}, ""},
		"plain env": {initEnv(v1.EnvVar{Name: "A", Value: "b"}), ""},
	} {
		t.Run(name, func(t *testing.T) {
			pod := staticTestPod()
			tt.mutate(pod)
			err := MakeStatic(pod, File, "n", "u")
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), "static pods may not reference "+tt.want)):
				t.Fatalf("error %v, want it to say the pod may not reference %s", err, tt.want)
			}
		})
	}
}
