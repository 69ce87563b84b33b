package cri

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/container"
)

// Labels and annotations on sandboxes and containers. The names are the
// upstream kubelet's, so tools that know them (and a later upstream kubelet)
// recognise Skiff's pods.
const (
	PodNameLabel       = "io.kubernetes.pod.name"
	PodNamespaceLabel  = "io.kubernetes.pod.namespace"
	PodUIDLabel        = "io.kubernetes.pod.uid"
	ContainerNameLabel = "io.kubernetes.container.name"

	ContainerHashAnnotation         = "io.kubernetes.container.hash"
	ContainerRestartCountAnnotation = "io.kubernetes.container.restartCount"
	TerminationMessagePathAnno      = "io.kubernetes.container.terminationMessagePath"
	TerminationMessagePolicyAnno    = "io.kubernetes.container.terminationMessagePolicy"
	PodTerminationGraceAnnotation   = "io.kubernetes.pod.terminationGracePeriod"
	ContainerImageAnnotation        = "io.kubernetes.container.image"
)

// PodRef identifies the pod a sandbox or container belongs to. It lives in
// package container, which the pod workers use without this package.
type PodRef = container.PodRef

// PodRefFromLabels reads a PodRef; ok is false for things Skiff did not make.
func PodRefFromLabels(l map[string]string) (PodRef, bool) {
	uid := l[PodUIDLabel]
	if uid == "" {
		return PodRef{}, false
	}
	return PodRef{UID: types.UID(uid), Name: l[PodNameLabel], Namespace: l[PodNamespaceLabel]}, true
}

// SandboxLabels are the pod's own labels plus the identifying ones.
func SandboxLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[PodNameLabel] = pod.Name
	l[PodNamespaceLabel] = pod.Namespace
	l[PodUIDLabel] = string(pod.UID)
	return l
}

// ContainerLabels identify a container and its pod.
func ContainerLabels(pod *v1.Pod, name string) map[string]string {
	return map[string]string{
		PodNameLabel:       pod.Name,
		PodNamespaceLabel:  pod.Namespace,
		PodUIDLabel:        string(pod.UID),
		ContainerNameLabel: name,
	}
}

// ContainerAnnotations carry what Skiff needs to rebuild a container's status
// after its own restart: spec hash, restart count, termination settings.
func ContainerAnnotations(pod *v1.Pod, c *v1.Container, hash uint64, restartCount int) map[string]string {
	a := map[string]string{
		ContainerHashAnnotation:         strconv.FormatUint(hash, 16),
		ContainerRestartCountAnnotation: strconv.Itoa(restartCount),
		TerminationMessagePathAnno:      c.TerminationMessagePath,
		TerminationMessagePolicyAnno:    string(c.TerminationMessagePolicy),
		ContainerImageAnnotation:        c.Image,
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[PodTerminationGraceAnnotation] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	return a
}

// HashFromAnnotations and RestartCountFromAnnotations parse what
// ContainerAnnotations wrote; unparseable values read as zero.
func HashFromAnnotations(a map[string]string) uint64 {
	h, _ := strconv.ParseUint(a[ContainerHashAnnotation], 16, 64)
	return h
}

func RestartCountFromAnnotations(a map[string]string) int {
	n, _ := strconv.Atoi(a[ContainerRestartCountAnnotation])
	return n
}

// GracePeriodFromAnnotations reads the pod's termination grace period.
func GracePeriodFromAnnotations(a map[string]string) *int64 {
	g, err := strconv.ParseInt(a[PodTerminationGraceAnnotation], 10, 64)
	if err != nil {
		return nil
	}
	return &g
}
