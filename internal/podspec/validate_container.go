package podspec

import (
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validateContainers(spec *v1.PodSpec, volumes map[string]*v1.Volume, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(spec.Containers) == 0 {
		allErrs = append(allErrs, field.Required(p.Child("containers"), "must have at least one container"))
	}
	// Init and app containers share one name space: the runtime and the
	// status report key containers by name.
	names := sets.New[string]()
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		cp := p.Child("initContainers").Index(i)
		allErrs = append(allErrs, validateContainerName(c.Name, names, cp.Child("name"))...)
		allErrs = append(allErrs, validateContainer(c, spec, volumes, cp)...)
		allErrs = append(allErrs, validateInitContainerRules(c, cp)...)
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		cp := p.Child("containers").Index(i)
		allErrs = append(allErrs, validateContainerName(c.Name, names, cp.Child("name"))...)
		allErrs = append(allErrs, validateContainer(c, spec, volumes, cp)...)
		if c.RestartPolicy != nil {
			allErrs = append(allErrs, field.Forbidden(cp.Child("restartPolicy"), "may not be set for non-init containers"))
		}
	}
	return allErrs
}

func validateContainerName(name string, seen sets.Set[string], p *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(p, "")}
	case seen.Has(name):
		return field.ErrorList{field.Duplicate(p, name)}
	}
	seen.Insert(name)
	return invalidMsgs(p, name, validation.IsDNS1123Label(name))
}

// validateInitContainerRules enforces that only sidecars (restartPolicy
// Always) may have probes or lifecycle hooks: a plain init container runs to
// completion before anything would act on them.
func validateInitContainerRules(c *v1.Container, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if c.RestartPolicy != nil {
		if *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			allErrs = append(allErrs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy,
				[]v1.ContainerRestartPolicy{v1.ContainerRestartPolicyAlways}))
		}
		return allErrs
	}
	const msg = "may not be set for init containers without restartPolicy=Always"
	if c.Lifecycle != nil {
		allErrs = append(allErrs, field.Forbidden(p.Child("lifecycle"), msg))
	}
	if c.LivenessProbe != nil {
		allErrs = append(allErrs, field.Forbidden(p.Child("livenessProbe"), msg))
	}
	if c.ReadinessProbe != nil {
		allErrs = append(allErrs, field.Forbidden(p.Child("readinessProbe"), msg))
	}
	if c.StartupProbe != nil {
		allErrs = append(allErrs, field.Forbidden(p.Child("startupProbe"), msg))
	}
	return allErrs
}

var (
	validPullPolicies    = []v1.PullPolicy{v1.PullAlways, v1.PullNever, v1.PullIfNotPresent}
	validMessagePolicies = []v1.TerminationMessagePolicy{v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError}
)

