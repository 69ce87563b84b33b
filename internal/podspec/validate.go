package podspec

import (
	"fmt"
	"math"
	"net"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a defaulted pod the way the apiserver checks a pod on
// create, limited to what the kubelet relies on. Each error names its field
// path, e.g. "spec.containers[0].image: Required value".
func Validate(pod *v1.Pod) field.ErrorList {
	if pod == nil {
		return field.ErrorList{field.Required(field.NewPath(""), "pod is nil")}
	}
	allErrs := apivalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	allErrs = append(allErrs, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
	return allErrs
}

func validatePodSpec(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	volumes, errs := validateVolumes(spec.Volumes, p.Child("volumes"))
	allErrs = append(allErrs, errs...)
	allErrs = append(allErrs, validateContainers(spec, volumes, p)...)
	allErrs = append(allErrs, validateRestartPolicy(spec.RestartPolicy, p.Child("restartPolicy"))...)
	allErrs = append(allErrs, validateDNS(spec, p)...)
	allErrs = append(allErrs, validateTolerations(spec.Tolerations, p.Child("tolerations"))...)

	if len(spec.EphemeralContainers) > 0 {
		// Ephemeral containers are only added to running pods through the
		// apiserver's subresource; a pod source may not create them.
		allErrs = append(allErrs, field.Forbidden(p.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be greater than or equal to 0"))
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		allErrs = append(allErrs, field.Invalid(p.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	allErrs = append(allErrs, validateOptionalName(spec.NodeName, validation.IsDNS1123Subdomain, p.Child("nodeName"))...)
	allErrs = append(allErrs, validateOptionalName(spec.ServiceAccountName, validation.IsDNS1123Subdomain, p.Child("serviceAccountName"))...)
	allErrs = append(allErrs, validateOptionalName(spec.Hostname, validation.IsDNS1123Label, p.Child("hostname"))...)
	allErrs = append(allErrs, validateOptionalName(spec.Subdomain, validation.IsDNS1123Label, p.Child("subdomain"))...)
	allErrs = append(allErrs, validateResourceList(spec.Overhead, p.Child("overhead"))...)
	if spec.Resources != nil {
		allErrs = append(allErrs, validateResources(spec.Resources, p.Child("resources"))...)
	}
	return allErrs
}

func validateOptionalName(name string, check func(string) []string, p *field.Path) field.ErrorList {
	if name == "" {
		return nil
	}
	return invalidMsgs(p, name, check(name))
}

// invalidMsgs turns the messages of an apimachinery Is* check into errors.
func invalidMsgs(p *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(p, value, msg))
	}
	return errs
}

var validRestartPolicies = []v1.RestartPolicy{v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever}

func validateRestartPolicy(rp v1.RestartPolicy, p *field.Path) field.ErrorList {
	return validateEnum(rp, validRestartPolicies, p)
}

// validateEnum checks a required string field against its allowed values.
func validateEnum[T ~string](v T, allowed []T, p *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p, v, allowed)}
}

const (
	maxDNSNameservers = 3
	maxDNSSearchPaths = 32
)

var validDNSPolicies = []v1.DNSPolicy{v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault, v1.DNSNone}

func validateDNS(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	allErrs := validateEnum(spec.DNSPolicy, validDNSPolicies, p.Child("dnsPolicy"))
	cfg := spec.DNSConfig
	if spec.DNSPolicy == v1.DNSNone {
		if cfg == nil {
			return append(allErrs, field.Required(p.Child("dnsConfig"), fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", v1.DNSNone)))
		}
		if len(cfg.Nameservers) == 0 {
			allErrs = append(allErrs, field.Required(p.Child("dnsConfig", "nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", v1.DNSNone)))
		}
	}
	if cfg == nil {
		return allErrs
	}
	if len(cfg.Nameservers) > maxDNSNameservers {
		allErrs = append(allErrs, field.TooMany(p.Child("dnsConfig", "nameservers"), len(cfg.Nameservers), maxDNSNameservers))
	}
	for i, ns := range cfg.Nameservers {
		if net.ParseIP(ns) == nil {
			allErrs = append(allErrs, field.Invalid(p.Child("dnsConfig", "nameservers").Index(i), ns, "must be a valid IP address"))
		}
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		allErrs = append(allErrs, field.TooMany(p.Child("dnsConfig", "searches"), len(cfg.Searches), maxDNSSearchPaths))
	}
	for i, o := range cfg.Options {
		if o.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("dnsConfig", "options").Index(i).Child("name"), ""))
		}
	}
	return allErrs
}

var validTaintEffects = sets.New(v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute)

func validateTolerations(tols []v1.Toleration, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, t := range tols {
		tp := p.Index(i)
		if t.Key != "" {
			allErrs = append(allErrs, invalidMsgs(tp.Child("key"), t.Key, validation.IsQualifiedName(t.Key))...)
		}
		switch t.Operator {
		case v1.TolerationOpEqual, "":
			if t.Key == "" {
				allErrs = append(allErrs, field.Invalid(tp.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
			} else {
				allErrs = append(allErrs, invalidMsgs(tp.Child("value"), t.Value, validation.IsValidLabelValue(t.Value))...)
			}
		case v1.TolerationOpExists:
			if t.Value != "" {
				allErrs = append(allErrs, field.Invalid(tp.Child("value"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			allErrs = append(allErrs, field.NotSupported(tp.Child("operator"), t.Operator, []string{string(v1.TolerationOpEqual), string(v1.TolerationOpExists)}))
		}
		if t.Effect != "" && !validTaintEffects.Has(t.Effect) {
			allErrs = append(allErrs, field.NotSupported(tp.Child("effect"), t.Effect, sets.List(validTaintEffects)))
		}
		if t.TolerationSeconds != nil && t.Effect != v1.TaintEffectNoExecute {
			allErrs = append(allErrs, field.Invalid(tp.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
	}
	return allErrs
}
