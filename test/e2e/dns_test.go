//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostAliases appear in /etc/hosts, and
// dnsPolicy None with a dnsConfig gives exactly that resolv.conf.
func TestHostsFileAndDNSConfig(t *testing.T) {
	n := newPrivateNode(t)
	n.writeManifest("dns.yaml", staticPod("dns", "cat /etc/hosts /etc/resolv.conf; exec sleep 3600", `  hostAliases:
  - ip: 10.1.2.3
    hostnames: [foo.local, bar.local]
  dnsPolicy: None
  dnsConfig:
    nameservers: [192.0.2.53]
    searches: [corp.example]
    options: [{name: ndots, value: "2"}]
`))
	n.start()
	p := n.waitRunning("dns-"+nodeName, 30*time.Second)
	logFile := filepath.Join(podLogsRoot, "default_"+p.Name+"_"+string(p.UID), "main", "0.log")
	waitFor(t, 10*time.Second, "hosts and resolv.conf in the container", func() (bool, error) {
		b, _ := os.ReadFile(logFile)
		s := string(b)
		return strings.Contains(s, "10.1.2.3\tfoo.local\tbar.local") &&
			strings.Contains(s, p.Status.PodIP+"\tdns-"+nodeName) &&
			strings.Contains(s, "nameserver 192.0.2.53") && strings.Contains(s, "search corp.example") &&
			strings.Contains(s, "options ndots:2"), nil
	})
}
