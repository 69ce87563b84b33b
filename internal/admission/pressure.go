package admission

import (
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/skiff-sh/skiff/internal/eviction"
	"github.com/skiff-sh/skiff/internal/qos"
)

// Pressure refuses what upstream's eviction manager refuses while the node
// is under pressure (conds): under memory pressure alone, BestEffort pods
// that do not tolerate the memory-pressure taint; under any other
// pressure, every pod. Critical pods are always admitted.
func Pressure(conds []v1.NodeConditionType, pod *v1.Pod) Result {
	if len(conds) == 0 || eviction.IsCritical(pod) {
		return Result{Admit: true}
	}
	if len(conds) == 1 && conds[0] == v1.NodeMemoryPressure {
		if qos.Class(pod) != v1.PodQOSBestEffort {
			return Result{Admit: true}
		}
		taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
		if corev1helpers.TolerationsTolerateTaint(pod.Spec.Tolerations, taint) {
			return Result{Admit: true}
		}
	}
	return Result{Reason: eviction.Reason, Message: eviction.NodeConditionMessage(conds)}
}
