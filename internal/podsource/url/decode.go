package url

import (
	"crypto/md5" // as upstream; the hash names content, it guards nothing
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/internal/podsource"
)

// decodePods reads a manifest URL's answer: a v1 Pod or a v1 PodList, in
// YAML or JSON, decoded strictly (an unknown field is an error naming it).
// Every pod is turned into the pod the kubelet runs, as upstream's http
// source does; one bad pod fails the whole answer, as upstream.
func decodePods(data []byte, url, nodeName string) ([]*v1.Pod, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, errors.New("the answer is not a YAML or JSON object")
	}
	if head.APIVersion != "v1" {
		return nil, fmt.Errorf("apiVersion %q is not supported: want a v1 Pod or PodList", head.APIVersion)
	}
	var raw []json.RawMessage
	switch head.Kind {
	case "Pod":
		raw = []json.RawMessage{js}
	case "PodList":
		raw = head.Items
	default:
		return nil, fmt.Errorf("kind %q is not supported: want a v1 Pod or PodList", head.Kind)
	}
	pods := make([]*v1.Pod, 0, len(raw))
	for i, item := range raw {
		pod, err := buildPod(item, url, nodeName)
		if err != nil {
			if head.Kind == "PodList" {
				return nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			return nil, err
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// buildPod decodes one pod and makes it this node's static pod, as
// upstream's http source does (podsource.MakeStatic).
func buildPod(js []byte, url, nodeName string) (*v1.Pod, error) {
	pod := &v1.Pod{}
	strictErrs, err := sjson.UnmarshalStrict(js, pod, sjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("decoding pod: %w", err)
	}
	if len(strictErrs) > 0 {
		return nil, fmt.Errorf("strict decoding error: %w", errors.Join(strictErrs...))
	}
	if pod.Kind != "" && pod.Kind != "Pod" {
		return nil, fmt.Errorf("kind %q in a PodList is not a Pod", pod.Kind)
	}
	if err := podsource.MakeStatic(pod, podsource.HTTP, nodeName, urlUID(js, url)); err != nil {
		return nil, err
	}
	return pod, nil
}

// urlUID hashes the pod as served, in canonical JSON (so formatting does
// not matter), and the URL: a changed pod is a new pod, the same one keeps
// its UID across restarts.
func urlUID(js []byte, url string) types.UID {
	var obj any
	canonical := js
	if json.Unmarshal(js, &obj) == nil {
		if b, err := json.Marshal(obj); err == nil { // map keys come out sorted
			canonical = b
		}
	}
	h := md5.New()
	h.Write(canonical)
	fmt.Fprintf(h, "url:%s", url)
	return types.UID(hex.EncodeToString(h.Sum(nil)))
}
