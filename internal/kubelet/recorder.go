package kubelet

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

// logRecorder writes events to the log: Skiff's recorder with no apiserver.
type logRecorder struct{}

func (logRecorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...interface{}) {
	ref := klog.ObjectRef{}
	if m, err := meta.Accessor(obj); err == nil {
		ref = klog.KRef(m.GetNamespace(), m.GetName())
	}
	klog.InfoS("Event", "object", ref, "type", eventtype, "reason", reason, "message", fmt.Sprintf(format, args...))
}
