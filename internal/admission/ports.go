package admission

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

type hostPort struct {
	ip       string // "" means every address
	protocol v1.Protocol
	port     int32
}

// hostPorts lists the host ports a pod's containers ask for.
func hostPorts(pod *v1.Pod) []hostPort {
	var out []hostPort
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				hp := hostPort{ip: p.HostIP, protocol: p.Protocol, port: p.HostPort}
				if hp.ip == "0.0.0.0" || hp.ip == "::" {
					hp.ip = ""
				}
				if hp.protocol == "" {
					hp.protocol = v1.ProtocolTCP
				}
				out = append(out, hp)
			}
		}
	}
	return out
}

// conflicts: same protocol and port, and addresses that overlap (equal,
// or either is the wildcard), as the scheduler's NodePorts filter says.
func (a hostPort) conflicts(b hostPort) bool {
	return a.port == b.port && a.protocol == b.protocol && (a.ip == "" || b.ip == "" || a.ip == b.ip)
}

// portClash describes the first host port of pod that an active pod holds.
func portClash(pod *v1.Pod, active []*v1.Pod) string {
	want := hostPorts(pod)
	if len(want) == 0 {
		return ""
	}
	for _, other := range active {
		if other.UID == pod.UID {
			continue
		}
		for _, held := range hostPorts(other) {
			for _, w := range want {
				if w.conflicts(held) {
					return fmt.Sprintf("hostPort %d/%s is used by pod %s/%s", w.port, w.protocol, other.Namespace, other.Name)
				}
			}
		}
	}
	return ""
}
