package atomic

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
)

// groupReadMask is what upstream's fsGroup ownership change adds to every
// file of a read-only volume (roMask), and dirExtraMask what it adds to
// directories on top (execMask and setgid).
const (
	groupReadMask = 0o440
	dirExtraMask  = 0o110 | fs.ModeSetgid
)

// fileMode is the mode a file of the payload ends up with on disk.
func fileMode(f File) fs.FileMode {
	m := fs.FileMode(f.Mode) & fs.ModePerm
	if f.FsGroup != nil {
		m |= groupReadMask
	}
	return m
}

// pathsToRemove lists the paths of the current version (files and
// directories, relative to it) that the new payload no longer has, sorted.
func pathsToRemove(root *os.Root, oldTs string, payload map[string]File) ([]string, error) {
	keep := make(map[string]bool)
	for p := range payload {
		// Every parent directory of a new file stays too.
		for sub := p; sub != "." && sub != ""; sub = path.Dir(sub) {
			keep[sub] = true
		}
	}
	var stale []string
	// WalkDir does not descend into symlinks, so a link planted in an old
	// version cannot lead the walk elsewhere.
	err := fs.WalkDir(root.FS(), oldTs, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, oldTs), "/")
		if rel != "" && !keep[rel] {
			stale = append(stale, rel)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		// ..data pointed at a directory that is gone: nothing to compare.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the current version %s: %w", oldTs, err)
	}
	sort.Strings(stale)
	return stale, nil
}

// payloadChanged reports whether any file of the payload differs from the
// current version in content, mode or requested ownership. Upstream compares
// content only; modes and owners are compared here so that a changed mode
// takes effect too.
func payloadChanged(root *os.Root, oldTs string, payload map[string]File) (bool, error) {
	for p, f := range payload {
		changed, err := fileChanged(root, join(oldTs, p), f)
		if err != nil || changed {
			return changed, err
		}
	}
	return false, nil
}

func fileChanged(root *os.Root, name string, f File) (bool, error) {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != fileMode(f) {
		return true, nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if f.FsUser != nil && int64(st.Uid) != *f.FsUser {
			return true, nil
		}
		if f.FsGroup != nil && int64(st.Gid) != *f.FsGroup {
			return true, nil
		}
	}
	if fi.Size() != int64(len(f.Data)) {
		return true, nil
	}
	onDisk, err := root.ReadFile(name)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", name, err)
	}
	return !bytes.Equal(onDisk, f.Data), nil
}
