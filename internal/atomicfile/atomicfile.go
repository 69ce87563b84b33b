// Package atomicfile replaces a file whole, so that a crash mid-write
// leaves the previous content: the kubelet's checkpoints and state files.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data: a temporary file beside it, written,
// synced and given perm, renamed over it. On error the temporary file is
// removed and path is as it was.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), perm)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	return err
}
