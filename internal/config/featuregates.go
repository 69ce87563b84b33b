package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// FeatureGate returns a registry of the gates the v1.34 kubelet knows, set
// from gates. As upstream, an unknown name, or a gate locked to its default
// and set to the other value, is an error.
func FeatureGate(gates map[string]bool) (featuregate.FeatureGate, error) {
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(kubeletFeatureGates1_34); err != nil {
		return nil, fmt.Errorf("register feature gates: %w", err)
	}
	if err := fg.SetFromMap(gates); err != nil {
		return nil, err
	}
	return fg, nil
}

// gatePreventStaticPodAPIReferences is on by default in 1.34 (beta).
const gatePreventStaticPodAPIReferences = "PreventStaticPodAPIReferences"

func validateFeatureGateNames(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	if _, err := FeatureGate(c.FeatureGates); err != nil {
		return field.ErrorList{field.Invalid(p("featureGates"), c.FeatureGates, err.Error())}
	}
	// Off, upstream would run static pods that reference Secrets and the
	// like, which the node authorizer then denies them; Skiff has only the
	// gate's default.
	if on, set := c.FeatureGates[gatePreventStaticPodAPIReferences]; set && !on {
		return field.ErrorList{field.Forbidden(p("featureGates").Key(gatePreventStaticPodAPIReferences),
			"Skiff always refuses static pods that reference API objects; it cannot be turned off")}
	}
	return nil
}
