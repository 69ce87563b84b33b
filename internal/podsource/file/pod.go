package file

import (
	"crypto/md5" // as upstream; the hash names content, it guards nothing
	"encoding/hex"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/podsource"
)

// buildPod decodes one manifest and turns it into the pod the kubelet runs,
// as upstream's file source does (podsource.MakeStatic).
func buildPod(data []byte, path, nodeName string) (*v1.Pod, error) {
	pod, canonical, err := decodeManifest(data)
	if err != nil {
		return nil, err
	}
	if err := podsource.MakeStatic(pod, podsource.File, nodeName, manifestUID(canonical, path, nodeName)); err != nil {
		return nil, err
	}
	return pod, nil
}

// manifestUID derives a pod UID from the node, the file path and the decoded
// manifest, as upstream: a changed manifest (or a moved file) is a new pod,
// while the same manifest gives the same UID across restarts, which is how
// Skiff adopts the containers it already runs.
//
// The hash covers the decoded manifest as canonical JSON: comments,
// formatting and key order do not matter. It is taken before defaulting and
// independently of the Go API types, so that neither a new default nor a new
// API field in a Skiff upgrade restarts every static pod.
func manifestUID(canonical []byte, path, nodeName string) types.UID {
	h := md5.New()
	fmt.Fprintf(h, "host:%s", nodeName)
	fmt.Fprintf(h, "file:%s", path)
	h.Write(canonical)
	return types.UID(hex.EncodeToString(h.Sum(nil)))
}
