package cri

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func TestDetectFeatures(t *testing.T) {
	fs := func(mp string) []*runtimeapi.FilesystemUsage {
		return []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: mp}}}
	}
	unimplemented := status.Error(codes.Unimplemented, "not here")

	rt, img := critest.NewFakeRuntimeService(), critest.NewFakeImageService()
	img.SetFakeFilesystemUsage(fs("/var/lib/images"))
	img.SetFakeContainerFilesystemUsage(fs("/var/lib/containers"))
	f := DetectFeatures(context.Background(), rt, img)
	if f.SandboxStats != nil || f.ContainerStats != nil || f.ImageFsErr != nil ||
		f.ImageFs != "/var/lib/images" || f.ContainerFs != "/var/lib/containers" {
		t.Errorf("everything answered: %+v", f)
	}

	rt, img = critest.NewFakeRuntimeService(), critest.NewFakeImageService()
	rt.InjectError("ListPodSandboxStats", unimplemented)
	rt.InjectError("ListContainerStats", unimplemented)
	img.InjectError("ImageFsInfo", errors.New("boom"))
	f = DetectFeatures(context.Background(), rt, img)
	if status.Code(f.SandboxStats) != codes.Unimplemented || status.Code(f.ContainerStats) != codes.Unimplemented ||
		f.ImageFsErr == nil || f.ImageFs != "" || f.ContainerFs != "" {
		t.Errorf("nothing answered: %+v", f)
	}

	rt, img = critest.NewFakeRuntimeService(), critest.NewFakeImageService()
	f = DetectFeatures(context.Background(), rt, img)
	if f.ImageFsErr == nil {
		t.Errorf("no image filesystem reported, yet no error: %+v", f)
	}
}
