package registry

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// The registry binary comes from `make tools`; these tests run it for real.
func TestPushAndAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	archive := filepath.Join(t.TempDir(), "img.tar")
	if err := BuildImage(ctx, archive, "test/hello:1", "--add", "/bin/busybox:/bin/busybox", "--cmd", "sh"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		users map[string]string
	}{
		{"plain", nil},
		{"htpasswd", map[string]string{"alice": "wonderland"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Start(ctx, Options{Users: tc.users})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Stop() })
			digest, err := r.Push(ctx, archive, "skiff/hello", "1")
			if err != nil {
				t.Fatalf("push: %v\nregistry log:\n%s", err, r.LogTail())
			}
			if digest == "" {
				t.Fatal("push returned no digest")
			}
			get := func(user, pass string) int {
				req, _ := http.NewRequestWithContext(ctx, http.MethodHead, "http://"+r.Host+"/v2/skiff/hello/manifests/1", nil)
				req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
				if user != "" {
					req.SetBasicAuth(user, pass)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if got := resp.Header.Get("Docker-Content-Digest"); resp.StatusCode == 200 && got != digest {
					t.Errorf("manifest digest %q, pushed %q", got, digest)
				}
				return resp.StatusCode
			}
			wantAnon := http.StatusOK
			if tc.users != nil {
				wantAnon = http.StatusUnauthorized
				if code := get("alice", "wonderland"); code != http.StatusOK {
					t.Errorf("with credentials: %d, want 200", code)
				}
				if code := get("alice", "wrong"); code != http.StatusUnauthorized {
					t.Errorf("with a wrong password: %d, want 401", code)
				}
			}
			if code := get("", ""); code != wantAnon {
				t.Errorf("anonymous: %d, want %d", code, wantAnon)
			}
		})
	}
}