// validateContainer holds the checks common to init and app containers.
func validateContainer(c *v1.Container, spec *v1.PodSpec, volumes map[string]*v1.Volume, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if c.Image == "" {
		allErrs = append(allErrs, field.Required(p.Child("image"), ""))
	} else if strings.TrimSpace(c.Image) != c.Image {
		allErrs = append(allErrs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	allErrs = append(allErrs, validateEnum(c.ImagePullPolicy, validPullPolicies, p.Child("imagePullPolicy"))...)
	allErrs = append(allErrs, validateEnum(c.TerminationMessagePolicy, validMessagePolicies, p.Child("terminationMessagePolicy"))...)
	if c.RestartPolicyRules != nil {
		allErrs = append(allErrs, field.Forbidden(p.Child("restartPolicyRules"), "not supported"))
	}
	allErrs = append(allErrs, validatePorts(c.Ports, spec.HostNetwork, p.Child("ports"))...)
	allErrs = append(allErrs, validateEnv(c.Env, p.Child("env"))...)
	allErrs = append(allErrs, validateEnvFrom(c.EnvFrom, p.Child("envFrom"))...)
	allErrs = append(allErrs, validateVolumeMounts(c, volumes, p.Child("volumeMounts"))...)
	allErrs = append(allErrs, validateVolumeDevices(c.VolumeDevices, volumes, p.Child("volumeDevices"))...)
	allErrs = append(allErrs, validateResources(&c.Resources, p.Child("resources"))...)
	allErrs = append(allErrs, validateProbes(c, p)...)
	allErrs = append(allErrs, validateLifecycle(c.Lifecycle, p.Child("lifecycle"))...)
	return allErrs
}

var validProtocols = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}

func validatePorts(ports []v1.ContainerPort, hostNetwork bool, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		pp := p.Index(i)
		if port.Name != "" {
			if names.Has(port.Name) {
				allErrs = append(allErrs, field.Duplicate(pp.Child("name"), port.Name))
			}
			names.Insert(port.Name)
			allErrs = append(allErrs, invalidMsgs(pp.Child("name"), port.Name, validation.IsValidPortName(port.Name))...)
		}
		if port.ContainerPort == 0 {
			allErrs = append(allErrs, field.Required(pp.Child("containerPort"), ""))
		} else {
			allErrs = append(allErrs, invalidMsgs(pp.Child("containerPort"), port.ContainerPort, validation.IsValidPortNum(int(port.ContainerPort)))...)
		}
		if port.HostPort != 0 {
			allErrs = append(allErrs, invalidMsgs(pp.Child("hostPort"), port.HostPort, validation.IsValidPortNum(int(port.HostPort)))...)
		}
		if hostNetwork && port.HostPort != port.ContainerPort {
			allErrs = append(allErrs, field.Invalid(pp.Child("hostPort"), port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
		}
		allErrs = append(allErrs, validateEnum(port.Protocol, validProtocols, pp.Child("protocol"))...)
	}
	return allErrs
}

var validPropagation = []v1.MountPropagationMode{v1.MountPropagationNone, v1.MountPropagationHostToContainer, v1.MountPropagationBidirectional}

func validateVolumeMounts(c *v1.Container, volumes map[string]*v1.Volume, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	paths := sets.New[string]()
	for i, m := range c.VolumeMounts {
		mp := p.Index(i)
		if m.Name == "" {
			allErrs = append(allErrs, field.Required(mp.Child("name"), ""))
		} else if volumes[m.Name] == nil {
			allErrs = append(allErrs, field.NotFound(mp.Child("name"), m.Name))
		}
		switch {
		case m.MountPath == "":
			allErrs = append(allErrs, field.Required(mp.Child("mountPath"), ""))
		case !path.IsAbs(m.MountPath):
			allErrs = append(allErrs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path"))
		case paths.Has(path.Clean(m.MountPath)):
			allErrs = append(allErrs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths.Insert(path.Clean(m.MountPath))
		if m.SubPath != "" && m.SubPathExpr != "" {
			allErrs = append(allErrs, field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
		}
		allErrs = append(allErrs, validateSubPath(m.SubPath, mp.Child("subPath"))...)
		allErrs = append(allErrs, validateSubPath(m.SubPathExpr, mp.Child("subPathExpr"))...)
		if m.MountPropagation != nil {
			allErrs = append(allErrs, validateEnum(*m.MountPropagation, validPropagation, mp.Child("mountPropagation"))...)
			if *m.MountPropagation == v1.MountPropagationBidirectional && !isPrivileged(c) {
				allErrs = append(allErrs, field.Forbidden(mp.Child("mountPropagation"), "Bidirectional mount propagation is available only to privileged containers"))
			}
		}
		allErrs = append(allErrs, validateRecursiveReadOnly(m, mp)...)
	}
	return allErrs
}

func validateRecursiveReadOnly(m v1.VolumeMount, p *field.Path) field.ErrorList {
	if m.RecursiveReadOnly == nil {
		return nil
	}
	rro := *m.RecursiveReadOnly
	allErrs := validateEnum(rro, []v1.RecursiveReadOnlyMode{v1.RecursiveReadOnlyDisabled, v1.RecursiveReadOnlyIfPossible, v1.RecursiveReadOnlyEnabled}, p.Child("recursiveReadOnly"))
	if rro != v1.RecursiveReadOnlyDisabled && !m.ReadOnly {
		allErrs = append(allErrs, field.Forbidden(p.Child("recursiveReadOnly"), "may only be specified when readOnly is true"))
	}
	if rro == v1.RecursiveReadOnlyEnabled && m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
		allErrs = append(allErrs, field.Forbidden(p.Child("recursiveReadOnly"), "may only be specified when mountPropagation is None or not specified"))
	}
	return allErrs
}

func validateVolumeDevices(devs []v1.VolumeDevice, volumes map[string]*v1.Volume, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, d := range devs {
		dp := p.Index(i)
		if d.Name == "" {
			allErrs = append(allErrs, field.Required(dp.Child("name"), ""))
		} else if volumes[d.Name] == nil {
			allErrs = append(allErrs, field.NotFound(dp.Child("name"), d.Name))
		}
		if d.DevicePath == "" {
			allErrs = append(allErrs, field.Required(dp.Child("devicePath"), ""))
		} else if !path.IsAbs(d.DevicePath) {
			allErrs = append(allErrs, field.Invalid(dp.Child("devicePath"), d.DevicePath, "must be an absolute path"))
		}
	}
	return allErrs
}

func isPrivileged(c *v1.Container) bool {
	sc := c.SecurityContext
	return sc != nil && sc.Privileged != nil && *sc.Privileged
}
