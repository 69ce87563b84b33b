package podspec

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Default fills in the API defaults of a v1 Pod in place, as the apiserver
// would on create. Fields that are already set are left alone, so Default is
// idempotent.
func Default(pod *v1.Pod) {
	if pod == nil {
		return
	}
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	defaultPod(pod)
	defaultPodSpec(&pod.Spec)
	for i := range pod.Spec.Volumes {
		defaultVolume(&pod.Spec.Volumes[i])
	}
	ForEachContainer(&pod.Spec, func(c *v1.Container) { defaultContainer(c) })
	roundUpResources(pod.Spec.Overhead)
	if pod.Spec.Resources != nil {
		roundUpResources(pod.Spec.Resources.Limits)
		roundUpResources(pod.Spec.Resources.Requests)
	}
}

// defaultPod holds the defaults upstream applies to Pods only (not to pod
// templates).
func defaultPod(pod *v1.Pod) {
	spec := &pod.Spec
	// A container that sets only limits gets requests equal to them.
	for _, cs := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			requestsFromLimits(&cs[i].Resources)
		}
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr(v1.DefaultEnableServiceLinks)
	}
	if spec.HostNetwork {
		// With host networking a container port is a host port.
		for _, cs := range [][]v1.Container{spec.InitContainers, spec.Containers} {
			for i := range cs {
				for j := range cs[i].Ports {
					if p := &cs[i].Ports[j]; p.HostPort == 0 {
						p.HostPort = p.ContainerPort
					}
				}
			}
		}
	}
}

func defaultPodSpec(spec *v1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr(int64(v1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = v1.DefaultSchedulerName
	}
}

// ForEachContainer calls fn for every init, app and ephemeral container.
// EphemeralContainerCommon has the same fields as Container, which makes the
// conversion legal and lets one function serve all three kinds.
func ForEachContainer(spec *v1.PodSpec, fn func(c *v1.Container)) {
	for i := range spec.InitContainers {
		fn(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		fn(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		fn((*v1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
}

// Container returns the init, app or ephemeral container of that name,
// or nil.
func Container(spec *v1.PodSpec, name string) *v1.Container {
	var found *v1.Container
	ForEachContainer(spec, func(c *v1.Container) {
		if found == nil && c.Name == name {
			found = c
		}
	})
	return found
}

// IsSidecar reports whether c is a sidecar: an init container with
// restartPolicy Always, which keeps running beside the app containers.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

func defaultContainer(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil {
			defaultFieldSelector(vf.FieldRef)
		}
	}
	roundUpResources(c.Resources.Limits)
	roundUpResources(c.Resources.Requests)
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if c.Lifecycle != nil {
		for _, h := range []*v1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

func defaultProbe(p *v1.Probe) {
	if p == nil {
		return
	}
	setIfZero(&p.TimeoutSeconds, 1)
	setIfZero(&p.PeriodSeconds, 10)
	setIfZero(&p.SuccessThreshold, 1)
	setIfZero(&p.FailureThreshold, 3)
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr("")
	}
}

func defaultHTTPGet(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

func defaultFieldSelector(s *v1.ObjectFieldSelector) {
	if s.APIVersion == "" {
		s.APIVersion = "v1"
	}
}

// requestsFromLimits copies every limit without a matching request into the
// requests, so a limits-only container is Guaranteed as upstream.
func requestsFromLimits(r *v1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = make(v1.ResourceList, len(r.Limits))
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = q.DeepCopy()
		}
	}
}

// roundUpResources rounds quantities up to milli precision, as the API does
// for compatibility.
func roundUpResources(l v1.ResourceList) {
	for name, q := range l {
		q.RoundUp(-3)
		l[name] = q
	}
}

func setIfZero(v *int32, def int32) {
	if *v == 0 {
		*v = def
	}
}

func ptr[T any](v T) *T { return &v }
