package admission

import (
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Reasons of the node-local checks, as upstream names them.
const (
	ReasonAppArmor                       = "AppArmor"
	ReasonSupplementalGroupsPolicy       = "SupplementalGroupsPolicyNotSupported"
	ReasonNodePorts                      = "NodePorts"
	appArmorContainerAnnotationKeyPrefix = "container.apparmor.security.beta.kubernetes.io/"
)

// Local holds the checks that depend on this node's runtime and host,
// which apply to every pod, static pods included.
type Local struct {
	Sysctls *Sysctls
	// AppArmor: the host enforces AppArmor profiles.
	AppArmor bool
	// SupplementalGroupsPolicy: the runtime honors the Strict policy.
	SupplementalGroupsPolicy bool
}

// AppArmorEnabled reports whether the host kernel enforces AppArmor.
func AppArmorEnabled() bool {
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && strings.HasPrefix(string(b), "Y")
}

// Admit checks pod against the node-local rules, given the active pods.
func (l *Local) Admit(pod *v1.Pod, active []*v1.Pod) Result {
	if l.Sysctls != nil {
		if r := l.Sysctls.Admit(pod); !r.Admit {
			return r
		}
	}
	if !l.AppArmor {
		if name := wantsAppArmor(pod); name != "" {
			return Result{Reason: ReasonAppArmor, Message: fmt.Sprintf("Cannot enforce AppArmor: AppArmor is not enabled on the host (requested by %s)", name)}
		}
	}
	if psc := pod.Spec.SecurityContext; !l.SupplementalGroupsPolicy && psc != nil && psc.SupplementalGroupsPolicy != nil &&
		*psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
		return Result{Reason: ReasonSupplementalGroupsPolicy, Message: fmt.Sprintf("SupplementalGroupsPolicy=%s is not supported in this node", v1.SupplementalGroupsPolicyStrict)}
	}
	if clash := portClash(pod, active); clash != "" {
		return Result{Reason: ReasonNodePorts, Message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports (" + clash + ")"}
	}
	return Result{Admit: true}
}

// wantsAppArmor names the first place the pod asks for an AppArmor profile
// other than Unconfined, in the field or the older annotation.
func wantsAppArmor(pod *v1.Pod) string {
	confined := func(p *v1.AppArmorProfile) bool { return p != nil && p.Type != v1.AppArmorProfileTypeUnconfined }
	if psc := pod.Spec.SecurityContext; psc != nil && confined(psc.AppArmorProfile) {
		return "spec.securityContext.appArmorProfile"
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.SecurityContext != nil && confined(c.SecurityContext.AppArmorProfile) {
				return fmt.Sprintf("container %q", c.Name)
			}
		}
	}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, appArmorContainerAnnotationKeyPrefix) && v != "unconfined" {
			return "annotation " + k
		}
	}
	return ""
}
