package payload

import (
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
)

// DownwardAPI returns the files of a downwardAPI volume: per item, a pod
// metadata field (fieldRef) or a container's request or limit
// (resourceFieldRef, where an unset limit reads as nodeAllocatable), with
// the item's mode or defaultMode (0644 when unset). Every failing item is
// reported, in one aggregated error, as upstream does.
func DownwardAPI(source *v1.DownwardAPIVolumeSource, pod *v1.Pod, nodeAllocatable v1.ResourceList) (map[string]atomic.File, error) {
	return downwardAPIFiles(source.Items, pod, nodeAllocatable, modeOr(source.DefaultMode, DefaultMode))
}

func downwardAPIFiles(items []v1.DownwardAPIVolumeFile, pod *v1.Pod, nodeAllocatable v1.ResourceList, defaultMode int32) (map[string]atomic.File, error) {
	if pod == nil {
		return nil, errNoPod
	}
	var errs []error
	files := make(map[string]atomic.File, len(items))
	for _, item := range items {
		f := atomic.File{Mode: modeOr(item.Mode, defaultMode)}
		switch {
		case item.FieldRef != nil:
			v, err := PodFieldValue(pod, item.FieldRef.FieldPath)
			if err != nil {
				errs = append(errs, err)
			}
			f.Data = []byte(v)
		case item.ResourceFieldRef != nil:
			v, err := containerResourceValue(item.ResourceFieldRef, pod, nodeAllocatable)
			if err != nil {
				errs = append(errs, err)
			}
			f.Data = []byte(v)
		}
		// An item with neither reference is an empty file, as upstream.
		files[filepath.Clean(item.Path)] = f
	}
	if err := aggregate(errs); err != nil {
		return nil, err
	}
	return files, nil
}
