package config

import (
	"net"

	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// TLS version names as the kubelet's --tls-min-version accepts them.
var tlsVersions = []string{"VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"}

func validateServing(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	if net.ParseIP(c.Address) == nil {
		errs = add(errs, field.Invalid(p("address"), c.Address, "must be a valid IP address"))
	}
	errs = add(errs,
		checkRange(p("port"), int64(c.Port), 1, 65535),
		// 0 turns the read-only port off.
		checkRange(p("readOnlyPort"), int64(c.ReadOnlyPort), 0, 65535),
	)
	if c.HealthzPort != nil {
		// 0 turns the healthz server off.
		errs = add(errs, checkRange(p("healthzPort"), int64(*c.HealthzPort), 0, 65535))
		if *c.HealthzPort != 0 && net.ParseIP(c.HealthzBindAddress) == nil {
			errs = add(errs, field.Invalid(p("healthzBindAddress"), c.HealthzBindAddress, "must be a valid IP address"))
		}
	}
	if (c.TLSCertFile == "") != (c.TLSPrivateKeyFile == "") {
		errs = add(errs, field.Invalid(p("tlsCertFile"), c.TLSCertFile, "tlsCertFile and tlsPrivateKeyFile must be set together"))
	}
	if c.TLSMinVersion != "" {
		errs = add(errs, checkOneOf(p("tlsMinVersion"), c.TLSMinVersion, tlsVersions...))
	}
	// The names the server maps to IDs (k8s.io/component-base/cli/flag).
	known := map[string]bool{}
	for _, name := range cliflag.TLSCipherPossibleValues() {
		known[name] = true
	}
	for i, name := range c.TLSCipherSuites {
		if !known[name] {
			errs = add(errs, field.Invalid(p("tlsCipherSuites").Index(i), name, "unknown cipher suite"))
		}
	}
	return errs
}

func validateAuth(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = add(errs,
		checkOneOf(p("authorization", "mode"), c.Authorization.Mode,
			kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow,
			kubeletconfigv1beta1.KubeletAuthorizationModeWebhook),
		checkNonNegativeDuration(p("authentication", "webhook", "cacheTTL"), c.Authentication.Webhook.CacheTTL),
		checkNonNegativeDuration(p("authorization", "webhook", "cacheAuthorizedTTL"), c.Authorization.Webhook.CacheAuthorizedTTL),
		checkNonNegativeDuration(p("authorization", "webhook", "cacheUnauthorizedTTL"), c.Authorization.Webhook.CacheUnauthorizedTTL),
	)
	return errs
}

// validateIntervals covers the periods the kubelet runs loops or timers on;
// a zero or negative period there would spin or panic.
func validateIntervals(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = add(errs,
		checkPositiveDuration(p("syncFrequency"), c.SyncFrequency),
		checkPositiveDuration(p("fileCheckFrequency"), c.FileCheckFrequency),
		checkPositiveDuration(p("httpCheckFrequency"), c.HTTPCheckFrequency),
		checkPositiveDuration(p("nodeStatusUpdateFrequency"), c.NodeStatusUpdateFrequency),
		checkPositiveDuration(p("nodeStatusReportFrequency"), c.NodeStatusReportFrequency),
		checkPositiveDuration(p("runtimeRequestTimeout"), c.RuntimeRequestTimeout),
		checkNonNegativeDuration(p("streamingConnectionIdleTimeout"), c.StreamingConnectionIdleTimeout),
		// 0 turns volume stats collection off.
		checkNonNegativeDuration(p("volumeStatsAggPeriod"), c.VolumeStatsAggPeriod),
		checkNonNegativeDuration(p("evictionPressureTransitionPeriod"), c.EvictionPressureTransitionPeriod),
	)
	if c.NodeLeaseDurationSeconds <= 0 {
		errs = add(errs, field.Invalid(p("nodeLeaseDurationSeconds"), c.NodeLeaseDurationSeconds, "must be greater than 0"))
	}
	return errs
}

func validateRates(c *kubeletconfigv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = add(errs,
		checkNonNegative(p("eventBurst"), int64(c.EventBurst)),
		checkNonNegative(p("kubeAPIBurst"), int64(c.KubeAPIBurst)),
		checkNonNegative(p("registryBurst"), int64(c.RegistryBurst)),
	)
	if c.EventRecordQPS != nil {
		errs = add(errs, checkNonNegative(p("eventRecordQPS"), int64(*c.EventRecordQPS)))
	}
	if c.KubeAPIQPS != nil {
		errs = add(errs, checkNonNegative(p("kubeAPIQPS"), int64(*c.KubeAPIQPS)))
	}
	if c.RegistryPullQPS != nil {
		errs = add(errs, checkNonNegative(p("registryPullQPS"), int64(*c.RegistryPullQPS)))
	}
	return errs
}
