// Package podspec defaults and validates pods that reach the kubelet without
// passing through an apiserver (static pod files, manifest URLs, HTTP push).
// Pods from the apiserver are already defaulted and validated there.
//
// Default mirrors the upstream v1 API defaulting (pkg/apis/core/v1) that a
// kubelet depends on; Validate mirrors the subset of upstream pod create
// validation whose violations would confuse or break the kubelet.
package podspec
