// Package podsource defines the stream of desired pods that every pod source
// (static files, manifest URL, HTTP push, apiserver) feeds into the kubelet.
package podsource

import v1 "k8s.io/api/core/v1"

// Source names, as upstream writes them into the kubernetes.io/config.source
// annotation.
const (
	File      = "file"
	HTTP      = "http"
	APIServer = "api"
)

// Annotations the kubelet sets on pods it receives, as upstream does.
const (
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	ConfigHashAnnotation   = "kubernetes.io/config.hash"
	ConfigSeenAnnotation   = "kubernetes.io/config.seen"
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
)

// Update is a complete snapshot of the pods one source wants on this node.
// A source sends a new snapshot whenever its set changes; pods missing from
// the latest snapshot of their source are to be removed.
type Update struct {
	Source string
	Pods   []*v1.Pod
}
