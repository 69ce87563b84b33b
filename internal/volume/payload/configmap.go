package payload

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
)

// ConfigMap returns the files of a configMap volume. cm is nil when the
// ConfigMap does not exist: an empty volume if the source is optional, else
// the error upstream reports (`configmap "x" not found`, an API NotFound
// error). Without items every key of data and binaryData becomes a file
// with defaultMode; with items only those keys are projected, each to its
// path and mode, and a missing key fails the volume unless it is optional.
func ConfigMap(source *v1.ConfigMapVolumeSource, cm *v1.ConfigMap) (map[string]atomic.File, error) {
	optional := isTrue(source.Optional)
	if cm == nil {
		if !optional {
			return nil, apierrors.NewNotFound(v1.Resource("configmap"), source.Name)
		}
		cm = &v1.ConfigMap{}
	}
	return configMapFiles(source.Items, cm, modeOr(source.DefaultMode, DefaultMode), optional)
}

func configMapFiles(items []v1.KeyToPath, cm *v1.ConfigMap, defaultMode int32, optional bool) (map[string]atomic.File, error) {
	files := make(map[string]atomic.File, len(cm.Data)+len(cm.BinaryData))
	if len(items) == 0 {
		for k, v := range cm.Data {
			files[k] = atomic.File{Data: []byte(v), Mode: defaultMode}
		}
		for k, v := range cm.BinaryData {
			files[k] = atomic.File{Data: v, Mode: defaultMode}
		}
		return files, nil
	}
	for _, item := range items {
		var data []byte
		if s, ok := cm.Data[item.Key]; ok {
			data = []byte(s)
		} else if b, ok := cm.BinaryData[item.Key]; ok {
			data = b
		} else {
			if optional {
				continue
			}
			return nil, fmt.Errorf("configmap references non-existent config key: %s", item.Key)
		}
		files[item.Path] = atomic.File{Data: data, Mode: modeOr(item.Mode, defaultMode)}
	}
	return files, nil
}
