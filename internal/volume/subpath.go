package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// HostPathFor is the host path a container mounts for a volume and
// subPath: the volume itself, or a path inside it, created as a directory
// when missing, as upstream. A subPath that is absolute, has a ".."
// element, or resolves (through symlinks) outside the volume is refused.
// The returned path has its symlinks resolved, so the bind mount is of the
// checked target.
//
// A container that swaps a checked directory for a symlink between this
// check and the runtime's mount could still race it; upstream closes that
// with bind mounts of /proc/self/fd paths, which is left for later.
func HostPathFor(vol Mounted, subPath string) (string, error) {
	if subPath == "" {
		return vol.HostPath, nil
	}
	if filepath.IsAbs(subPath) {
		return "", fmt.Errorf("subPath %q must be a relative path", subPath)
	}
	for _, el := range strings.Split(filepath.ToSlash(subPath), "/") {
		if el == ".." {
			return "", fmt.Errorf("subPath %q must not contain '..'", subPath)
		}
	}
	base, err := filepath.EvalSymlinks(vol.HostPath)
	if err != nil {
		return "", fmt.Errorf("resolve volume path: %w", err)
	}
	// Resolve what exists, component by component, checking each step.
	cur := base
	parts := strings.Split(filepath.Clean(subPath), string(filepath.Separator))
	for i, el := range parts {
		next := filepath.Join(cur, el)
		if _, err := os.Lstat(next); errors.Is(err, fs.ErrNotExist) {
			rest := filepath.Join(append([]string{cur}, parts[i:]...)...)
			if err := os.MkdirAll(rest, 0o750); err != nil {
				return "", fmt.Errorf("create subPath %q: %w", subPath, err)
			}
			cur = rest
			break
		} else if err != nil {
			return "", fmt.Errorf("subPath %q: %w", subPath, err)
		}
		resolved, err := filepath.EvalSymlinks(next)
		if err != nil {
			return "", fmt.Errorf("subPath %q: %w", subPath, err)
		}
		if !within(base, resolved) {
			return "", fmt.Errorf("subPath %q resolves to %s, outside the volume", subPath, resolved)
		}
		cur = resolved
	}
	final, err := filepath.EvalSymlinks(cur)
	if err != nil || !within(base, final) {
		return "", fmt.Errorf("subPath %q escapes the volume", subPath)
	}
	return final, nil
}

func within(base, p string) bool {
	return p == base || strings.HasPrefix(p, base+string(filepath.Separator))
}
