package payload

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
)

func TestFSUser(t *testing.T) {
	sc := func(uid *int64) *v1.SecurityContext { return &v1.SecurityContext{RunAsUser: uid} }
	cases := []struct {
		name string
		pod  v1.PodSpec
		want *int64
	}{
		{name: "no containers", pod: v1.PodSpec{}},
		{name: "no runAsUser", pod: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}},
		{
			name: "pod level",
			pod: v1.PodSpec{
				SecurityContext: &v1.PodSecurityContext{RunAsUser: i64(1000)},
				Containers:      []v1.Container{{Name: "a"}, {Name: "b"}},
			},
			want: i64(1000),
		},
		{
			name: "containers agree",
			pod:  v1.PodSpec{Containers: []v1.Container{{Name: "a", SecurityContext: sc(i64(5))}, {Name: "b", SecurityContext: sc(i64(5))}}},
			want: i64(5),
		},
		{
			name: "container overrides pod to the same user",
			pod: v1.PodSpec{
				SecurityContext: &v1.PodSecurityContext{RunAsUser: i64(7)},
				Containers:      []v1.Container{{Name: "a", SecurityContext: sc(i64(7))}, {Name: "b"}},
			},
			want: i64(7),
		},
		{
			name: "containers differ",
			pod: v1.PodSpec{
				SecurityContext: &v1.PodSecurityContext{RunAsUser: i64(7)},
				Containers:      []v1.Container{{Name: "a", SecurityContext: sc(i64(8))}, {Name: "b"}},
			},
		},
		{
			name: "one container unset",
			pod:  v1.PodSpec{Containers: []v1.Container{{Name: "a", SecurityContext: sc(i64(5))}, {Name: "b"}}},
		},
		{
			name: "init container differs",
			pod: v1.PodSpec{
				SecurityContext: &v1.PodSecurityContext{RunAsUser: i64(7)},
				InitContainers:  []v1.Container{{Name: "i", SecurityContext: sc(i64(0))}},
				Containers:      []v1.Container{{Name: "a"}},
			},
		},
		{
			name: "ephemeral container differs",
			pod: v1.PodSpec{
				SecurityContext: &v1.PodSecurityContext{RunAsUser: i64(7)},
				Containers:      []v1.Container{{Name: "a"}},
				EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
					Name: "debug", SecurityContext: sc(i64(0)),
				}}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := FSUser(&v1.Pod{Spec: tc.pod})
			if !sameOwner(got, tc.want) {
				t.Errorf("FSUser = %v, want %v", deref(got), deref(tc.want))
			}
		})
	}
}

func TestFSGroupAndSetFSGroup(t *testing.T) {
	pod := &v1.Pod{}
	if FSGroup(pod) != nil {
		t.Fatal("FSGroup of a pod without one")
	}
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: i64(2000)}
	gid := FSGroup(pod)
	if gid == nil || *gid != 2000 {
		t.Fatalf("FSGroup = %v", deref(gid))
	}

	files := map[string]atomic.File{"a": f("1", 0o644), "token": {Data: []byte("t"), Mode: 0o600, FsUser: i64(5)}}
	SetFSGroup(files, gid)
	checkFiles(t, files, map[string]atomic.File{
		"a":     {Data: []byte("1"), Mode: 0o644, FsGroup: i64(2000)},
		"token": {Data: []byte("t"), Mode: 0o600, FsUser: i64(5), FsGroup: i64(2000)},
	})
	*gid = 1 // the files keep their own copy
	if *files["a"].FsGroup != 2000 {
		t.Error("SetFSGroup shares the caller's pointer")
	}
	if got := SetFSGroup(map[string]atomic.File{"a": f("1", 0o644)}, nil); got["a"].FsGroup != nil {
		t.Error("SetFSGroup(nil) set a group")
	}
}
