package podruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/cri"
)

// PodLogsDir is the directory of a pod's container logs:
// <root>/<namespace>_<name>_<uid>, as upstream lays it out.
func PodLogsDir(root, namespace, name string, uid types.UID) string {
	return filepath.Join(root, fmt.Sprintf("%s_%s_%s", namespace, name, uid))
}

// Hostname is the pod's hostname: spec.hostname or the pod name, cut to the
// 63 characters of a DNS label without a trailing '-' or '.'.
func Hostname(pod *v1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

func (m *Manager) sandboxConfig(pod *v1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	dns, _, err := m.cfg.DNS.dnsConfig(pod)
	if err != nil {
		dns = nil // the runtime's default; createSandbox reports the error
	}
	annotations := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		Hostname:     Hostname(pod),
		LogDirectory: PodLogsDir(m.cfg.PodLogsDir, pod.Namespace, pod.Name, pod.UID),
		Labels:       cri.SandboxLabels(pod),
		Annotations:  annotations,
		PortMappings: portMappings(pod),
		DnsConfig:    dns,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: m.cfg.Security.sandboxSecurity(pod),
			Sysctls:         sysctls(pod),
		},
	}
	if pod.Spec.HostNetwork {
		cfg.Hostname = "" // the node's own hostname
	}
	if m.cfg.Resources != nil {
		cfg.Linux.CgroupParent = m.cfg.Resources.PodCgroupParent(pod)
	}
	return cfg
}

func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		ns.Pid = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

func portMappings(pod *v1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case v1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case v1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			out = append(out, &runtimeapi.PortMapping{
				Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP,
			})
		}
	}
	return out
}

// createSandbox runs a new sandbox and returns its ID and IPs.
func (m *Manager) createSandbox(ctx context.Context, pod *v1.Pod, attempt uint32) (string, []string, error) {
	if err := checkUserNamespace(pod); err != nil {
		return "", nil, err
	}
	if _, ok, err := m.cfg.DNS.dnsConfig(pod); err != nil {
		return "", nil, fmt.Errorf("pod DNS: %w", err)
	} else if !ok {
		m.event(pod, v1.EventTypeWarning, "MissingClusterDNS",
			"pod: %q. kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.",
			pod.Namespace+"/"+pod.Name, v1.DNSClusterFirst, v1.DNSDefault)
	}
	cfg := m.sandboxConfig(pod, attempt)
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return "", nil, fmt.Errorf("create pod log directory: %w", err)
	}
	m.cfg.Metrics.Runtime.StartedPods.Inc()
	id, err := m.cfg.CRI.Runtime.RunPodSandbox(ctx, cfg, m.cfg.RuntimeHandler)
	if err != nil {
		m.cfg.Metrics.Runtime.StartedPodsErrors.Inc()
		return "", nil, fmt.Errorf("run pod sandbox: %w", err)
	}
	resp, err := m.cfg.CRI.Runtime.PodSandboxStatus(ctx, id, false)
	if err != nil {
		return id, nil, fmt.Errorf("status of new sandbox %s: %w", id, err)
	}
	return id, sandboxIPs(resp.Status), nil
}
