package envvars

import (
	"fmt"
	"net"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/volume/payload"
)

// fieldRefValue resolves a fieldRef as upstream's
// podFieldSelectorRuntimeValue: spec and status fields here, metadata
// through the downward API's own extraction. podIPs are sorted with the
// node's family first.
func fieldRefValue(ref *v1.ObjectFieldSelector, pod *v1.Pod, podIPs, hostIPs []string) (string, error) {
	path, err := convertFieldLabel(ref.APIVersion, ref.FieldPath)
	if err != nil {
		return "", err
	}
	switch path {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		if len(hostIPs) == 0 {
			return "", fmt.Errorf("host IP unknown; known addresses: []")
		}
		if path == "status.hostIP" {
			return hostIPs[0], nil
		}
		return strings.Join(hostIPs, ","), nil
	case "status.podIP":
		if len(podIPs) == 0 {
			return "", nil
		}
		return podIPs[0], nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	}
	return payload.PodFieldValue(pod, path)
}

// convertFieldLabel is upstream's ConvertDownwardAPIFieldLabel for pods:
// the paths a fieldRef may name, with "spec.host" as the old name of
// spec.nodeName.
func convertFieldLabel(version, path string) (string, error) {
	if version != "v1" {
		return "", fmt.Errorf("unsupported pod version: %s", version)
	}
	if base, _, ok := strings.Cut(path, "['"); ok && strings.HasSuffix(path, "']") && base != "" {
		if base == "metadata.annotations" || base == "metadata.labels" {
			return path, nil
		}
		return "", fmt.Errorf("field label does not support subscript: %s", path)
	}
	switch path {
	case "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid",
		"spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName", "spec.schedulerName",
		"status.phase", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs":
		return path, nil
	case "spec.host":
		return "spec.nodeName", nil
	}
	return "", fmt.Errorf("field label not supported: %s", path)
}

// podIPs are the IPs a pod's variables show: the sandbox's, or the node's
// for a host-network pod (as the pod's status shows them), at most one per
// family, the node's primary family first, as upstream's sortPodIPs.
func (b *Builder) podIPs(pod *v1.Pod, sandboxIPs []string) []string {
	ips := sandboxIPs
	if pod.Spec.HostNetwork && len(ips) == 0 {
		ips = b.cfg.HostIPs
	}
	v6First := len(b.cfg.HostIPs) > 0 && isIPv6(b.cfg.HostIPs[0])
	var out []string
	for _, wantV6 := range []bool{v6First, !v6First} {
		for _, s := range ips {
			if ip := net.ParseIP(s); ip != nil && isIPv6(s) == wantV6 {
				out = append(out, ip.String())
				break
			}
		}
	}
	return out
}

func isIPv6(s string) bool {
	ip := net.ParseIP(s)
	return ip != nil && ip.To4() == nil
}

// resourceFieldValue resolves a resourceFieldRef as upstream: the named
// container (the current one by default) with limits it does not set
// read as the node's allocatable, or the pod-level limit when the pod sets
// one. As upstream, only app containers and the current one get those
// defaults; another init container reads its own spec as is.
func resourceFieldValue(ref *v1.ResourceFieldSelector, pod *v1.Pod, c *v1.Container, alloc v1.ResourceList) (string, error) {
	alloc = podLevelLimits(pod, alloc)
	if ref.ContainerName == "" {
		return payload.ContainerResourceValue(ref, c, alloc)
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == ref.ContainerName {
			return payload.ContainerResourceValue(ref, &pod.Spec.Containers[i], alloc)
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == ref.ContainerName {
			return payload.ContainerResourceValue(ref, &pod.Spec.InitContainers[i], nil)
		}
	}
	return "", fmt.Errorf("container %s not found", ref.ContainerName)
}

// podLevelLimits: with pod-level resources (beta, on by default in v1.34),
// a container's unset CPU or memory limit is the pod's, not the node's.
func podLevelLimits(pod *v1.Pod, alloc v1.ResourceList) v1.ResourceList {
	if pod.Spec.Resources == nil || len(pod.Spec.Resources.Limits) == 0 {
		return alloc
	}
	out := alloc.DeepCopy()
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if q, ok := pod.Spec.Resources.Limits[name]; ok && !q.IsZero() {
			if _, ok := out[name]; ok {
				out[name] = q.DeepCopy()
			}
		}
	}
	return out
}
