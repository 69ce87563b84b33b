// Package action runs one check against a container: the actions that
// probes and lifecycle hooks share. A command through CRI ExecSync, an HTTP
// GET, a TCP connect and a call of the gRPC health checking protocol, each
// judged as the upstream kubelet's pkg/probe judges it.
package action

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Result is the outcome of one check.
type Result int

const (
	// Unknown: the check could not be judged.
	Unknown Result = iota
	Success
	// Warning is a success with something to report, e.g. an HTTP probe
	// that stopped at a redirect to another host.
	Warning
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Warning:
		return "warning"
	case Failure:
		return "failure"
	}
	return "unknown"
}

// KubeVersion is the Kubernetes minor version Skiff speaks for, as probes
// and hooks announce it in their User-Agent.
const KubeVersion = "1.34"

// UserAgent is the User-Agent of checks made for purpose: "probe" gives
// kube-probe/1.34, "lifecycle" kube-lifecycle/1.34, as upstream.
func UserAgent(purpose string) string { return "kube-" + purpose + "/" + KubeVersion }

// maxOutput bounds what is kept of a command's output or a response body
// (upstream's 10 KiB).
const maxOutput = 10 << 10

// ResolvePort turns a probe's or hook's port into a number: an integer as
// is; a string names one of the container's ports, or failing that is a
// number written as a string.
func ResolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	port := -1
	switch p.Type {
	case intstr.Int:
		port = p.IntValue()
	case intstr.String:
		found := false
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				port, found = int(cp.ContainerPort), true
				break
			}
		}
		if !found {
			n, err := strconv.Atoi(p.StrVal)
			if err != nil {
				return -1, fmt.Errorf("port %s not found in container %s", p.StrVal, c.Name)
			}
			port = n
		}
	default:
		return -1, fmt.Errorf("port %+v has no type", p)
	}
	if port <= 0 || port > 65535 {
		return port, fmt.Errorf("invalid port number: %d", port)
	}
	return port, nil
}
