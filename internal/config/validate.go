package config

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Validate checks a defaulted KubeletConfiguration the way the upstream
// kubelet does before starting (its validation package plus the checks it
// makes later at startup, such as eviction thresholds and the authorization
// mode). Every problem is reported; the result joins one *field.Error per
// problem, each naming the field by its JSON path, e.g.
//
//	readOnlyPort: Invalid value: 70000: must be between 0 and 65535
//
// Optional pointer fields that are still nil are skipped, so call
// SetDefaults first.
func Validate(c *kubeletconfigv1beta1.KubeletConfiguration) error {
	if c == nil {
		return errors.New("kubelet configuration is nil")
	}
	var errs field.ErrorList
	for _, check := range []func(*kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList{
		validateServing,
		validateAuth,
		validateIntervals,
		validateRates,
		validateImages,
		validatePodLimits,
		validateCgroups,
		validateManagers,
		validateEviction,
		validateNodeAllocatable,
		validateShutdown,
		validateRuntime,
		validateLogs,
		validateNodeRegistration,
		validateFeatureGated,
		validateFeatureGateNames,
	} {
		errs = append(errs, check(c)...)
	}
	return joinFieldErrors(errs)
}

// joinFieldErrors keeps each *field.Error reachable through errors.As while
// printing one problem per line.
func joinFieldErrors(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// p builds a field path from JSON names.
func p(name string, more ...string) *field.Path { return field.NewPath(name, more...) }

func checkRange(path *field.Path, v, lo, hi int64) *field.Error {
	if v < lo || v > hi {
		return field.Invalid(path, v, fmt.Sprintf("must be between %d and %d", lo, hi))
	}
	return nil
}

func checkNonNegative(path *field.Path, v int64) *field.Error {
	if v < 0 {
		return field.Invalid(path, v, "must not be negative")
	}
	return nil
}

func checkPositiveDuration(path *field.Path, d metav1.Duration) *field.Error {
	if d.Duration <= 0 {
		return field.Invalid(path, d.Duration.String(), "must be greater than 0")
	}
	return nil
}

func checkNonNegativeDuration(path *field.Path, d metav1.Duration) *field.Error {
	if d.Duration < 0 {
		return field.Invalid(path, d.Duration.String(), "must not be negative")
	}
	return nil
}

func checkOneOf[T ~string](path *field.Path, v T, allowed ...T) *field.Error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return field.NotSupported(path, string(v), allowed)
}

// add appends the non-nil errors among errs.
func add(list field.ErrorList, errs ...*field.Error) field.ErrorList {
	for _, e := range errs {
		if e != nil {
			list = append(list, e)
		}
	}
	return list
}

func durationOf(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}
