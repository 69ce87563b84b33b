package podruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Security configures how pod security contexts map to CRI.
type Security struct {
	// SeccompDefault makes RuntimeDefault the profile of containers that
	// set none (the config's seccompDefault); otherwise they are Unconfined.
	SeccompDefault bool
	// SeccompRoot holds Localhost profiles: <root-dir>/seccomp.
	SeccompRoot string
}

// Paths the runtime masks or makes read-only in a container's /proc and
// /sys unless it is privileged or asks for an unmasked /proc; the same set
// as upstream (and Docker).
var (
	defaultMaskedPaths = []string{
		"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// EffectiveSecurityContext merges the pod's security context into the
// container's: the container's own fields win, as documented.
func EffectiveSecurityContext(pod *v1.Pod, c *v1.Container) *v1.SecurityContext {
	out := &v1.SecurityContext{}
	if psc := pod.Spec.SecurityContext; psc != nil {
		out.SELinuxOptions = psc.SELinuxOptions
		out.RunAsUser = psc.RunAsUser
		out.RunAsGroup = psc.RunAsGroup
		out.RunAsNonRoot = psc.RunAsNonRoot
		out.SeccompProfile = psc.SeccompProfile
		out.AppArmorProfile = psc.AppArmorProfile
	}
	sc := c.SecurityContext
	if sc == nil {
		return out
	}
	set := func(dst **int64, src *int64) {
		if src != nil {
			*dst = src
		}
	}
	set(&out.RunAsUser, sc.RunAsUser)
	set(&out.RunAsGroup, sc.RunAsGroup)
	if sc.RunAsNonRoot != nil {
		out.RunAsNonRoot = sc.RunAsNonRoot
	}
	if sc.SELinuxOptions != nil {
		out.SELinuxOptions = sc.SELinuxOptions
	}
	if sc.SeccompProfile != nil {
		out.SeccompProfile = sc.SeccompProfile
	}
	if sc.AppArmorProfile != nil {
		out.AppArmorProfile = sc.AppArmorProfile
	}
	out.Capabilities = sc.Capabilities
	out.Privileged = sc.Privileged
	out.ReadOnlyRootFilesystem = sc.ReadOnlyRootFilesystem
	out.AllowPrivilegeEscalation = sc.AllowPrivilegeEscalation
	out.ProcMount = sc.ProcMount
	return out
}

// containerSecurity is the CRI security context of container c.
func (s Security) containerSecurity(pod *v1.Pod, c *v1.Container) (*runtimeapi.LinuxContainerSecurityContext, error) {
	sc := EffectiveSecurityContext(pod, c)
	privileged := sc.Privileged != nil && *sc.Privileged
	out := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions:   namespaceOptions(pod),
		Privileged:         privileged,
		RunAsUser:          int64Value(sc.RunAsUser),
		RunAsGroup:         int64Value(sc.RunAsGroup),
		ReadonlyRootfs:     sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem,
		SupplementalGroups: supplementalGroups(pod),
		// Default is to allow escalation: only an explicit false sets it.
		NoNewPrivs:     sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		SelinuxOptions: selinuxOptions(sc.SELinuxOptions),
	}
	if psc := pod.Spec.SecurityContext; psc != nil && psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
		out.SupplementalGroupsPolicy = runtimeapi.SupplementalGroupsPolicy_Strict
	}
	if caps := sc.Capabilities; caps != nil {
		out.Capabilities = &runtimeapi.Capability{}
		for _, c := range caps.Add {
			out.Capabilities.AddCapabilities = append(out.Capabilities.AddCapabilities, string(c))
		}
		for _, c := range caps.Drop {
			out.Capabilities.DropCapabilities = append(out.Capabilities.DropCapabilities, string(c))
		}
	}
	if !privileged && (sc.ProcMount == nil || *sc.ProcMount != v1.UnmaskedProcMount) {
		out.MaskedPaths = defaultMaskedPaths
		out.ReadonlyPaths = defaultReadonlyPaths
	}
	sp, err := s.seccomp(sc.SeccompProfile)
	if err != nil {
		return nil, err
	}
	out.Seccomp = sp
	//lint:ignore SA1019 runtimes older than the Seccomp field read only this one
	out.SeccompProfilePath = legacySeccompPath(sp)
	out.Apparmor = apparmor(sc.AppArmorProfile)
	return out, nil
}

// sandboxSecurity is the CRI security context of the pod's sandbox.
func (s Security) sandboxSecurity(pod *v1.Pod) *runtimeapi.LinuxSandboxSecurityContext {
	out := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions:   namespaceOptions(pod),
		SupplementalGroups: supplementalGroups(pod),
		// A privileged container needs a privileged sandbox in containerd.
		Privileged: anyPrivileged(pod),
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		out.RunAsUser = int64Value(psc.RunAsUser)
		out.RunAsGroup = int64Value(psc.RunAsGroup)
		out.SelinuxOptions = selinuxOptions(psc.SELinuxOptions)
		if psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
			out.SupplementalGroupsPolicy = runtimeapi.SupplementalGroupsPolicy_Strict
		}
		if sp, err := s.seccomp(psc.SeccompProfile); err == nil {
			out.Seccomp = sp
			//lint:ignore SA1019 runtimes older than the Seccomp field read only this one
			out.SeccompProfilePath = legacySeccompPath(sp)
		}
	} else if sp, err := s.seccomp(nil); err == nil {
		out.Seccomp = sp
		//lint:ignore SA1019 runtimes older than the Seccomp field read only this one
		out.SeccompProfilePath = legacySeccompPath(sp)
	}
	return out
}

