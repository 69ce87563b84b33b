package podspec

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateResources checks quantities and that no request exceeds its limit:
// the cgroup the kubelet creates enforces the limit, so a larger request
// could never be honoured.
func validateResources(r *v1.ResourceRequirements, p *field.Path) field.ErrorList {
	allErrs := validateResourceList(r.Limits, p.Child("limits"))
	allErrs = append(allErrs, validateResourceList(r.Requests, p.Child("requests"))...)
	for _, name := range sortedResourceNames(r.Requests) {
		req := r.Requests[name]
		lim, ok := r.Limits[name]
		if ok && req.Cmp(lim) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	return allErrs
}

func validateResourceList(l v1.ResourceList, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, name := range sortedResourceNames(l) {
		q := l[name]
		kp := p.Key(string(name))
		allErrs = append(allErrs, invalidMsgs(kp, string(name), validation.IsQualifiedName(string(name)))...)
		if q.Sign() < 0 {
			allErrs = append(allErrs, field.Invalid(kp, q.String(), "must be greater than or equal to 0"))
		}
	}
	return allErrs
}

// sortedResourceNames gives the keys in order so error lists are stable.
func sortedResourceNames(l v1.ResourceList) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(l))
	for name := range l {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
