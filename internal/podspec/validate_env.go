package podspec

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Downward API field paths the kubelet can resolve into environment
// variables; labels and annotations additionally accept a ['key'] subscript.
var envFieldPaths = sets.New(
	"metadata.name", "metadata.namespace", "metadata.uid",
	"spec.nodeName", "spec.serviceAccountName",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
)

var envResourceFields = sets.New(
	"limits.cpu", "limits.memory", "limits.ephemeral-storage",
	"requests.cpu", "requests.memory", "requests.ephemeral-storage",
)

func validateEnv(env []v1.EnvVar, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, ev := range env {
		ep := p.Index(i)
		if ev.Name == "" {
			allErrs = append(allErrs, field.Required(ep.Child("name"), ""))
		} else {
			// Kubernetes 1.34 accepts any printable ASCII except '='.
			allErrs = append(allErrs, invalidMsgs(ep.Child("name"), ev.Name, validation.IsRelaxedEnvVarName(ev.Name))...)
		}
		if ev.ValueFrom == nil {
			continue
		}
		if ev.Value != "" {
			allErrs = append(allErrs, field.Invalid(ep.Child("valueFrom"), "", "may not be specified when `value` is not empty"))
		}
		allErrs = append(allErrs, validateEnvVarSource(ev.ValueFrom, ep.Child("valueFrom"))...)
	}
	return allErrs
}

func validateEnvVarSource(s *v1.EnvVarSource, p *field.Path) field.ErrorList {
	n := 0
	var allErrs field.ErrorList
	if s.FieldRef != nil {
		n++
		allErrs = append(allErrs, validateEnvFieldRef(s.FieldRef, p.Child("fieldRef"))...)
	}
	if s.ResourceFieldRef != nil {
		n++
		allErrs = append(allErrs, validateEnvResourceRef(s.ResourceFieldRef, p.Child("resourceFieldRef"))...)
	}
	if s.ConfigMapKeyRef != nil {
		n++
		allErrs = append(allErrs, validateKeySelector(s.ConfigMapKeyRef.Name, s.ConfigMapKeyRef.Key, p.Child("configMapKeyRef"))...)
	}
	if s.SecretKeyRef != nil {
		n++
		allErrs = append(allErrs, validateKeySelector(s.SecretKeyRef.Name, s.SecretKeyRef.Key, p.Child("secretKeyRef"))...)
	}
	if s.FileKeyRef != nil {
		n++
		allErrs = append(allErrs, field.Forbidden(p.Child("fileKeyRef"), "the EnvFiles feature is not supported"))
	}
	switch {
	case n == 0:
		allErrs = append(allErrs, field.Invalid(p, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case n > 1:
		allErrs = append(allErrs, field.Invalid(p, "", "may not have more than one field specified at a time"))
	}
	return allErrs
}

func validateEnvFieldRef(ref *v1.ObjectFieldSelector, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if ref.APIVersion == "" {
		allErrs = append(allErrs, field.Required(p.Child("apiVersion"), ""))
	} else if ref.APIVersion != "v1" {
		allErrs = append(allErrs, field.NotSupported(p.Child("apiVersion"), ref.APIVersion, []string{"v1"}))
	}
	fp := ref.FieldPath
	switch {
	case fp == "":
		allErrs = append(allErrs, field.Required(p.Child("fieldPath"), ""))
	case envFieldPaths.Has(fp):
	case strings.HasPrefix(fp, "metadata.labels['") || strings.HasPrefix(fp, "metadata.annotations['"):
		if !strings.HasSuffix(fp, "']") || strings.HasSuffix(fp, "['']") {
			allErrs = append(allErrs, field.Invalid(p.Child("fieldPath"), fp, "must be of the form metadata.labels['key'] or metadata.annotations['key']"))
		}
	default:
		allErrs = append(allErrs, field.NotSupported(p.Child("fieldPath"), fp, append(sets.List(envFieldPaths),
			"metadata.annotations['<KEY>']", "metadata.labels['<KEY>']")))
	}
	return allErrs
}

func validateEnvResourceRef(ref *v1.ResourceFieldSelector, p *field.Path) field.ErrorList {
	r := ref.Resource
	switch {
	case r == "":
		return field.ErrorList{field.Required(p.Child("resource"), "")}
	case envResourceFields.Has(r),
		strings.HasPrefix(r, "limits."+v1.ResourceHugePagesPrefix),
		strings.HasPrefix(r, "requests."+v1.ResourceHugePagesPrefix):
		return nil
	}
	return field.ErrorList{field.NotSupported(p.Child("resource"), r, sets.List(envResourceFields))}
}

func validateKeySelector(name, key string, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if name == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), ""))
	}
	if key == "" {
		allErrs = append(allErrs, field.Required(p.Child("key"), ""))
	} else {
		allErrs = append(allErrs, invalidMsgs(p.Child("key"), key, validation.IsConfigMapKey(key))...)
	}
	return allErrs
}

func validateEnvFrom(sources []v1.EnvFromSource, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, s := range sources {
		sp := p.Index(i)
		if s.Prefix != "" {
			allErrs = append(allErrs, invalidMsgs(sp.Child("prefix"), s.Prefix, validation.IsRelaxedEnvVarName(s.Prefix))...)
		}
		switch {
		case s.ConfigMapRef != nil && s.SecretRef != nil:
			allErrs = append(allErrs, field.Invalid(sp, "", "may not have more than one field specified at a time"))
		case s.ConfigMapRef != nil:
			if s.ConfigMapRef.Name == "" {
				allErrs = append(allErrs, field.Required(sp.Child("configMapRef", "name"), ""))
			}
		case s.SecretRef != nil:
			if s.SecretRef.Name == "" {
				allErrs = append(allErrs, field.Required(sp.Child("secretRef", "name"), ""))
			}
		default:
			allErrs = append(allErrs, field.Invalid(sp, "", "must specify one of: `configMapRef` or `secretRef`"))
		}
	}
	return allErrs
}
