package payload

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
)

func TestConfigMap(t *testing.T) {
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"},
		Data:       map[string]string{"a": "alpha", "b": "beta"},
		BinaryData: map[string][]byte{"bin": {0, 1, 2}},
	}
	src := func(mut func(*v1.ConfigMapVolumeSource)) *v1.ConfigMapVolumeSource {
		s := &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}
		if mut != nil {
			mut(s)
		}
		return s
	}
	cases := []struct {
		name    string
		source  *v1.ConfigMapVolumeSource
		cm      *v1.ConfigMap
		want    map[string]atomic.File
		wantErr string
	}{
		{
			name:   "all keys with the default mode",
			source: src(nil),
			cm:     cm,
			want:   map[string]atomic.File{"a": f("alpha", 0o644), "b": f("beta", 0o644), "bin": f("\x00\x01\x02", 0o644)},
		},
		{
			name:   "defaultMode",
			source: src(func(s *v1.ConfigMapVolumeSource) { s.DefaultMode = i32(0o400) }),
			cm:     cm,
			want:   map[string]atomic.File{"a": f("alpha", 0o400), "b": f("beta", 0o400), "bin": f("\x00\x01\x02", 0o400)},
		},
		{
			name: "items with paths and modes",
			source: src(func(s *v1.ConfigMapVolumeSource) {
				s.DefaultMode = i32(0o440)
				s.Items = []v1.KeyToPath{
					{Key: "a", Path: "dir/a.txt", Mode: i32(0o600)},
					{Key: "bin", Path: "bin.dat"},
				}
			}),
			cm:   cm,
			want: map[string]atomic.File{"dir/a.txt": f("alpha", 0o600), "bin.dat": f("\x00\x01\x02", 0o440)},
		},
		{
			name: "missing key",
			source: src(func(s *v1.ConfigMapVolumeSource) {
				s.Items = []v1.KeyToPath{{Key: "a", Path: "a"}, {Key: "nope", Path: "n"}}
			}),
			cm:      cm,
			wantErr: "configmap references non-existent config key: nope",
		},
		{
			name: "missing key, optional",
			source: src(func(s *v1.ConfigMapVolumeSource) {
				s.Optional = yes()
				s.Items = []v1.KeyToPath{{Key: "a", Path: "a"}, {Key: "nope", Path: "n"}}
			}),
			cm:   cm,
			want: map[string]atomic.File{"a": f("alpha", 0o644)},
		},
		{
			name:    "missing configmap",
			source:  src(nil),
			wantErr: `configmap "cfg" not found`,
		},
		{
			name:    "missing configmap, optional false",
			source:  src(func(s *v1.ConfigMapVolumeSource) { s.Optional = no() }),
			wantErr: `configmap "cfg" not found`,
		},
		{
			name:   "missing configmap, optional",
			source: src(func(s *v1.ConfigMapVolumeSource) { s.Optional = yes() }),
			want:   map[string]atomic.File{},
		},
		{
			name:   "missing configmap, optional, with items",
			source: src(func(s *v1.ConfigMapVolumeSource) { s.Optional = yes(); s.Items = []v1.KeyToPath{{Key: "a", Path: "a"}} }),
			want:   map[string]atomic.File{},
		},
		{
			name:   "empty configmap",
			source: src(nil),
			cm:     &v1.ConfigMap{},
			want:   map[string]atomic.File{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigMap(tc.source, tc.cm)
			if checkErr(t, err, tc.wantErr) {
				checkFiles(t, got, tc.want)
			}
		})
	}
}

func TestConfigMapNotFoundIsAPIError(t *testing.T) {
	_, err := ConfigMap(&v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}}, nil)
	if !apierrors.IsNotFound(err) || err.Error() != `configmap "x" not found` {
		t.Fatalf("err = %v, want upstream's NotFound", err)
	}
}
