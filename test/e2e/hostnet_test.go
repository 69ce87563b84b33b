//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A hostPort is reachable on the
// node's IP; a hostNetwork pod sees the node's interfaces.
// It runs on the dev containerd, whose bridge (skiff0) and portmap setup
// it checks.
func TestHostPortAndHostNetwork(t *testing.T) {
	n := newNode(t)
	port := freePort(t)
	n.writeManifest("web.yaml", staticPod("web", "mkdir -p /www && echo served-by-pod > /www/index.html && exec httpd -f -p 8080 -h /www",
		"")+fmt.Sprintf("    ports:\n    - {containerPort: 8080, hostPort: %d}\n", port))
	n.writeManifest("hostnet.yaml", staticPod("hostnet", "ip -o link; exec sleep 3600", "  hostNetwork: true\n"))
	n.start()
	web := n.waitRunning("web-"+nodeName, 30*time.Second)
	if web.Status.HostIP == "" {
		t.Fatal("no hostIP in the pod status")
	}
	url := fmt.Sprintf("http://%s:%d/", web.Status.HostIP, port)
	waitFor(t, 20*time.Second, "hostPort "+url, func() (bool, error) {
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "served-by-pod"), nil
	})

	hn := n.waitRunning("hostnet-"+nodeName, 30*time.Second)
	if hn.Status.PodIP != web.Status.HostIP {
		t.Errorf("hostNetwork pod IP %q, want the host's %q", hn.Status.PodIP, web.Status.HostIP)
	}
	logFile := filepath.Join(podLogsRoot, "default_"+hn.Name+"_"+string(hn.UID), "main", "0.log")
	waitFor(t, 10*time.Second, "the node's bridge visible from the hostNetwork pod", func() (bool, error) {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "skiff0"), nil
	})
}
