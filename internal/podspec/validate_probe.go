package podspec

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validateProbes(c *v1.Container, p *field.Path) field.ErrorList {
	allErrs := validateProbe(c.LivenessProbe, true, p.Child("livenessProbe"))
	allErrs = append(allErrs, validateProbe(c.StartupProbe, true, p.Child("startupProbe"))...)
	allErrs = append(allErrs, validateProbe(c.ReadinessProbe, false, p.Child("readinessProbe"))...)
	if r := c.ReadinessProbe; r != nil && r.TerminationGracePeriodSeconds != nil {
		allErrs = append(allErrs, field.Invalid(p.Child("readinessProbe", "terminationGracePeriodSeconds"),
			*r.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
	}
	return allErrs
}

// validateProbe checks one probe. Liveness and startup probes act on the
// first success, so their successThreshold must be 1.
func validateProbe(pr *v1.Probe, singleSuccess bool, p *field.Path) field.ErrorList {
	if pr == nil {
		return nil
	}
	h := pr.ProbeHandler
	allErrs := validateHandler(p, map[string]bool{
		"exec": h.Exec != nil, "httpGet": h.HTTPGet != nil, "tcpSocket": h.TCPSocket != nil, "grpc": h.GRPC != nil,
	})
	allErrs = append(allErrs, validateExec(h.Exec, p.Child("exec"))...)
	allErrs = append(allErrs, validateHTTPGet(h.HTTPGet, p.Child("httpGet"))...)
	if h.TCPSocket != nil {
		allErrs = append(allErrs, validatePortNumOrName(h.TCPSocket.Port, p.Child("tcpSocket", "port"))...)
	}
	if h.GRPC != nil {
		allErrs = append(allErrs, invalidMsgs(p.Child("grpc", "port"), h.GRPC.Port, validation.IsValidPortNum(int(h.GRPC.Port)))...)
	}
	if pr.InitialDelaySeconds < 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("initialDelaySeconds"), pr.InitialDelaySeconds, "must be greater than or equal to 0"))
	}
	for _, f := range []struct {
		name string
		v    int32
	}{
		{"timeoutSeconds", pr.TimeoutSeconds}, {"periodSeconds", pr.PeriodSeconds},
		{"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold},
	} {
		if f.v < 1 {
			allErrs = append(allErrs, field.Invalid(p.Child(f.name), f.v, "must be greater than or equal to 1"))
		}
	}
	if singleSuccess && pr.SuccessThreshold > 1 {
		allErrs = append(allErrs, field.Invalid(p.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	return allErrs
}

func validateLifecycle(l *v1.Lifecycle, p *field.Path) field.ErrorList {
	if l == nil {
		return nil
	}
	var allErrs field.ErrorList
	for _, hook := range []struct {
		name string
		h    *v1.LifecycleHandler
	}{{"postStart", l.PostStart}, {"preStop", l.PreStop}} {
		h := hook.h
		if h == nil {
			continue
		}
		hp := p.Child(hook.name)
		allErrs = append(allErrs, validateHandler(hp, map[string]bool{
			"exec": h.Exec != nil, "httpGet": h.HTTPGet != nil, "tcpSocket": h.TCPSocket != nil, "sleep": h.Sleep != nil,
		})...)
		allErrs = append(allErrs, validateExec(h.Exec, hp.Child("exec"))...)
		allErrs = append(allErrs, validateHTTPGet(h.HTTPGet, hp.Child("httpGet"))...)
		if h.TCPSocket != nil {
			allErrs = append(allErrs, validatePortNumOrName(h.TCPSocket.Port, hp.Child("tcpSocket", "port"))...)
		}
		if h.Sleep != nil && h.Sleep.Seconds < 0 {
			allErrs = append(allErrs, field.Invalid(hp.Child("sleep", "seconds"), h.Sleep.Seconds, "must be greater than or equal to 0"))
		}
	}
	return allErrs
}

// validateHandler requires exactly one handler type. The names are sorted so
// the error for several handlers is deterministic.
func validateHandler(p *field.Path, set map[string]bool) field.ErrorList {
	var names []string
	for _, name := range []string{"exec", "httpGet", "tcpSocket", "grpc", "sleep"} {
		if set[name] {
			names = append(names, name)
		}
	}
	switch {
	case len(names) == 0:
		return field.ErrorList{field.Required(p, "must specify a handler type")}
	case len(names) > 1:
		return field.ErrorList{field.Forbidden(p.Child(names[1]), "may not specify more than 1 handler type")}
	}
	return nil
}

func validateExec(e *v1.ExecAction, p *field.Path) field.ErrorList {
	if e != nil && len(e.Command) == 0 {
		return field.ErrorList{field.Required(p.Child("command"), "")}
	}
	return nil
}

func validateHTTPGet(h *v1.HTTPGetAction, p *field.Path) field.ErrorList {
	if h == nil {
		return nil
	}
	allErrs := validatePortNumOrName(h.Port, p.Child("port"))
	allErrs = append(allErrs, validateEnum(h.Scheme, []v1.URIScheme{v1.URISchemeHTTP, v1.URISchemeHTTPS}, p.Child("scheme"))...)
	for i, hdr := range h.HTTPHeaders {
		allErrs = append(allErrs, invalidMsgs(p.Child("httpHeaders").Index(i).Child("name"), hdr.Name, validation.IsHTTPHeaderName(hdr.Name))...)
	}
	return allErrs
}

func validatePortNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	if port.Type == intstr.String {
		return invalidMsgs(p, port.StrVal, validation.IsValidPortName(port.StrVal))
	}
	return invalidMsgs(p, port.IntVal, validation.IsValidPortNum(int(port.IntVal)))
}
