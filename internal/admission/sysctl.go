package admission

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// ReasonSysctlForbidden is upstream's reason for a pod with a sysctl the
// node does not allow.
const ReasonSysctlForbidden = "SysctlForbidden"

// safeSysctls are the sysctls every pod may set: namespaced and isolated
// from other pods, as upstream lists them (all exist on kernels >= 4.15).
var safeSysctls = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem",
}

// Sysctls allows the safe sysctls plus the config's allowedUnsafeSysctls
// (names or prefixes ending in '*').
type Sysctls struct {
	names    map[string]utilsysctl.Namespace
	prefixes map[string]utilsysctl.Namespace
}

// NewSysctls builds the allowlist; a pattern that is not known to be
// namespaced is an error, since setting it would change the whole node.
func NewSysctls(allowedUnsafe []string) (*Sysctls, error) {
	s := &Sysctls{names: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	for _, p := range append(append([]string(nil), safeSysctls...), allowedUnsafe...) {
		ns, name, prefixed := utilsysctl.GetNamespace(p)
		if ns == utilsysctl.UnknownNamespace {
			return nil, fmt.Errorf("allowedUnsafeSysctls: %q is not known to be namespaced", p)
		}
		if prefixed {
			if !strings.HasSuffix(p, "*") || strings.Count(p, "*") != 1 {
				return nil, fmt.Errorf("allowedUnsafeSysctls: %q: a pattern may only end in '*'", p)
			}
			s.prefixes[name] = ns
		} else {
			s.names[name] = ns
		}
	}
	return s, nil
}

// Admit refuses a pod that sets a sysctl not allowed here, or a sysctl of
// a namespace the pod shares with the host.
func (s *Sysctls) Admit(pod *v1.Pod) Result {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return Result{Admit: true}
	}
	for _, sc := range psc.Sysctls {
		if err := s.check(sc.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
			return Result{Reason: ReasonSysctlForbidden, Message: fmt.Sprintf("forbidden sysctl: %v", err)}
		}
	}
	return Result{Admit: true}
}

func (s *Sysctls) check(name string, hostNet, hostIPC bool) error {
	name = utilsysctl.NormalizeName(name)
	ns, ok := s.names[name]
	if !ok {
		for p, pns := range s.prefixes {
			if strings.HasPrefix(name, p) {
				ns, ok = pns, true
				break
			}
		}
	}
	switch {
	case !ok:
		return fmt.Errorf("%q not allowlisted", name)
	case ns == utilsysctl.IPCNamespace && hostIPC, ns == utilsysctl.NetNamespace && hostNet:
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}
