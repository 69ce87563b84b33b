package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	v1 "k8s.io/api/core/v1"
)

// setUpHostPath checks (and for the *OrCreate types makes) a hostPath as
// its type says; type "" checks nothing, as documented.
func setUpHostPath(src *v1.HostPathVolumeSource) (Mounted, error) {
	path := src.Path
	typ := v1.HostPathUnset
	if src.Type != nil {
		typ = *src.Type
	}
	fi, err := os.Stat(path)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return Mounted{}, fmt.Errorf("hostPath %s: %w", path, err)
	}
	switch typ {
	case v1.HostPathUnset:
		return Mounted{HostPath: path}, nil
	case v1.HostPathDirectoryOrCreate:
		if missing {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return Mounted{}, fmt.Errorf("create hostPath directory %s: %w", path, err)
			}
			return Mounted{HostPath: path}, nil
		}
		return want(path, fi, fs.ModeDir, "a directory")
	case v1.HostPathFileOrCreate:
		if missing {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return Mounted{}, fmt.Errorf("create hostPath file %s: %w", path, err)
			}
			f.Close()
			return Mounted{HostPath: path}, nil
		}
		return want(path, fi, 0, "a file")
	}
	if missing {
		return Mounted{}, fmt.Errorf("hostPath type check failed: %s does not exist", path)
	}
	switch typ {
	case v1.HostPathDirectory:
		return want(path, fi, fs.ModeDir, "a directory")
	case v1.HostPathFile:
		return want(path, fi, 0, "a file")
	case v1.HostPathSocket:
		return want(path, fi, fs.ModeSocket, "a socket")
	case v1.HostPathCharDev:
		return want(path, fi, fs.ModeDevice|fs.ModeCharDevice, "a character device")
	case v1.HostPathBlockDev:
		return want(path, fi, fs.ModeDevice, "a block device")
	}
	return Mounted{}, fmt.Errorf("hostPath %s: unknown type %q", path, typ)
}

// want checks the file's type bits; 0 means a regular file.
func want(path string, fi fs.FileInfo, t fs.FileMode, what string) (Mounted, error) {
	if fi.Mode().Type() != t {
		return Mounted{}, fmt.Errorf("hostPath type check failed: %s is not %s", path, what)
	}
	return Mounted{HostPath: path}, nil
}
