package podruntime

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/atomicfile"
)

const etcHosts = "/etc/hosts"

// writeHostsFile writes the pod's managed /etc/hosts into its directory, as
// upstream: localhost entries, the pod's IPs with its hostname (and FQDN
// with a subdomain), then hostAliases; a host-network pod gets the node's
// hosts file plus its aliases.
func (m *Manager) writeHostsFile(pod *v1.Pod, ips []string) (string, error) {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(etcHosts)
		if err != nil {
			return "", fmt.Errorf("read node hosts file: %w", err)
		}
		b.Write(node)
	} else {
		b.WriteString("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
			"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
		names := Hostname(pod)
		if pod.Spec.Subdomain != "" && m.cfg.DNS.ClusterDomain != "" {
			names = fmt.Sprintf("%s.%s.%s.svc.%s\t%s", Hostname(pod), pod.Spec.Subdomain, pod.Namespace, m.cfg.DNS.ClusterDomain, Hostname(pod))
		}
		for _, ip := range ips {
			fmt.Fprintf(&b, "%s\t%s\n", ip, names)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	path := filepath.Join(m.cfg.PodDir(pod.UID), "etc-hosts")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return "", err
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b.Bytes()) {
		return path, nil
	}
	if err := atomicfile.Write(path, b.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("write hosts file: %w", err)
	}
	return path, nil
}

// hostsMount mounts the managed hosts file unless the container mounts its
// own /etc/hosts.
func hostsMount(c *v1.Container, path string) *runtimeapi.Mount {
	if path == "" {
		return nil
	}
	for _, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == etcHosts {
			return nil
		}
	}
	return &runtimeapi.Mount{ContainerPath: etcHosts, HostPath: path}
}
