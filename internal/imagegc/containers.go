package imagegc

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/cri"
)

// RemoveDeadContainers removes what dead containers and sandboxes hold on
// disk, as upstream's DeleteAllUnusedContainers under disk pressure: every
// exited container and not-ready sandbox of a pod that no longer runs
// (finished, evicted, deleted: active false), and of a running pod the
// exited containers but the newest of each name, which keeps its restart
// count and last state. removed, if set, hears of each container removed.
func RemoveDeadContainers(ctx context.Context, rt internalapi.RuntimeService, active func(types.UID) bool, removed func(*runtimeapi.Container)) error {
	containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	type key struct {
		uid  types.UID
		name string
	}
	dead := map[key][]*runtimeapi.Container{}
	left := map[string]int{} // containers left per sandbox
	for _, c := range containers {
		left[c.PodSandboxId]++
		if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			continue
		}
		k := key{types.UID(c.Labels[cri.PodUIDLabel]), c.Labels[cri.ContainerNameLabel]}
		dead[k] = append(dead[k], c)
	}
	var errs []error
	count := 0
	for k, cs := range dead {
		sort.Slice(cs, func(i, j int) bool { return cs[i].CreatedAt > cs[j].CreatedAt })
		if k.uid != "" && active(k.uid) {
			cs = cs[1:]
		}
		for _, c := range cs {
			if err := rt.RemoveContainer(ctx, c.Id); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("remove container %s: %w", c.Id, err))
				continue
			}
			left[c.PodSandboxId]--
			count++
			if removed != nil {
				removed(c)
			}
		}
	}
	sandboxes, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list sandboxes: %w", err))...)
	}
	for _, sb := range sandboxes {
		uid := types.UID(sb.Labels[cri.PodUIDLabel])
		if left[sb.Id] > 0 || uid != "" && active(uid) {
			continue
		}
		if err := rt.RemovePodSandbox(ctx, sb.Id); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.Id, err))
			continue
		}
		count++
	}
	klog.InfoS("Removed dead containers and sandboxes", "count", count)
	return errors.Join(errs...)
}

func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }
