package registry

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildImage writes an OCI archive of a one-layer image to out with
// hack/ociimage, e.g. BuildImage(ctx, out, "x/busybox:1", "--add",
// "/bin/busybox:/bin/busybox", "--busybox-links", "--cmd", "sh").
func BuildImage(ctx context.Context, out, name string, args ...string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "ociimage")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "ociimage")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./hack/ociimage")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build hack/ociimage: %w: %s", err, b)
	}
	run := exec.CommandContext(ctx, bin, append([]string{"--name", name, "-o", out}, args...)...)
	if b, err := run.CombinedOutput(); err != nil {
		return fmt.Errorf("ociimage: %w: %s", err, b)
	}
	return nil
}
