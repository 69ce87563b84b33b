// Package config loads, defaults and validates the kubelet's
// KubeletConfiguration (kubelet.config.k8s.io/v1beta1), following what the
// upstream kubelet does with its --config file.
//
// The usual order is Load (if a file is given), then any flag overrides,
// then SetDefaults, then Validate.
package config
