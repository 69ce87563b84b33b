package file

import (
	"crypto/md5" // as upstream; the hash names content, it guards nothing
	"encoding/hex"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/podsource"
	"github.com/skiff-sh/skiff/internal/podspec"
)

// staticPodToleration lets static pods survive any NoExecute taint: the node
// runs them itself, so evicting them for node problems makes no sense.
var staticPodToleration = v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}

// buildPod decodes one manifest and turns it into the pod the kubelet runs,
// as upstream's file source does. The config.seen annotation is left to the
// caller, which tracks first-seen times.
func buildPod(data []byte, path, nodeName string) (*v1.Pod, error) {
	pod, canonical, err := decodeManifest(data)
	if err != nil {
		return nil, err
	}
	if pod.Name == "" {
		return nil, field.Required(field.NewPath("metadata", "name"), "a static pod needs a name")
	}
	if pod.UID == "" {
		pod.UID = manifestUID(canonical, path, nodeName)
	}
	podspec.Default(pod)
	// Suffixing the node name keeps mirror pod names unique across nodes.
	pod.Name = pod.Name + "-" + strings.ToLower(nodeName)
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[podsource.ConfigHashAnnotation] = string(pod.UID)
	pod.Annotations[podsource.ConfigSourceAnnotation] = podsource.File
	addToleration(pod, staticPodToleration)
	// Status is the kubelet's to report, never the manifest's.
	pod.Status = v1.PodStatus{Phase: v1.PodPending}
	if errs := podspec.Validate(pod); len(errs) > 0 {
		return nil, fmt.Errorf("invalid pod: %w", errs.ToAggregate())
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

func addToleration(pod *v1.Pod, tol v1.Toleration) {
	for _, t := range pod.Spec.Tolerations {
		if t.MatchToleration(&tol) {
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, tol)
}
