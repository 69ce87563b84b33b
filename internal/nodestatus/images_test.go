package nodestatus

import (
	"context"
	"errors"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeImages struct {
	images []*runtimeapi.Image
	err    error
}

func (f fakeImages) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return f.images, f.err
}

func TestSetImages(t *testing.T) {
	lister := fakeImages{images: []*runtimeapi.Image{
		{Id: "sha256:small", Size: 10, RepoTags: []string{"small:1"}},
		{Id: "sha256:big", Size: 300, RepoTags: []string{"big:1", "big:2"}, RepoDigests: []string{"big@sha256:d"}},
		{Id: "sha256:tie-a", Size: 50, RepoTags: []string{"a:1"}},
		{Id: "sha256:tie-b", Size: 50, RepoTags: []string{"t1", "t2", "t3", "t4", "t5", "t6"}},
	}}
	names := func(n *v1.Node) [][]string {
		var out [][]string
		for _, img := range n.Status.Images {
			out = append(out, img.Names)
		}
		return out
	}
	node := &v1.Node{}
	setImages(context.Background(), node, lister, -1)
	want := [][]string{{"big@sha256:d", "big:1", "big:2"}, {"t1", "t2", "t3", "t4", "t5"}, {"a:1"}, {"small:1"}}
	if got := names(node); !reflect.DeepEqual(got, want) {
		t.Errorf("no cap: %v, want %v", got, want)
	}
	if node.Status.Images[0].SizeBytes != 300 {
		t.Errorf("size %d", node.Status.Images[0].SizeBytes)
	}
	setImages(context.Background(), node, lister, 2)
	if got := names(node); !reflect.DeepEqual(got, want[:2]) {
		t.Errorf("cap 2: %v", got)
	}
	setImages(context.Background(), node, lister, 0)
	if len(node.Status.Images) != 0 {
		t.Errorf("cap 0: %v", node.Status.Images)
	}
	setImages(context.Background(), node, lister, 50)
	setImages(context.Background(), node, fakeImages{err: errors.New("runtime down")}, 50)
	if len(node.Status.Images) != 0 {
		t.Errorf("after a failed list: %v", node.Status.Images)
	}
}
