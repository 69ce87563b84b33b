//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pluginCacheDuration is what the test's plugin answers as its
// response's cacheDuration: long enough for two pods started together to
// pull within it, short enough to wait out.
const pluginCacheDuration = 45 * time.Second

// Pods pull from an htpasswd registry with credentials from a credential
// provider plugin (an executable the test installs; no pull secrets), and
// the plugin runs once per cache duration, not once per pull.
func TestCredentialProviderPlugin(t *testing.T) {
	r := testRegistry(t, true, "e2e/busybox:plugin")
	dir := t.TempDir()
	binDir := filepath.Join(dir, "plugins")
	must(t, os.MkdirAll(binDir, 0o755))
	calls := filepath.Join(dir, "calls")
	// One line per run: the request it read.
	must(t, os.WriteFile(filepath.Join(binDir, "e2e-registry-login"), []byte(fmt.Sprintf(`#!/bin/sh
req=$(cat)
echo "$req $*" >> %s
cat <<EOF
{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderResponse",
 "cacheKeyType": "Registry", "cacheDuration": "%s",
 "auth": {"%s": {"username": "$REG_USER", "password": "%s"}}}
EOF
`, calls, pluginCacheDuration, r.Host, regPass)), 0o755))
	config := filepath.Join(dir, "credential-providers.yaml")
	must(t, os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: e2e-registry-login
  matchImages: [%q]
  defaultCacheDuration: 1h
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: [--for, e2e]
  env:
  - {name: REG_USER, value: %s}
`, r.Host, regUser)), 0o644))

	n := newPrivateNode(t)
	n.start("--image-credential-provider-config", config, "--image-credential-provider-bin-dir", binDir)
	image := r.Host + "/e2e/busybox:plugin"
	pod := func(name string) string {
		return strings.Replace(staticPod(name, sleeper, ""), "imagePullPolicy: Never", "imagePullPolicy: Always", 1)
	}
	// Two pods at once: two pulls.
	for _, name := range []string{"plugin-a", "plugin-b"} {
		n.writeManifest(name+".yaml", strings.Replace(pod(name), busybox, image, 1))
	}
	n.waitRunning("plugin-a-"+nodeName, 90*time.Second)
	n.waitRunning("plugin-b-"+nodeName, 90*time.Second)
	lines := pluginCalls(t, calls)
	if len(lines) != 1 {
		t.Fatalf("the plugin ran %d times for two pulls within its cache duration, want 1:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, want := range []string{`"kind":"CredentialProviderRequest"`, fmt.Sprintf(`"image":"%s/e2e/busybox"`, r.Host), "--for e2e"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the plugin's request and args %q lack %q", lines[0], want)
		}
	}
	first := time.Now()
	info, err := os.Stat(calls)
	must(t, err)
	// Past the cache duration, the next pull runs the plugin again.
	time.Sleep(time.Until(info.ModTime().Add(pluginCacheDuration + 2*time.Second)))
	n.writeManifest("plugin-c.yaml", strings.Replace(pod("plugin-c"), busybox, image, 1))
	n.waitRunning("plugin-c-"+nodeName, 90*time.Second)
	if got := pluginCalls(t, calls); len(got) != 2 {
		t.Errorf("after the cache duration (%v since the pods ran) the plugin ran %d times in all, want 2", time.Since(first), len(got))
	}
}

func pluginCalls(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	must(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}