// checkUserNamespace refuses hostUsers: false, which Skiff cannot honor
// yet: the pod would run with the host's users, silently.
func checkUserNamespace(pod *v1.Pod) error {
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		return fmt.Errorf("hostUsers: false (user namespaces) is not supported by this version of Skiff")
	}
	return nil
}

// sysctls are the pod's sysctls for the sandbox; admission has vetted them.
func sysctls(pod *v1.Pod) map[string]string {
	psc := pod.Spec.SecurityContext
	if psc == nil || len(psc.Sysctls) == 0 {
		return nil
	}
	out := make(map[string]string, len(psc.Sysctls))
	for _, s := range psc.Sysctls {
		out[s.Name] = s.Value
	}
	return out
}

// supplementalGroups are the pod's supplementalGroups plus its fsGroup,
// which makes volumes owned by fsGroup writable for every container.
func supplementalGroups(pod *v1.Pod) []int64 {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return nil
	}
	groups := append([]int64(nil), psc.SupplementalGroups...)
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	return groups
}

func anyPrivileged(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if sc := cs[i].SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
				return true
			}
		}
	}
	return false
}

// seccomp maps a seccomp profile; nil means the kubelet's default.
func (s Security) seccomp(p *v1.SeccompProfile) (*runtimeapi.SecurityProfile, error) {
	if p == nil {
		if s.SeccompDefault {
			return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || !filepath.IsLocal(*p.LocalhostProfile) {
			return nil, fmt.Errorf("seccomp Localhost profile must be a relative path inside %s", s.SeccompRoot)
		}
		path := filepath.Join(s.SeccompRoot, *p.LocalhostProfile)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("seccomp Localhost profile: %w", err)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: path}, nil
	}
	return nil, fmt.Errorf("unsupported seccomp profile type %q", p.Type)
}

// legacySeccompPath is the deprecated string form some runtimes still read.
func legacySeccompPath(p *runtimeapi.SecurityProfile) string {
	switch p.GetProfileType() {
	case runtimeapi.SecurityProfile_RuntimeDefault:
		return "runtime/default"
	case runtimeapi.SecurityProfile_Localhost:
		return "localhost/" + p.LocalhostRef
	}
	return "unconfined"
}

// apparmor maps an AppArmor profile; admission has refused profiles a host
// without AppArmor cannot enforce. nil leaves the runtime's default.
func apparmor(p *v1.AppArmorProfile) *runtimeapi.SecurityProfile {
	if p == nil {
		return nil
	}
	switch p.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case v1.AppArmorProfileTypeLocalhost:
		ref := ""
		if p.LocalhostProfile != nil {
			ref = *p.LocalhostProfile
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
}

func selinuxOptions(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

func int64Value(p *int64) *runtimeapi.Int64Value {
	if p == nil {
		return nil
	}
	return &runtimeapi.Int64Value{Value: *p}
}

// verifyNonRoot refuses to run a container with runAsNonRoot whose user
// would be root: its runAsUser, or else its image's user (none means root).
func (m *Manager) verifyNonRoot(ctx context.Context, pod *v1.Pod, c *v1.Container, imageRef string) *ContainerError {
	sc := EffectiveSecurityContext(pod, c)
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	who := fmt.Sprintf("pod: %q, container: %s", podDesc(pod), c.Name)
	if sc.RunAsUser != nil {
		if *sc.RunAsUser == 0 {
			return &ContainerError{ReasonCreateContainerConfig, fmt.Sprintf("container's runAsUser breaks non-root policy (%s)", who)}
		}
		return nil
	}
	resp, err := m.cfg.CRI.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: imageRef}, false)
	if err != nil || resp.GetImage() == nil {
		return &ContainerError{ReasonCreateContainerConfig, fmt.Sprintf("cannot read the user of image %q to verify runAsNonRoot: %v", c.Image, err)}
	}
	img := resp.Image
	switch {
	case img.Uid != nil && img.Uid.Value == 0, img.Uid == nil && img.Username == "":
		return &ContainerError{ReasonCreateContainerConfig, fmt.Sprintf("container has runAsNonRoot and image will run as root (%s)", who)}
	case img.Uid == nil:
		return &ContainerError{ReasonCreateContainerConfig, fmt.Sprintf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (%s)", img.Username, who)}
	}
	return nil
}

// podDesc names a pod as upstream's messages do: name_namespace(uid).
func podDesc(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// secureContainer completes a container's CRI config with its security
// context and resources, after checking runAsNonRoot against the image.
func (m *Manager) secureContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, imageRef string, cfg *runtimeapi.ContainerConfig) *ContainerError {
	if cerr := m.verifyNonRoot(ctx, pod, c, imageRef); cerr != nil {
		return cerr
	}
	sc, err := m.cfg.Security.containerSecurity(pod, c)
	if err != nil {
		return &ContainerError{ReasonCreateContainerConfig, err.Error()}
	}
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	cfg.Linux.SecurityContext = sc
	if m.cfg.Resources != nil {
		cfg.Linux.Resources = m.cfg.Resources.ContainerResources(pod, c)
	}
	return nil
}
