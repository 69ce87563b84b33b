package csi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/validation"
)

// A driver (and anything else that can write under the root directory)
// can put a symlink, a FIFO or a huge file where Skiff keeps
// vol_data.json. So the file is read and written relative to its
// directory's held fd: never through a symlink, never blocking, never
// more than maxVolData bytes; written under a temporary name and renamed
// over, so a planted link is replaced, not followed.
const maxVolData = 64 << 10

// validDriverName is the rule a driver's name passes at registration.
func validDriverName(name string) error {
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(name)); len(errs) > 0 || strings.Contains(name, "/") {
		return fmt.Errorf("driver name %q is not a valid CSI driver name: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// writeVolData writes vol_data.json into dir, below the root, creating
// dir.
func (r rootDir) writeVolData(dir string, v volData) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dfd, err := r.open(dir, true)
	if err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	tmp := "." + volDataFile + ".tmp"
	_ = unix.Unlinkat(dfd, tmp, 0)
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s in %s: %w", volDataFile, dir, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("write %s in %s: %w", volDataFile, dir, err)
	}
	if err := unix.Renameat(dfd, tmp, dfd, volDataFile); err != nil {
		return fmt.Errorf("write %s in %s: %w", volDataFile, dir, err)
	}
	return nil
}

// readVolData reads dir's vol_data.json; ok is false when there is none.
// A file that is not a regular file, is too big, or names an invalid
// driver, no volume or a spec name that is not one path element is an
// error.
func (r rootDir) readVolData(dir string) (v volData, ok bool, err error) {
	dfd, err := r.open(dir, false)
	if errors.Is(err, unix.ENOENT) {
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, volDataFile, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return v, false, nil
	}
	if err != nil {
		return v, false, fmt.Errorf("open %s in %s: %w", volDataFile, dir, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, volDataFile))
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return v, false, fmt.Errorf("%s in %s is not a regular file", volDataFile, dir)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxVolData+1))
	if err != nil {
		return v, false, fmt.Errorf("read %s in %s: %w", volDataFile, dir, err)
	}
	if len(b) > maxVolData {
		return v, false, fmt.Errorf("%s in %s is over %d bytes", volDataFile, dir, maxVolData)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, false, fmt.Errorf("%s in %s: %w", volDataFile, dir, err)
	}
	if v.VolumeHandle == "" || v.DriverName == "" {
		return v, false, fmt.Errorf("%s in %s names no driver or volume", volDataFile, dir)
	}
	if err := validDriverName(v.DriverName); err != nil {
		return v, false, fmt.Errorf("%s in %s: %w", volDataFile, dir, err)
	}
	if s := v.SpecVolID; s != "" && (strings.Contains(s, "/") || s == "." || s == "..") {
		return v, false, fmt.Errorf("%s in %s: spec name %q is not one path element", volDataFile, dir, s)
	}
	return v, true, nil
}

// removeVolumeDir removes a volume directory Skiff made, below the root:
// its vol_data.json and its (empty, unmounted) mount directory sub, then
// dir itself, each relative to its parent's held fd. It never removes
// anything else: a directory with other files, or a mount directory that
// is not empty (a volume still mounted, or written to while it was not),
// stays, with an error naming it.
func (r rootDir) removeVolumeDir(dir, sub string) error {
	dfd, err := r.open(dir, false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	if err := unix.Unlinkat(dfd, volDataFile, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("remove %s in %s: %w", volDataFile, dir, err))
	}
	if err := unix.Unlinkat(dfd, sub, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("remove %s: %w", filepath.Join(dir, sub), err))
	}
	unix.Close(dfd)
	if err := r.removeAt(filepath.Dir(dir), filepath.Base(dir), true); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
