package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// evictionSignals are the signals the upstream eviction manager knows.
var evictionSignals = []string{
	"memory.available",
	"allocatableMemory.available",
	"nodefs.available",
	"nodefs.inodesFree",
	"imagefs.available",
	"imagefs.inodesFree",
	"containerfs.available",
	"containerfs.inodesFree",
	"pid.available",
}

func isEvictionSignal(s string) bool {
	for _, known := range evictionSignals {
		if s == known {
			return true
		}
	}
	return false
}

// validateEviction applies the rules the upstream kubelet enforces when it
// parses its eviction settings at startup.
func validateEviction(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	hardPath, softPath := p("evictionHard"), p("evictionSoft")
	gracePath, reclaimPath := p("evictionSoftGracePeriod"), p("evictionMinimumReclaim")

	for _, signal := range slices.Sorted(maps.Keys(c.EvictionHard)) {
		errs = add(errs, checkThreshold(hardPath.Key(signal), signal, c.EvictionHard[signal]))
	}
	for _, signal := range slices.Sorted(maps.Keys(c.EvictionSoft)) {
		errs = add(errs, checkThreshold(softPath.Key(signal), signal, c.EvictionSoft[signal]))
		if _, ok := c.EvictionSoftGracePeriod[signal]; !ok {
			errs = add(errs, field.Required(gracePath.Key(signal), "a soft eviction threshold needs a grace period"))
		}
	}
	for _, signal := range slices.Sorted(maps.Keys(c.EvictionSoftGracePeriod)) {
		path, v := gracePath.Key(signal), c.EvictionSoftGracePeriod[signal]
		if !isEvictionSignal(signal) {
			errs = add(errs, field.NotSupported(path, signal, evictionSignals))
			continue
		}
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			errs = add(errs, field.Invalid(path, v, err.Error()))
		case d < 0:
			errs = add(errs, field.Invalid(path, v, "must not be negative"))
		}
	}
	for _, signal := range slices.Sorted(maps.Keys(c.EvictionMinimumReclaim)) {
		errs = add(errs, checkMinimumReclaim(reclaimPath.Key(signal), signal, c.EvictionMinimumReclaim[signal]))
	}
	return errs
}

// checkThreshold accepts a percentage (0% and 100% switch the signal off) or
// a positive quantity.
func checkThreshold(path *field.Path, signal, v string) *field.Error {
	return checkSignalAmount(path, signal, v, false)
}

// checkMinimumReclaim accepts a percentage or a quantity that is not
// negative.
func checkMinimumReclaim(path *field.Path, signal, v string) *field.Error {
	return checkSignalAmount(path, signal, v, true)
}

// checkSignalAmount checks an amount of an eviction signal: a percentage,
// or a quantity above zero (or at zero too, with zeroOK).
func checkSignalAmount(path *field.Path, signal, v string, zeroOK bool) *field.Error {
	if !isEvictionSignal(signal) {
		return field.NotSupported(path, signal, evictionSignals)
	}
	if strings.HasSuffix(v, "%") {
		return checkPercentage(path, v)
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return field.Invalid(path, v, err.Error())
	}
	switch {
	case zeroOK && q.Sign() < 0:
		return field.Invalid(path, v, "must not be negative")
	case !zeroOK && q.Sign() <= 0:
		return field.Invalid(path, v, "must be a positive quantity or a percentage")
	}
	return nil
}

func checkPercentage(path *field.Path, v string) *field.Error {
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 32)
	if err != nil {
		return field.Invalid(path, v, fmt.Sprintf("invalid percentage: %v", err))
	}
	if f < 0 || f > 100 {
		return field.Invalid(path, v, "percentage must be between 0% and 100%")
	}
	return nil
}
