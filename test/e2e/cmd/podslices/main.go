// Command podslices drives Skiff's cgroup manager (internal/podcgroups) with the
// systemd driver from inside a test's systemd namespaces: "ensure UID"
// sets up the QoS slices and a Burstable pod's slice (250m/500m CPU,
// 64Mi), "remove UID" removes the pod's slice, "list" prints the pod UIDs
// found. It prints the pod's cgroup parent, as CRI would get it.
package main

import (
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/podcgroups"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "podslices:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("usage: podslices ensure|remove UID | list")
	}
	m, err := podcgroups.New(podcgroups.Config{
		Root: "/sys/fs/cgroup", CgroupRoot: "/", PerQOS: true, Driver: podcgroups.DriverSystemd, EnforcePods: true,
		Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")},
		CPUCFSQuota: true, CPUCFSQuotaPeriod: 100 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	if err := m.Start(); err != nil {
		return err
	}
	switch args[0] {
	case "list":
		uids, err := m.PodUIDs()
		fmt.Println(uids)
		return err
	case "ensure":
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID(args[1])}}
		pod.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		}}}
		fmt.Println(m.PodCgroupParent(pod))
		return m.EnsurePod(pod)
	case "remove":
		return m.RemovePod(types.UID(args[1]))
	}
	return fmt.Errorf("unknown command %q", args[0])
}
