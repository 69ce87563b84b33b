package podsource

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/podspec"
)

// staticPodToleration lets a pod survive any NoExecute taint: the node
// runs its static pods itself, so evicting them for node problems makes
// no sense.
var staticPodToleration = v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}

// MakeStatic turns a pod decoded from a static source (File or HTTP) into
// the pod this node runs, in place, as upstream's file and http sources
// do: uid when the pod has none (each source hashes its own input), API
// defaults, the node's name as a suffix of the pod's (mirror pod names
// stay unique across nodes) and as spec.nodeName, the config.hash and
// config.source annotations, phase Pending (status is the kubelet's to
// report, never the manifest's), then validation, and the refusal of any
// reference to an API object (apiReference). Only pods from files
// get the NoExecute toleration: upstream's http source adds none. The
// config.seen annotation is left to the caller (see FirstSeen).
func MakeStatic(pod *v1.Pod, source, nodeName string, uid types.UID) error {
	if source != File && source != HTTP {
		return fmt.Errorf("%q is not a static pod source", source)
	}
	if pod.Name == "" {
		return field.Required(field.NewPath("metadata", "name"), "a static pod needs a name")
	}
	if pod.UID == "" {
		pod.UID = uid
	}
	podspec.Default(pod)
	pod.Name = pod.Name + "-" + strings.ToLower(nodeName)
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ConfigHashAnnotation] = string(pod.UID)
	pod.Annotations[ConfigSourceAnnotation] = source
	if source == File {
		addToleration(pod, staticPodToleration)
	}
	pod.Status = v1.PodStatus{Phase: v1.PodPending}
	if errs := podspec.Validate(pod); len(errs) > 0 {
		return fmt.Errorf("invalid pod: %w", errs.ToAggregate())
	}
	if what, err := apiReference(pod); err != nil {
		return err
	} else if what != "" {
		return fmt.Errorf("static pods may not reference %s", what)
	}
	return nil
}

// addToleration adds tol unless a toleration the pod has already covers it.
func addToleration(pod *v1.Pod, tol v1.Toleration) {
	for _, t := range pod.Spec.Tolerations {
		if t.MatchToleration(&tol) {
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, tol)
}
