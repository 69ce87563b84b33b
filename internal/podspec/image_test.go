package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestDefaultPullPolicy(t *testing.T) {
	tests := []struct {
		image string
		want  v1.PullPolicy
	}{
		{"nginx", v1.PullAlways},
		{"nginx:latest", v1.PullAlways},
		{"localhost:5000/nginx", v1.PullAlways},
		{"nginx:latest@" + testDigest, v1.PullAlways},
		{"nginx:1.27", v1.PullIfNotPresent},
		{"localhost:5000/nginx:1", v1.PullIfNotPresent},
		{"nginx@" + testDigest, v1.PullIfNotPresent},
		{"NOT VALID", v1.PullIfNotPresent},
		{"Nginx", v1.PullIfNotPresent},
		{"nginx:-bad", v1.PullIfNotPresent},
		{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", v1.PullIfNotPresent},
		{"[::1]:5000/a/b", v1.PullAlways},
		{"host:1/nginx:1@" + testDigest, v1.PullIfNotPresent},
		{"", v1.PullIfNotPresent},
	}
	for _, tt := range tests {
		if got := defaultPullPolicy(tt.image); got != tt.want {
			t.Errorf("defaultPullPolicy(%q) = %s, want %s", tt.image, got, tt.want)
		}
	}
}
