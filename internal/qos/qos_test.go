package qos

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func res(req, lim map[string]string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	for k, v := range req {
		r.Requests[v1.ResourceName(k)] = resource.MustParse(v)
	}
	for k, v := range lim {
		r.Limits[v1.ResourceName(k)] = resource.MustParse(v)
	}
	return r
}

func TestClass(t *testing.T) {
	full := map[string]string{"cpu": "100m", "memory": "64Mi"}
	cases := []struct {
		name string
		rs   []v1.ResourceRequirements
		want v1.PodQOSClass
	}{
		{"nothing", []v1.ResourceRequirements{{}}, v1.PodQOSBestEffort},
		{"limits equal requests", []v1.ResourceRequirements{res(full, full)}, v1.PodQOSGuaranteed},
		// Requests are defaulted from limits by the API before this runs;
		// undefaulted, limits alone are not Guaranteed (as upstream).
		{"limits only, undefaulted", []v1.ResourceRequirements{res(nil, full)}, v1.PodQOSBurstable},
		{"cpu limit only", []v1.ResourceRequirements{res(nil, map[string]string{"cpu": "1"})}, v1.PodQOSBurstable},
		{"requests below limits", []v1.ResourceRequirements{res(map[string]string{"cpu": "50m", "memory": "64Mi"}, full)}, v1.PodQOSBurstable},
		{"one guaranteed, one best effort", []v1.ResourceRequirements{res(full, full), {}}, v1.PodQOSBurstable},
		{"requests only", []v1.ResourceRequirements{res(full, nil)}, v1.PodQOSBurstable},
		{"ephemeral storage is ignored", []v1.ResourceRequirements{res(map[string]string{"ephemeral-storage": "1Gi"}, nil)}, v1.PodQOSBestEffort},
	}
	for _, c := range cases {
		pod := &v1.Pod{}
		for i, r := range c.rs {
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
		}
		if got := Class(pod); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}
