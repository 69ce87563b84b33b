package podruntime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/volume"
)

// Each volumeMount's mountPropagation reaches the runtime as upstream
// translates it; Bidirectional outside a privileged container and an
// unknown mode are refused with an error naming the mount.
func TestContainerMountsPropagation(t *testing.T) {
	mode := func(m v1.MountPropagationMode) *v1.MountPropagationMode { return &m }
	privileged := &v1.SecurityContext{Privileged: ptr.To(true)}
	for _, tc := range []struct {
		name    string
		mode    *v1.MountPropagationMode
		sc      *v1.SecurityContext
		want    runtimeapi.MountPropagation
		wantErr string
	}{
		{name: "unset", want: runtimeapi.MountPropagation_PROPAGATION_PRIVATE},
		{name: "None", mode: mode(v1.MountPropagationNone), want: runtimeapi.MountPropagation_PROPAGATION_PRIVATE},
		{name: "HostToContainer", mode: mode(v1.MountPropagationHostToContainer), want: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{name: "HostToContainer unprivileged is fine", mode: mode(v1.MountPropagationHostToContainer),
			sc: &v1.SecurityContext{Privileged: ptr.To(false)}, want: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{name: "Bidirectional privileged", mode: mode(v1.MountPropagationBidirectional), sc: privileged,
			want: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
		{name: "Bidirectional without a security context", mode: mode(v1.MountPropagationBidirectional),
			wantErr: `mount /data of volume "v": mount propagation Bidirectional is allowed only in privileged containers`},
		{name: "Bidirectional privileged false", mode: mode(v1.MountPropagationBidirectional),
			sc: &v1.SecurityContext{Privileged: ptr.To(false)}, wantErr: "allowed only in privileged containers"},
		{name: "unknown", mode: mode("Sideways"), sc: privileged, wantErr: `invalid mount propagation mode "Sideways"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", SecurityContext: tc.sc,
				VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/data", MountPropagation: tc.mode}}}
			vols := map[string]volume.Mounted{"v": {HostPath: "/var/lib/kubelet/pods/u/volumes/v"}}
			got, err := containerMounts(c, "", vols, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Propagation != tc.want || got[0].HostPath != vols["v"].HostPath {
				t.Errorf("mounts = %+v, want one of propagation %v", got, tc.want)
			}
		})
	}
}
