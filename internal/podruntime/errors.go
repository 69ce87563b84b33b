package podruntime

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
