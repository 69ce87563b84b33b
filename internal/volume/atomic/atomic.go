// Package atomic projects a set of files into a directory so that readers
// only ever see a complete old set or a complete new one, the way upstream
// kubelet's AtomicWriter does for configMap, secret, downwardAPI and
// projected volumes.
//
// The layout of a target directory is upstream's, because applications rely
// on it (they watch ..data with inotify to notice updates):
//
//	<dir>/..2006_01_02_15_04_05.<random>/   the real files, one dir per version
//	<dir>/..data -> ..2006_01_02_15_04_05.<random>
//	<dir>/<name> -> ..data/<name>            one link per top-level path
//
// A new version is written into a fresh timestamped directory, then ..data
// is switched to it with a rename of a ..data_tmp symlink, which is atomic.
// Paths starting with ".." are reserved for this machinery.
//
// Write does no locking: callers must not write the same directory from two
// goroutines at once (the volume manager serializes per volume).
package atomic

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
)

// File is one file of a payload.
type File struct {
	Data []byte
	// Mode holds the permission bits (only 0777 is used), as in the API's
	// defaultMode/mode fields.
	Mode int32
	// FsUser, when set, becomes the file's owner (upstream sets it on
	// service account tokens when all containers run as one user).
	FsUser *int64
	// FsGroup, when set, becomes the file's group and the file gains
	// group read, as upstream's fsGroup ownership change does for these
	// read-only volumes. The directories of the volume get the group and
	// the setgid bit too.
	FsGroup *int64
}

const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	tsLayout       = "..2006_01_02_15_04_05."
)

// beforeSwap, when set by a test, runs after the new version is complete
// and before ..data is switched to it.
var beforeSwap func(newTsDir string)

// oldVersionGrace is how long the previous version outlives the swap. A
// reader whose open(2) resolved ..data just before the swap still has to
// look its file up in the previous directory; removing that directory at
// once makes such a reader see ENOENT now and then (the thread can be
// descheduled mid-lookup for a few milliseconds on a busy node). Upstream
// removes it at once and has that race; the grace closes it in practice at
// the cost of a short wait on updates only (a first write has no previous
// version).
var oldVersionGrace = 100 * time.Millisecond

// Write atomically replaces the content of dir, which must exist, with
// files. Keys are relative slash-separated paths; an invalid key fails the
// whole write before anything is touched. Writing the same content, modes
// and owners again leaves the current version in place.
func Write(dir string, files map[string]File) error {
	payload, err := validatePayload(files)
	if err != nil {
		return fmt.Errorf("atomic write to %s: %w", dir, err)
	}
	// Every operation goes through an os.Root so that no symlink planted
	// in the volume can make the writer read or write outside dir.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("atomic write: %w", err)
	}
	defer root.Close()
	if err := write(root, payload); err != nil {
		return fmt.Errorf("atomic write to %s: %w", dir, err)
	}
	return nil
}

func write(root *os.Root, payload map[string]File) error {
	oldTs, err := currentTsDir(root)
	if err != nil {
		return err
	}

	var stale []string
	needWrite := true
	if oldTs != "" {
		if stale, err = pathsToRemove(root, oldTs, payload); err != nil {
			return err
		}
		changed, err := payloadChanged(root, oldTs, payload)
		if err != nil {
			return err
		}
		needWrite = changed || len(stale) > 0
	}

	if needWrite {
		tsDir, err := newTsDir(root)
		if err != nil {
			return err
		}
		if err := writePayload(root, tsDir, payload); err != nil {
			return errors.Join(err, removeTsDir(root, tsDir))
		}
		if beforeSwap != nil {
			beforeSwap(tsDir)
		}
		if err := swapDataDir(root, tsDir); err != nil {
			return errors.Join(err, removeTsDir(root, tsDir))
		}
	}

	// Links are made even when nothing was written: an earlier write may
	// have died between the swap and this step (upstream issue 121472).
	if err := createUserVisibleLinks(root, payload); err != nil {
		return err
	}
	if err := removeUserVisibleLinks(root, stale); err != nil {
		return err
	}
	if needWrite && oldTs != "" {
		time.Sleep(oldVersionGrace)
		if err := root.RemoveAll(oldTs); err != nil {
			return fmt.Errorf("removing old data directory %s: %w", oldTs, err)
		}
	}
	return removeOrphanTsDirs(root)
}

// currentTsDir returns the timestamped directory ..data points to, or ""
// when there is none yet. A link whose target is not one of ours (say, an
// absolute path) is treated as absent: it is never read, and the next swap
// replaces it.
func currentTsDir(root *os.Root) (string, error) {
	target, err := root.Readlink(dataDirName)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the %s link: %w", dataDirName, err)
	}
	if !isTsDirName(target) {
		return "", nil
	}
	return target, nil
}

// isTsDirName reports whether name looks like a directory newTsDir made:
// a single path element starting with ".." that is not one of the links.
func isTsDirName(name string) bool {
	return strings.HasPrefix(name, "..") && len(name) > len(tsLayout) &&
		!strings.ContainsRune(name, '/') && name != dataDirName && name != newDataDirName
}

// topLevel returns the first element of a cleaned relative path.
func topLevel(p string) string {
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return p
}

// join is path.Join for names inside the root (always slash-separated).
func join(elem ...string) string { return path.Join(elem...) }
