package nodestatus

import (
	"context"
	"sort"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// maxNamesPerImage is how many names (digests, then tags) each image of
// status.images carries, as upstream.
const maxNamesPerImage = 5

// ImageLister lists the runtime's images; k8s.io/cri-api's
// ImageManagerService satisfies it.
type ImageLister interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
}

// setImages reports the runtime's images in status.images as upstream
// does: largest first (ties by ID, descending), at most max of them (-1:
// all; 0: none), each with up to five names, repo digests before tags. When
// listing fails the list is emptied, as upstream.
func setImages(ctx context.Context, node *v1.Node, lister ImageLister, max int32) {
	images, err := lister.ListImages(ctx, &runtimeapi.ImageFilter{})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to list images for the node status", "node", klog.KObj(node))
		node.Status.Images = nil
		return
	}
	sort.SliceStable(images, func(i, j int) bool {
		if images[i].GetSize() == images[j].GetSize() {
			return images[i].GetId() > images[j].GetId()
		}
		return images[i].GetSize() > images[j].GetSize()
	})
	if max > -1 && int(max) < len(images) {
		images = images[:max]
	}
	var out []v1.ContainerImage
	for _, img := range images {
		names := append(append([]string{}, img.GetRepoDigests()...), img.GetRepoTags()...)
		if len(names) > maxNamesPerImage {
			names = names[:maxNamesPerImage]
		}
		out = append(out, v1.ContainerImage{Names: names, SizeBytes: int64(img.GetSize())})
	}
	node.Status.Images = out
}
