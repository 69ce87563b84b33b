package payload

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
)

func TestSecret(t *testing.T) {
	secret := &v1.Secret{Data: map[string][]byte{"user": []byte("admin"), "pass": []byte("s3cr3t")}}
	src := func(mut func(*v1.SecretVolumeSource)) *v1.SecretVolumeSource {
		s := &v1.SecretVolumeSource{SecretName: "creds"}
		if mut != nil {
			mut(s)
		}
		return s
	}
	cases := []struct {
		name    string
		source  *v1.SecretVolumeSource
		secret  *v1.Secret
		want    map[string]atomic.File
		wantErr string
	}{
		{
			name:   "all keys with the default mode",
			source: src(nil),
			secret: secret,
			want:   map[string]atomic.File{"user": f("admin", 0o644), "pass": f("s3cr3t", 0o644)},
		},
		{
			name:   "defaultMode",
			source: src(func(s *v1.SecretVolumeSource) { s.DefaultMode = i32(0o400) }),
			secret: secret,
			want:   map[string]atomic.File{"user": f("admin", 0o400), "pass": f("s3cr3t", 0o400)},
		},
		{
			name: "items with paths and modes",
			source: src(func(s *v1.SecretVolumeSource) {
				s.Items = []v1.KeyToPath{{Key: "pass", Path: "db/password", Mode: i32(0o600)}}
			}),
			secret: secret,
			want:   map[string]atomic.File{"db/password": f("s3cr3t", 0o600)},
		},
		{
			name:    "missing key",
			source:  src(func(s *v1.SecretVolumeSource) { s.Items = []v1.KeyToPath{{Key: "token", Path: "t"}} }),
			secret:  secret,
			wantErr: "references non-existent secret key: token",
		},
		{
			name: "missing key, optional",
			source: src(func(s *v1.SecretVolumeSource) {
				s.Optional = yes()
				s.Items = []v1.KeyToPath{{Key: "token", Path: "t"}, {Key: "user", Path: "u"}}
			}),
			secret: secret,
			want:   map[string]atomic.File{"u": f("admin", 0o644)},
		},
		{
			name:    "missing secret",
			source:  src(nil),
			wantErr: `secret "creds" not found`,
		},
		{
			name:   "missing secret, optional",
			source: src(func(s *v1.SecretVolumeSource) { s.Optional = yes() }),
			want:   map[string]atomic.File{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Secret(tc.source, tc.secret)
			if checkErr(t, err, tc.wantErr) {
				checkFiles(t, got, tc.want)
			}
		})
	}
}

func TestSecretNotFoundIsAPIError(t *testing.T) {
	_, err := Secret(&v1.SecretVolumeSource{SecretName: "x"}, nil)
	if !apierrors.IsNotFound(err) || err.Error() != `secret "x" not found` {
		t.Fatalf("err = %v, want upstream's NotFound", err)
	}
}
