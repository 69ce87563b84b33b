//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The node's /var/log through the apiserver's node proxy (upstream's
// enableSystemLogHandler, authorized as nodes/log), with a symlink out of
// /var/log refused.
func TestNodeLogsThroughAPIServer(t *testing.T) {
	cn := sharedNode(t)
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)

	name := "skiff-e2e-" + cn.ns + ".log"
	file := filepath.Join("/var/log", name)
	must(t, os.WriteFile(file, []byte("a node log line\n"), 0o644))
	t.Cleanup(func() { os.Remove(file) })
	secret := filepath.Join(t.TempDir(), "secret")
	must(t, os.WriteFile(secret, []byte("outside /var/log\n"), 0o644))
	escape := filepath.Join("/var/log", "skiff-e2e-"+cn.ns+"-escape.log")
	must(t, os.Symlink(secret, escape))
	t.Cleanup(func() { os.Remove(escape) })

	raw := func(path string) (string, error) {
		out, err := kubectl(cn.c, "get", "--raw", "/api/v1/nodes/"+nodeName+"/proxy/logs/"+path).CombinedOutput()
		return string(out), err
	}
	// The Node may still be Ready from an earlier test: wait for this Skiff.
	waitFor(t, 30*time.Second, "the node's log file through the apiserver", func() (bool, error) {
		out, err := raw(name)
		return err == nil && out == "a node log line\n", nil
	})
	if out, err := raw(""); err != nil || !strings.Contains(out, fmt.Sprintf("href=%q", name)) {
		t.Errorf("listing of /var/log: %v %s", err, tail(out, 5))
	}
	if out, err := raw(filepath.Base(escape)); err == nil || strings.Contains(out, "outside /var/log") {
		t.Errorf("a symlink out of /var/log was followed: %v %q", err, out)
	}

	// nodes/log is what authorizes it; nodes/stats does not.
	_, token := cn.serviceAccountToken(t, "log-reader", "log")
	if code, body := kubeletGet(t, cn.kubeletURL(t, "/logs/"+name), token, nil); code != http.StatusOK || body != "a node log line\n" {
		t.Errorf("with nodes/log: %d %q", code, body)
	}
	user, token := cn.serviceAccountToken(t, "stats-only", "stats")
	want := fmt.Sprintf("Forbidden (user=%s, verb=get, resource=nodes, subresource(s)=[log])\n", user)
	if code, body := kubeletGet(t, cn.kubeletURL(t, "/logs/"+name), token, nil); code != http.StatusForbidden || body != want {
		t.Errorf("with nodes/stats only: %d %q, want 403 %q", code, body, want)
	}
}
