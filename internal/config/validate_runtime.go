package config

import (
	"net"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func validateRuntime(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	if c.ContainerRuntimeEndpoint == "" {
		errs = add(errs, field.Required(p("containerRuntimeEndpoint"), ""))
	}
	if c.RunOnce {
		errs = add(errs, field.Forbidden(p("runOnce"), "run-once mode is deprecated and not supported"))
	}
	if c.EnableSystemLogQuery != nil && *c.EnableSystemLogQuery {
		switch {
		case !gateEnabled(c, gateNodeLogQuery):
			errs = add(errs, field.Forbidden(p("enableSystemLogQuery"), "requires feature gate "+gateNodeLogQuery))
		case c.EnableSystemLogHandler != nil && !*c.EnableSystemLogHandler:
			errs = add(errs, field.Forbidden(p("enableSystemLogQuery"), "requires enableSystemLogHandler"))
		default:
			// Refused rather than ignored: a query would silently get files.
			errs = add(errs, field.Forbidden(p("enableSystemLogQuery"),
				"node log queries are not supported by Skiff; /logs/ serves the files under /var/log"))
		}
	}
	return errs
}

func validateLogs(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	// The logging options need their gates; bad gate names are reported
	// by validateFeatureGateNames, and the defaults then apply here.
	fg, err := FeatureGate(c.FeatureGates)
	if err != nil {
		fg = nil
	}
	return logsapi.Validate(&c.Logging, fg, p("logging"))
}

// validateShutdown: graceful node shutdown is on by default in 1.34, so its
// rules always apply.
func validateShutdown(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	total, critical := c.ShutdownGracePeriod.Duration, c.ShutdownGracePeriodCriticalPods.Duration
	if critical > total {
		errs = add(errs, field.Invalid(p("shutdownGracePeriodCriticalPods"), critical.String(),
			"must not exceed shutdownGracePeriod ("+total.String()+")"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"shutdownGracePeriod", total}, {"shutdownGracePeriodCriticalPods", critical}} {
		if d.v < 0 || (d.v > 0 && d.v < time.Second) {
			errs = add(errs, field.Invalid(p(d.name), d.v.String(), "must be 0 or at least 1s"))
		}
	}
	if len(c.ShutdownGracePeriodByPodPriority) > 0 && (total > 0 || critical > 0) {
		errs = add(errs, field.Forbidden(p("shutdownGracePeriodByPodPriority"),
			"cannot be used together with shutdownGracePeriod or shutdownGracePeriodCriticalPods"))
	}
	return errs
}

func validateNodeRegistration(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	for i, ip := range c.ClusterDNS {
		if net.ParseIP(ip) == nil {
			errs = add(errs, field.Invalid(p("clusterDNS").Index(i), ip, "must be a valid IP address"))
		}
	}
	for i, t := range c.RegisterWithTaints {
		tp := p("registerWithTaints").Index(i)
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = add(errs, field.Invalid(tp.Child("key"), t.Key, msg))
		}
		if t.Value != "" {
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = add(errs, field.Invalid(tp.Child("value"), t.Value, msg))
			}
		}
		errs = add(errs, checkOneOf(tp.Child("effect"), string(t.Effect), "NoSchedule", "PreferNoSchedule", "NoExecute"))
		if t.TimeAdded != nil {
			errs = add(errs, field.Forbidden(tp.Child("timeAdded"), "must not be set"))
		}
	}
	return errs
}

// validateFeatureGated covers fields that only make sense with a feature
// gate that is off by default in 1.34.
func validateFeatureGated(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	restart := c.CrashLoopBackOff.MaxContainerRestartPeriod
	restartPath := p("crashLoopBackOff", "maxContainerRestartPeriod")
	switch {
	case gateEnabled(c, gateCrashLoopBackOffMax) && restart == nil:
		errs = add(errs, field.Required(restartPath, "must be set when feature gate "+gateCrashLoopBackOffMax+" is enabled"))
	case gateEnabled(c, gateCrashLoopBackOffMax) && (restart.Duration < time.Second || restart.Duration > DefaultMaxContainerRestartPeriod):
		errs = add(errs, field.Invalid(restartPath, restart.Duration.String(), "must be between 1s and 300s"))
	case !gateEnabled(c, gateCrashLoopBackOffMax) && restart != nil:
		errs = add(errs, field.Forbidden(restartPath, "requires feature gate "+gateCrashLoopBackOffMax))
	}

	policyPath := p("imagePullCredentialsVerificationPolicy")
	allowlistPath := p("preloadedImagesVerificationAllowlist")
	if gateEnabled(c, gateEnsureSecretPulledImages) {
		errs = add(errs, checkOneOf(policyPath, c.ImagePullCredentialsVerificationPolicy,
			kubeletconfigv1beta1.NeverVerify, kubeletconfigv1beta1.NeverVerifyPreloadedImages,
			kubeletconfigv1beta1.NeverVerifyAllowlistedImages, kubeletconfigv1beta1.AlwaysVerify))
		if len(c.PreloadedImagesVerificationAllowlist) > 0 &&
			c.ImagePullCredentialsVerificationPolicy != kubeletconfigv1beta1.NeverVerifyAllowlistedImages {
			errs = add(errs, field.Forbidden(allowlistPath,
				"may only be set when imagePullCredentialsVerificationPolicy is NeverVerifyAllowlistedImages"))
		}
	} else {
		if c.ImagePullCredentialsVerificationPolicy != "" {
			errs = add(errs, field.Forbidden(policyPath, "requires feature gate "+gateEnsureSecretPulledImages))
		}
		if len(c.PreloadedImagesVerificationAllowlist) > 0 {
			errs = add(errs, field.Forbidden(allowlistPath, "requires feature gate "+gateEnsureSecretPulledImages))
		}
	}

	if gateEnabled(c, gateMemoryQoS) && c.MemoryThrottlingFactor == nil {
		errs = add(errs, field.Required(p("memoryThrottlingFactor"), "must be set when feature gate "+gateMemoryQoS+" is enabled"))
	}
	return errs
}
