package podruntime

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// isNotFound reports a CRI NotFound: on stop and remove it means done.
func isNotFound(err error) bool {
	return err != nil && status.Code(err) == codes.NotFound
}

// Waiting reasons of containers, as upstream reports them.
const (
	ReasonContainerCreating     = "ContainerCreating"
	ReasonPodInitializing       = "PodInitializing"
	ReasonCrashLoopBackOff      = "CrashLoopBackOff"
	ReasonErrImagePull          = "ErrImagePull"
	ReasonImagePullBackOff      = "ImagePullBackOff"
	ReasonErrImageNeverPull     = "ErrImageNeverPull"
	ReasonInvalidImageName      = "InvalidImageName"
	ReasonCreateContainerConfig = "CreateContainerConfigError"
	ReasonCreateContainer       = "CreateContainerError"
	ReasonRunContainer          = "RunContainerError"
)

// ContainerError says why a container is waiting instead of running.
type ContainerError struct {
	Reason  string
	Message string
}

func (e *ContainerError) Error() string { return e.Reason + ": " + e.Message }
