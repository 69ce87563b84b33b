package atomic

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
)

// createUserVisibleLinks makes <name> -> ..data/<name> for every top-level
// element of the payload. Nested paths need no link of their own: they
// are reached through their top-level directory's link.
func createUserVisibleLinks(root *os.Root, payload map[string]File) error {
	names := make(map[string]bool)
	for p := range payload {
		names[topLevel(p)] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, name := range sorted {
		if err := ensureLink(root, name, join(dataDirName, name)); err != nil {
			return err
		}
	}
	return nil
}

func ensureLink(root *os.Root, name, target string) error {
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := root.Symlink(target, name); err != nil {
			return fmt.Errorf("creating the link %s: %w", name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("checking %s: %w", name, err)
	case fi.Mode()&fs.ModeSymlink == 0:
		// Never delete what the writer did not make.
		return fmt.Errorf("%s exists in the volume and is not a symlink", name)
	}
	if cur, err := root.Readlink(name); err == nil && cur == target {
		return nil
	}
	// A link to somewhere else: replace it in one rename, as for ..data.
	tmp := "..link_tmp"
	_ = root.Remove(tmp)
	if err := root.Symlink(target, tmp); err != nil {
		return fmt.Errorf("creating the link %s: %w", name, err)
	}
	if err := root.Rename(tmp, name); err != nil {
		err = fmt.Errorf("replacing the link %s: %w", name, err)
		if rerr := root.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("roll back: removing %s: %w", tmp, rerr))
		}
		return err
	}
	return nil
}

// removeUserVisibleLinks removes the links of top-level paths the new
// payload dropped. Only symlinks are removed; nested stale paths went away
// with the old version's directory.
func removeUserVisibleLinks(root *os.Root, stale []string) error {
	var errs []error
	for _, p := range stale {
		if strings.Contains(p, "/") {
			continue
		}
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("checking %s: %w", p, err))
			continue
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing the link %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
