package nodestatus

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// pressure describes one pressure condition: its reasons and messages for
// True and False and the events recorded on transitions (upstream's).
type pressure struct {
	typ                       v1.NodeConditionType
	trueReason, trueMessage   string
	falseReason, falseMessage string
	trueEvent, falseEvent     string
}

// pressures are the pressure conditions in upstream's order; the eviction
// manager says which hold (Config.Pressure).
var pressures = []pressure{
	{
		typ:        v1.NodeMemoryPressure,
		trueReason: "KubeletHasInsufficientMemory", trueMessage: "kubelet has insufficient memory available",
		falseReason: "KubeletHasSufficientMemory", falseMessage: "kubelet has sufficient memory available",
		trueEvent: "NodeHasInsufficientMemory", falseEvent: "NodeHasSufficientMemory",
	},
	{
		typ:        v1.NodeDiskPressure,
		trueReason: "KubeletHasDiskPressure", trueMessage: "kubelet has disk pressure",
		falseReason: "KubeletHasNoDiskPressure", falseMessage: "kubelet has no disk pressure",
		trueEvent: "NodeHasDiskPressure", falseEvent: "NodeHasNoDiskPressure",
	},
	{
		typ:        v1.NodePIDPressure,
		trueReason: "KubeletHasInsufficientPID", trueMessage: "kubelet has insufficient PID available",
		falseReason: "KubeletHasSufficientPID", falseMessage: "kubelet has sufficient PID available",
		trueEvent: "NodeHasInsufficientPID", falseEvent: "NodeHasSufficientPID",
	},
}

// setPressure updates one pressure condition in place: the heartbeat always,
// the rest (and the transition time) only when the status flips.
func setPressure(node *v1.Node, p pressure, under bool, now metav1.Time, event func(reason string)) {
	cond := findCondition(node, p.typ)
	isNew := cond == nil
	if isNew {
		cond = &v1.NodeCondition{Type: p.typ, Status: v1.ConditionUnknown}
	}
	cond.LastHeartbeatTime = now
	switch {
	case under && cond.Status != v1.ConditionTrue:
		cond.Status, cond.Reason, cond.Message = v1.ConditionTrue, p.trueReason, p.trueMessage
		cond.LastTransitionTime = now
		event(p.trueEvent)
	case !under && cond.Status != v1.ConditionFalse:
		cond.Status, cond.Reason, cond.Message = v1.ConditionFalse, p.falseReason, p.falseMessage
		cond.LastTransitionTime = now
		event(p.falseEvent)
	}
	if isNew {
		node.Status.Conditions = append(node.Status.Conditions, *cond)
	}
}

// requiredCapacity is what a node must report to be Ready.
func requiredCapacity(localStorage bool) []v1.ResourceName {
	r := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods}
	if localStorage {
		r = append(r, v1.ResourceEphemeralStorage)
	}
	return r
}

// setReady updates the Ready condition and returns it: True unless the
// runtime reported errors or capacity is missing. The transition time moves
// only when the status flips; the message may change without a transition.
func setReady(node *v1.Node, runtimeErr error, required []v1.ResourceName, now metav1.Time, event func(reason string)) v1.NodeCondition {
	next := v1.NodeCondition{
		Type:              v1.NodeReady,
		Status:            v1.ConditionTrue,
		Reason:            "KubeletReady",
		Message:           "kubelet is posting ready status",
		LastHeartbeatTime: now,
	}
	errs := []error{runtimeErr}
	var missing []string
	for _, r := range required {
		if _, ok := node.Status.Capacity[r]; !ok {
			missing = append(missing, string(r))
		}
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("missing node capacity for resources: %s", strings.Join(missing, ", ")))
	}
	if err := utilerrors.NewAggregate(errs); err != nil {
		next.Status, next.Reason, next.Message = v1.ConditionFalse, "KubeletNotReady", err.Error()
	}
	cur := findCondition(node, v1.NodeReady)
	if cur == nil {
		next.LastTransitionTime = now
		node.Status.Conditions = append(node.Status.Conditions, next)
		return next
	}
	flipped := cur.Status != next.Status
	if flipped {
		next.LastTransitionTime = now
	} else {
		next.LastTransitionTime = cur.LastTransitionTime
	}
	*cur = next
	switch {
	case !flipped:
	case next.Status == v1.ConditionTrue:
		event("NodeReady")
	default:
		event("NodeNotReady")
	}
	return next
}

func findCondition(node *v1.Node, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}
