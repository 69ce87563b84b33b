package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseImageRef(t *testing.T) {
	tests := []struct {
		in      string
		want    imageRef
		wantErr bool
	}{
		{in: "nginx", want: imageRef{Path: "nginx"}},
		{in: "nginx:1.27", want: imageRef{Path: "nginx", Tag: "1.27"}},
		{in: "library/nginx:latest", want: imageRef{Path: "library/nginx", Tag: "latest"}},
		{in: "registry.k8s.io/pause:3.10", want: imageRef{Domain: "registry.k8s.io", Path: "pause", Tag: "3.10"}},
		{in: "localhost:5000/app", want: imageRef{Domain: "localhost:5000", Path: "app"}},
		{in: "localhost/app:v1", want: imageRef{Domain: "localhost", Path: "app", Tag: "v1"}},
		{in: "[::1]:5000/a/b:c", want: imageRef{Domain: "[::1]:5000", Path: "a/b", Tag: "c"}},
		{in: "nginx@" + testDigest, want: imageRef{Path: "nginx", Digest: testDigest}},
		{in: "host:1/nginx:1@" + testDigest, want: imageRef{Domain: "host:1", Path: "nginx", Tag: "1", Digest: testDigest}},
		{in: "my_app__x-y/sub--dir.v2", want: imageRef{Path: "my_app__x-y/sub--dir.v2"}},
		{in: "my_app.io/x", wantErr: true}, // has a dot, so it is a registry, and hosts have no "_"
		{in: "", wantErr: true},
		{in: "Nginx", wantErr: true},
		{in: "nginx:", wantErr: true},
		{in: "nginx:-bad", wantErr: true},
		{in: "nginx@sha256:short", wantErr: true},
		{in: "nginx:a:b", wantErr: true},
		{in: "a//b", wantErr: true},
		{in: "-a/b", wantErr: true},
		{in: "bad_host.com:x/app", wantErr: true},
		{in: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", wantErr: true},
		{in: " nginx", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseImageRef(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseImageRef(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseImageRef(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

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
		{"", v1.PullIfNotPresent},
	}
	for _, tt := range tests {
		if got := defaultPullPolicy(tt.image); got != tt.want {
			t.Errorf("defaultPullPolicy(%q) = %s, want %s", tt.image, got, tt.want)
		}
	}
}
