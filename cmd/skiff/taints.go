package main

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// parseTaints reads taints written as <key>[=<value>]:<effect>, as the
// upstream kubelet's --register-with-taints.
func parseTaints(specs []string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, spec := range specs {
		kv, effect, ok := strings.Cut(spec, ":")
		if !ok {
			return nil, fmt.Errorf("invalid taint %q: want <key>=<value>:<effect>", spec)
		}
		key, value, _ := strings.Cut(kv, "=")
		switch v1.TaintEffect(effect) {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("invalid taint %q: effect must be NoSchedule, PreferNoSchedule or NoExecute", spec)
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("invalid taint key %q: %s", key, strings.Join(errs, "; "))
		}
		if value != "" {
			if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
				return nil, fmt.Errorf("invalid taint value %q: %s", value, strings.Join(errs, "; "))
			}
		}
		out = append(out, v1.Taint{Key: key, Value: value, Effect: v1.TaintEffect(effect)})
	}
	return out, nil
}
