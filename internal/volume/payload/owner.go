package payload

import (
	v1 "k8s.io/api/core/v1"
)

// FSGroup returns the pod's fsGroup, or nil.
func FSGroup(pod *v1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		g := *sc.FSGroup
		return &g
	}
	return nil
}

// FSUser returns the user every container of the pod runs as, or nil when
// one of them has no runAsUser or two differ: upstream's FsUserFrom, which
// decides who owns projected token files. Init, regular and ephemeral
// containers all count, each with its own runAsUser over the pod's.
func FSUser(pod *v1.Pod) *int64 {
	var user *int64
	var podUser *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		podUser = sc.RunAsUser
	}
	visit := func(sc *v1.SecurityContext) bool {
		u := podUser
		if sc != nil && sc.RunAsUser != nil {
			u = sc.RunAsUser
		}
		if u == nil || (user != nil && *user != *u) {
			user = nil
			return false
		}
		if user == nil {
			v := *u
			user = &v
		}
		return true
	}
	for _, c := range pod.Spec.InitContainers {
		if !visit(c.SecurityContext) {
			return nil
		}
	}
	for _, c := range pod.Spec.Containers {
		if !visit(c.SecurityContext) {
			return nil
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if !visit(c.SecurityContext) {
			return nil
		}
	}
	return user
}
