package podruntime

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/loglinks"
)

// LogLinks keeps the container log links log shippers read
// (/var/log/containers); *loglinks.Links fits.
type LogLinks interface {
	Link(c loglinks.Container, logPath string) error
	Unlink(c loglinks.Container) error
}

// noLinks is LogLinks when none are kept (in-process tests).
type noLinks struct{}

func (noLinks) Link(loglinks.Container, string) error { return nil }
func (noLinks) Unlink(loglinks.Container) error       { return nil }

// linkLog links a container that has just started to its log file, as
// upstream does after StartContainer. A failure is logged: the container
// runs all the same.
func (m *Manager) linkLog(pod *v1.Pod, name, id, logPath string) {
	c := loglinks.Container{Pod: pod.Name, Namespace: pod.Namespace, Name: name, ID: id}
	if err := m.cfg.LogLinks.Link(c, logPath); err != nil {
		klog.ErrorS(err, "Failed to link the container's log", "pod", klog.KObj(pod), "container", name, "id", id)
	}
}

// unlinkLog removes the log link of a container that was removed.
func (m *Manager) unlinkLog(namespace, pod, name, id string) {
	c := loglinks.Container{Pod: pod, Namespace: namespace, Name: name, ID: id}
	if err := m.cfg.LogLinks.Unlink(c); err != nil {
		klog.ErrorS(err, "Failed to remove a removed container's log link", "pod", klog.KRef(namespace, pod), "container", name, "id", id)
	}
}
