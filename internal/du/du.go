// Package du measures what a directory tree takes on disk, as du counts
// it. The stats summary (volumes, logs) and local-storage eviction
// (emptyDir sizeLimit) use it, so both see the same figure for a tree.
package du

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
)

// Usage is what a directory tree takes on disk.
type Usage struct {
	// Bytes are the allocated blocks (512 bytes each), not file sizes: a
	// sparse file counts what it holds, a tmpfs what it uses.
	Bytes uint64
	// Inodes counts the tree's files, directories and links, a hard-linked
	// file once.
	Inodes uint64
}

// Dir walks dir as du does: allocated blocks, hard links counted once,
// symlinks not followed.
//
// A missing dir is an error wrapping fs.ErrNotExist: a tree that is not
// there is not an empty one, and the caller decides what that means.
// Entries removed while the walk runs are skipped, so a tree that changes
// under the walk is counted as far as it can be read.
func Dir(dir string) (Usage, error) {
	var u Usage
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != dir {
				return nil // removed during the walk
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return nil // removed since it was listed
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Nlink > 1 && !fi.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		u.Inodes++
		u.Bytes += uint64(st.Blocks) * 512
		return nil
	})
	if err != nil {
		return Usage{}, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	return u, nil
}
