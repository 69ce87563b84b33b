package credentialprovider

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/images/keyring"
)

// writePlugin writes an executable shell script plugin into dir.
func writePlugin(t *testing.T, dir, name, script string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const okConfig = `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: %s
  matchImages: ["*.registry.example", "127.0.0.1:5000"]
  defaultCacheDuration: 10m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: ["--mode", "test"]
  env:
  - {name: PLUGIN_GREETING, value: hello}
`

// A real plugin run: request on stdin, args and env passed, response on
// stdout turned into credentials for the image.
func TestPluginExec(t *testing.T) {
	bin := t.TempDir()
	out := filepath.Join(t.TempDir(), "request")
	writePlugin(t, bin, "creds", `cat > `+out+`
echo "$@ $PLUGIN_GREETING" >> `+out+`
cat <<EOF
{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse",
 "cacheKeyType":"Registry","auth":{"127.0.0.1:5000":{"username":"u","password":"p"}}}
EOF
`)
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfgPath, strings.Replace(okConfig, "%s", "creds", 1))
	ps, err := New(cfgPath, bin)
	if err != nil {
		t.Fatal(err)
	}
	got := ps.Credentials(context.Background(), "127.0.0.1:5000/team/app")
	want := []keyring.Credential{{Username: "u", Password: "p", Source: "credential provider creds"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("credentials = %v, want %v", got, want)
	}
	req, _ := os.ReadFile(out)
	for _, s := range []string{`"kind":"CredentialProviderRequest"`, `"image":"127.0.0.1:5000/team/app"`, "--mode test hello"} {
		if !strings.Contains(string(req), s) {
			t.Errorf("the plugin got %q, want it to contain %q", req, s)
		}
	}
	if got := ps.Credentials(context.Background(), "docker.io/library/busybox"); got != nil {
		t.Errorf("an image no matchImages covers got %v", got)
	}
}

func TestPluginFailureGivesNoCredentials(t *testing.T) {
	bin := t.TempDir()
	writePlugin(t, bin, "bad", "echo nope >&2; exit 3\n")
	writePlugin(t, bin, "wrongkind", `echo '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"Other"}'`+"\n")
	for _, name := range []string{"bad", "wrongkind"} {
		cfgPath := filepath.Join(t.TempDir(), "config.yaml")
		writeFile(t, cfgPath, strings.Replace(okConfig, "%s", name, 1))
		ps, err := New(cfgPath, bin)
		if err != nil {
			t.Fatal(err)
		}
		if got := ps.Credentials(context.Background(), "127.0.0.1:5000/app"); got != nil {
			t.Errorf("%s: credentials %v from a failed plugin", name, got)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	bin := t.TempDir()
	writePlugin(t, bin, "ok", "exit 0\n")
	writeFile(t, filepath.Join(bin, "notexec"), "x")
	tests := []struct {
		name, provider, want string
	}{
		{"missing plugin", `{name: absent, matchImages: [a.example], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1}`, "plugin executable"},
		{"not executable", `{name: notexec, matchImages: [a.example], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1}`, "not an executable"},
		{"path in name", `{name: ../ok, matchImages: [a.example], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1}`, "must not contain a path"},
		{"no matchImages", `{name: ok, defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1}`, "matchImages: at least 1 item"},
		{"bad glob", `{name: ok, matchImages: ["[.example"], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1}`, "matchImages"},
		{"no cache duration", `{name: ok, matchImages: [a.example], apiVersion: credentialprovider.kubelet.k8s.io/v1}`, "defaultCacheDuration is required"},
		{"old protocol", `{name: ok, matchImages: [a.example], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1alpha1}`, `apiVersion "credentialprovider.kubelet.k8s.io/v1alpha1" is not supported`},
		{"token attributes", `{name: ok, matchImages: [a.example], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1, tokenAttributes: {serviceAccountTokenAudience: x, cacheType: Token, requireServiceAccount: true}}`, "tokenAttributes"},
		{"unknown field", `{name: ok, matchImages: [a.example], defaultCacheDuration: 1m, apiVersion: credentialprovider.kubelet.k8s.io/v1, bogus: 1}`, "bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgPath := filepath.Join(t.TempDir(), "c.yaml")
			writeFile(t, cfgPath, "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- "+tt.provider+"\n")
			_, err := New(cfgPath, bin)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	writeFile(t, cfgPath, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: CredentialProviderConfig\nproviders: []\n")
	if _, err := New(cfgPath, bin); err == nil || !strings.Contains(err.Error(), "kubelet.config.k8s.io/v1beta1") {
		t.Errorf("an unsupported config apiVersion: %v", err)
	}
}

// A directory's files are merged in lexical order; other files are ignored.
func TestConfigDirectory(t *testing.T) {
	bin, dir := t.TempDir(), t.TempDir()
	writePlugin(t, bin, "a", "exit 0\n")
	writePlugin(t, bin, "b", "exit 0\n")
	writeFile(t, filepath.Join(dir, "20-b.yaml"), strings.Replace(okConfig, "%s", "b", 1))
	writeFile(t, filepath.Join(dir, "10-a.json"), `{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[{"name":"a","matchImages":["a.example"],"defaultCacheDuration":"1m","apiVersion":"credentialprovider.kubelet.k8s.io/v1"}]}`)
	writeFile(t, filepath.Join(dir, "README"), "not a config")
	ps, err := New(dir, bin)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range ps.plugins {
		names = append(names, p.cfg.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b"}) {
		t.Errorf("plugins %v, want [a b]", names)
	}
	writeFile(t, filepath.Join(dir, "30-dup.yaml"), strings.Replace(okConfig, "%s", "a", 1))
	if _, err := New(dir, bin); err == nil || !strings.Contains(err.Error(), `duplicate name "a"`) {
		t.Errorf("a duplicate plugin name: %v", err)
	}
}

// fakePlugin counts runs and answers with the given cache settings.
func fakePlugin(t *testing.T, keyType credentialproviderv1.PluginCacheKeyType, d *time.Duration) (*plugin, *testclock.FakeClock, *atomic.Int32) {
	clock := testclock.NewFakeClock(time.Now())
	p := newPlugin(kubeletconfigv1.CredentialProvider{
		Name: "fake", MatchImages: []string{"*.example"},
		DefaultCacheDuration: &metav1.Duration{Duration: 5 * time.Minute},
	}, t.TempDir(), clock)
	runs := &atomic.Int32{}
	p.run = func(_ context.Context, image string) (*credentialproviderv1.CredentialProviderResponse, error) {
		runs.Add(1)
		time.Sleep(10 * time.Millisecond) // lets concurrent asks overlap
		r := &credentialproviderv1.CredentialProviderResponse{CacheKeyType: keyType,
			Auth: map[string]credentialproviderv1.AuthConfig{"*.example": {Username: "u", Password: "p"}}}
		if d != nil {
			r.CacheDuration = &metav1.Duration{Duration: *d}
		}
		return r, nil
	}
	return p, clock, runs
}

func TestPluginCache(t *testing.T) {
	ctx := context.Background()
	minute, zero := time.Minute, time.Duration(0)
	tests := []struct {
		name    string
		keyType credentialproviderv1.PluginCacheKeyType
		dur     *time.Duration
		// images asked in order, and the runs wanted after each.
		images   []string
		wantRuns []int32
		// after advancing the clock by advance, asking images[0] again runs
		// the plugin (expired) or not.
		advance        time.Duration
		wantRunExpired bool
	}{
		{"image key", credentialproviderv1.ImagePluginCacheKeyType, nil,
			[]string{"r.example/a", "r.example/a", "r.example/b"}, []int32{1, 1, 2}, 4 * time.Minute, false},
		{"registry key", credentialproviderv1.RegistryPluginCacheKeyType, nil,
			[]string{"r.example/a", "r.example/b", "s.example/a"}, []int32{1, 1, 2}, 5 * time.Minute, true},
		{"global key", credentialproviderv1.GlobalPluginCacheKeyType, &minute,
			[]string{"r.example/a", "s.example/b"}, []int32{1, 1}, 61 * time.Second, true},
		{"zero duration: not cached", credentialproviderv1.ImagePluginCacheKeyType, &zero,
			[]string{"r.example/a", "r.example/a"}, []int32{1, 2}, 0, true},
		{"invalid key type: not cached", "Bogus", nil,
			[]string{"r.example/a", "r.example/a"}, []int32{1, 2}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, clock, runs := fakePlugin(t, tt.keyType, tt.dur)
			for i, img := range tt.images {
				if got := p.credentials(ctx, img); len(got) != 1 || got[0].Username != "u" {
					t.Fatalf("%s: credentials %v", img, got)
				}
				if runs.Load() != tt.wantRuns[i] {
					t.Fatalf("after %s: %d runs, want %d", img, runs.Load(), tt.wantRuns[i])
				}
			}
			before := runs.Load()
			clock.Step(tt.advance)
			p.credentials(ctx, tt.images[0])
			if ran := runs.Load() > before; ran != tt.wantRunExpired {
				t.Errorf("after %v: plugin ran = %v, want %v", tt.advance, ran, tt.wantRunExpired)
			}
		})
	}
}

// Concurrent pulls of one image run the plugin once.
func TestPluginConcurrentAsksShareOneRun(t *testing.T) {
	p, _, runs := fakePlugin(t, credentialproviderv1.ImagePluginCacheKeyType, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.credentials(context.Background(), "r.example/a")
		}()
	}
	wg.Wait()
	if runs.Load() != 1 {
		t.Errorf("%d runs for 8 concurrent asks, want 1", runs.Load())
	}
}
