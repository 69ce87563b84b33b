package resize

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/podspec"
)

// containerResources is one container in a resize event.
type containerResources struct {
	Name      string                  `json:"name"`
	Resources v1.ResourceRequirements `json:"resources"`
}

// eventSummary is the JSON upstream's resize events carry.
type eventSummary struct {
	InitContainers []containerResources `json:"initContainers,omitempty"`
	Containers     []containerResources `json:"containers,omitempty"`
	Generation     int64                `json:"generation"`
	Error          string               `json:"error,omitempty"`
}

// eventMessage is a resize event's message as upstream writes it: the
// prefix, then the pod's resizable containers' resources, its generation
// and the error, if any, as JSON.
func eventMessage(prefix string, pod *v1.Pod, errMsg string) string {
	s := eventSummary{Generation: pod.Generation, Error: errMsg}
	Resizable(pod, func(c *v1.Container) {
		cr := containerResources{Name: c.Name, Resources: c.Resources}
		if podspec.IsSidecar(c) && isInit(pod, c) {
			s.InitContainers = append(s.InitContainers, cr)
			return
		}
		s.Containers = append(s.Containers, cr)
	})
	b, err := json.Marshal(s)
	if err != nil {
		return prefix
	}
	return fmt.Sprintf("%s: %s", prefix, b)
}

func isInit(pod *v1.Pod, c *v1.Container) bool {
	for i := range pod.Spec.InitContainers {
		if &pod.Spec.InitContainers[i] == c {
			return true
		}
	}
	return false
}
