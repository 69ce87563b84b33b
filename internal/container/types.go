// Package container holds the runtime-neutral view of what runs on the node:
// the status of a pod's sandboxes and containers as the runtime reports them,
// and a cache of those statuses shared by PLEG and the pod workers.
package container

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// State is a container's state as the runtime reports it.
type State string

const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateExited  State = "exited"
	StateUnknown State = "unknown"
)

// StateFromCRI maps a CRI container state to State.
func StateFromCRI(s runtimeapi.ContainerState) State {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return StateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return StateExited
	}
	return StateUnknown
}

// ContainerStatus is one container instance (one attempt) of a pod.
type ContainerStatus struct {
	ID           string // runtime ID, without the "containerd://" scheme
	Name         string
	State        State
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	ExitCode     int32
	Image        string // image as the pod spec names it
	ImageRef     string // resolved image ID (digest)
	ImageID      string // image ID as the runtime reports it
	Hash         uint64 // hash of the container spec it was created from
	RestartCount int
	Reason       string
	Message      string
	LogPath      string // the container's CRI log file on the host
	// TerminationMessageFile is the termination message file Skiff made
	// for the container and mounted at its terminationMessagePath; empty
	// without one (a volume mounted at that path is never it).
	TerminationMessageFile string
	// GracePeriod is the pod's termination grace period when the container
	// was made: what stopping it takes when the pod spec is long gone.
	GracePeriod *int64
	// Resources are the CPU and memory settings the runtime reports the
	// container runs with; nil when it reports none (containerd 1.6).
	Resources *runtimeapi.LinuxContainerResources
}

// PodStatus is what the runtime knows of one pod.
type PodStatus struct {
	ID        types.UID
	Name      string
	Namespace string
	IPs       []string
	// Sandboxes and Containers are sorted newest first.
	Sandboxes  []*runtimeapi.PodSandboxStatus
	Containers []*ContainerStatus
}

// FindContainer returns the newest instance of the named container, or nil.
func (s *PodStatus) FindContainer(name string) *ContainerStatus {
	if s == nil {
		return nil
	}
	for _, c := range s.Containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Instances returns every instance of the named container, newest first.
func (s *PodStatus) Instances(name string) []*ContainerStatus {
	var out []*ContainerStatus
	if s == nil {
		return out
	}
	for _, c := range s.Containers {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// SandboxReady reports whether the newest sandbox is ready.
func (s *PodStatus) SandboxReady() bool {
	return s != nil && len(s.Sandboxes) > 0 &&
		s.Sandboxes[0].State == runtimeapi.PodSandboxState_SANDBOX_READY
}

// Pod is the light view of a pod that relisting produces: IDs and states only.
type Pod struct {
	ID         types.UID
	Name       string
	Namespace  string
	Sandboxes  []Instance
	Containers []Instance
}

// Instance is one sandbox or container in a relist.
type Instance struct {
	ID    string
	Name  string // container name; empty for sandboxes
	State State
}

// PodRef identifies a pod by UID, name and namespace: what the runtime's
// labels say of a sandbox or container, and what a pod worker needs of a
// pod no source knows.
type PodRef struct {
	UID       types.UID
	Name      string
	Namespace string
}
