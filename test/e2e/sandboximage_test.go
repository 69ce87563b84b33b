//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// runtimeSandboxImage is the sandbox image the runtime is configured with:
// containerd 1.6's CRI config (its verbose status) names it; 2.x keeps it
// in its images plugin's config, which its status leaves out, and pins it,
// so CRI lists it as the one pinned image with a name.
func runtimeSandboxImage(t *testing.T) string {
	t.Helper()
	resp, err := runtimeSvc.Status(context.Background(), true)
	must(t, err)
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	must(t, json.Unmarshal([]byte(resp.Info["config"]), &cfg))
	if cfg.SandboxImage != "" {
		return cfg.SandboxImage
	}
	logger := klog.Background()
	is, err := remote.NewRemoteImageService(criEndpoint, 30*time.Second, nil, &logger)
	must(t, err)
	imgs, err := is.ListImages(context.Background(), nil)
	must(t, err)
	var pinned []string
	for _, img := range imgs {
		if img.Pinned {
			pinned = append(pinned, img.RepoTags...)
		}
	}
	if len(pinned) != 1 {
		t.Fatalf("the runtime's status names no sandboxImage and it pins %d named images (%q), want 1: %s", len(pinned), pinned, resp.Info["config"])
	}
	return pinned[0]
}

// Skiff is told no sandbox image: the runtime runs every sandbox with its
// own configured one (hack/containerd.sh sets a stock name Skiff's code
// never mentions), as upstream 1.34 does, and pods run.
func TestSandboxImageIsTheRuntimes(t *testing.T) {
	want := runtimeSandboxImage(t)
	if strings.HasPrefix(want, "skiff.local/") {
		t.Fatalf("the runtime's sandbox image %q is one of Skiff's local names; this test needs a name Skiff was never told", want)
	}
	n := newNode(t)
	n.start()
	for _, a := range n.cmd.Args {
		if strings.Contains(a, "pause") || strings.Contains(a, want) {
			t.Fatalf("Skiff was told about a sandbox image: %q", n.cmd.Args)
		}
	}
	n.writeManifest("sandbox.yaml", staticPod("sandbox", sleeper, ""))
	p := n.waitRunning("sandbox-"+nodeName, 90*time.Second)

	sbs := sandboxesOf(t, string(p.UID))
	if len(sbs) != 1 {
		t.Fatalf("pod has %d sandboxes, want 1", len(sbs))
	}
	// containerd's own record of the sandbox container names its image.
	out, err := exec.Command(ctrBin(t), "--address", strings.TrimPrefix(criEndpoint, "unix://"), "-n", "k8s.io",
		"containers", "info", sbs[0].Id).Output()
	must(t, err)
	var info struct {
		Image string `json:"Image"`
	}
	must(t, json.Unmarshal(out, &info))
	if info.Image != want {
		t.Errorf("the sandbox runs image %q, want the runtime's %q", info.Image, want)
	}
}
