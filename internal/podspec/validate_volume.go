package podspec

import (
	"fmt"
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateVolumes checks the pod's volumes and returns them by name for the
// volume mount checks. An invalid volume is still returned, so that its
// mounts are not reported a second time as not found.
func validateVolumes(vols []v1.Volume, p *field.Path) (map[string]*v1.Volume, field.ErrorList) {
	var allErrs field.ErrorList
	byName := make(map[string]*v1.Volume, len(vols))
	for i := range vols {
		vol := &vols[i]
		vp := p.Index(i)
		errs := validateVolumeSource(&vol.VolumeSource, vp)
		switch {
		case vol.Name == "":
			errs = append(errs, field.Required(vp.Child("name"), ""))
		case byName[vol.Name] != nil:
			errs = append(errs, field.Duplicate(vp.Child("name"), vol.Name))
		default:
			errs = append(errs, invalidMsgs(vp.Child("name"), vol.Name, validation.IsDNS1123Label(vol.Name))...)
		}
		if byName[vol.Name] == nil {
			byName[vol.Name] = vol
		}
		allErrs = append(allErrs, errs...)
	}
	return byName, allErrs
}

func validateVolumeSource(vs *v1.VolumeSource, p *field.Path) field.ErrorList {
	switch set := setVolumeSources(vs); {
	case len(set) == 0:
		return field.ErrorList{field.Required(p, "must specify a volume type")}
	case len(set) > 1:
		return field.ErrorList{field.Forbidden(p.Child(set[1]), fmt.Sprintf("may not specify more than 1 volume type (already have %s)", set[0]))}
	}
	var allErrs field.ErrorList
	if s := vs.HostPath; s != nil {
		allErrs = append(allErrs, validateHostPath(s, p.Child("hostPath"))...)
	}
	if s := vs.EmptyDir; s != nil {
		allErrs = append(allErrs, validateEmptyDir(s, p.Child("emptyDir"))...)
	}
	if s := vs.Secret; s != nil {
		sp := p.Child("secret")
		if s.SecretName == "" {
			allErrs = append(allErrs, field.Required(sp.Child("secretName"), ""))
		}
		allErrs = append(allErrs, validateMode(s.DefaultMode, sp.Child("defaultMode"))...)
		allErrs = append(allErrs, validateKeyToPaths(s.Items, sp.Child("items"))...)
	}
	if s := vs.ConfigMap; s != nil {
		cp := p.Child("configMap")
		if s.Name == "" {
			allErrs = append(allErrs, field.Required(cp.Child("name"), ""))
		}
		allErrs = append(allErrs, validateMode(s.DefaultMode, cp.Child("defaultMode"))...)
		allErrs = append(allErrs, validateKeyToPaths(s.Items, cp.Child("items"))...)
	}
	if s := vs.DownwardAPI; s != nil {
		dp := p.Child("downwardAPI")
		allErrs = append(allErrs, validateMode(s.DefaultMode, dp.Child("defaultMode"))...)
		for i, item := range s.Items {
			allErrs = append(allErrs, validateLocalDescendingPath(item.Path, dp.Child("items").Index(i).Child("path"))...)
			allErrs = append(allErrs, validateMode(item.Mode, dp.Child("items").Index(i).Child("mode"))...)
		}
	}
	if s := vs.Projected; s != nil {
		allErrs = append(allErrs, validateMode(s.DefaultMode, p.Child("projected", "defaultMode"))...)
	}
	return allErrs
}

var validHostPathTypes = []v1.HostPathType{
	v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory, v1.HostPathFileOrCreate,
	v1.HostPathFile, v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev,
}

func validateHostPath(s *v1.HostPathVolumeSource, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if s.Path == "" {
		allErrs = append(allErrs, field.Required(p.Child("path"), ""))
	} else if !path.IsAbs(s.Path) {
		allErrs = append(allErrs, field.Invalid(p.Child("path"), s.Path, "must be an absolute path"))
	}
	if s.Type != nil {
		ok := false
		for _, t := range validHostPathTypes {
			ok = ok || *s.Type == t
		}
		if !ok {
			allErrs = append(allErrs, field.NotSupported(p.Child("type"), *s.Type, validHostPathTypes))
		}
	}
	return allErrs
}

func validateEmptyDir(s *v1.EmptyDirVolumeSource, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch m := s.Medium; {
	case m == v1.StorageMediumDefault, m == v1.StorageMediumMemory, m == v1.StorageMediumHugePages,
		strings.HasPrefix(string(m), string(v1.StorageMediumHugePagesPrefix)):
	default:
		allErrs = append(allErrs, field.NotSupported(p.Child("medium"), m,
			[]v1.StorageMedium{v1.StorageMediumDefault, v1.StorageMediumMemory, v1.StorageMediumHugePages}))
	}
	if s.SizeLimit != nil && s.SizeLimit.Sign() < 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("sizeLimit"), s.SizeLimit.String(), "must be greater than or equal to 0"))
	}
	return allErrs
}

// validateMode checks a file mode in volumes: permission bits only.
func validateMode(mode *int32, p *field.Path) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > 0o777) {
		return field.ErrorList{field.Invalid(p, *mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

func validateKeyToPaths(items []v1.KeyToPath, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, kp := range items {
		ip := p.Index(i)
		if kp.Key == "" {
			allErrs = append(allErrs, field.Required(ip.Child("key"), ""))
		}
		allErrs = append(allErrs, validateLocalDescendingPath(kp.Path, ip.Child("path"))...)
		allErrs = append(allErrs, validateMode(kp.Mode, ip.Child("mode"))...)
	}
	return allErrs
}

// validateLocalDescendingPath requires a non-empty relative path that
// cannot climb out of its base directory.
func validateLocalDescendingPath(pth string, p *field.Path) field.ErrorList {
	if pth == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return validateSubPath(pth, p)
}

// validateSubPath allows the empty path; a set one must be relative and free
// of ".." elements.
func validateSubPath(pth string, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if path.IsAbs(pth) {
		allErrs = append(allErrs, field.Invalid(p, pth, "must be a relative path"))
	}
	for _, elem := range strings.Split(pth, "/") {
		if elem == ".." {
			allErrs = append(allErrs, field.Invalid(p, pth, "must not contain '..'"))
			break
		}
	}
	return allErrs
}
