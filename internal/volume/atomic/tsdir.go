package atomic

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strconv"
	"time"
)

// tsDirMode lets group and others traverse the tree whatever the umask;
// the files' own modes decide who reads them.
const tsDirMode = 0o755

// newTsDir creates a fresh, empty timestamped directory and returns its
// name, like os.MkdirTemp does with upstream's prefix.
func newTsDir(root *os.Root) (string, error) {
	prefix := time.Now().UTC().Format(tsLayout)
	for range 100 {
		name := prefix + strconv.FormatUint(uint64(rand.Uint32()), 10)
		err := root.Mkdir(name, tsDirMode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("creating a data directory: %w", err)
		}
		if err := root.Chmod(name, tsDirMode); err != nil {
			return "", fmt.Errorf("setting the mode of %s: %w", name, err)
		}
		return name, nil
	}
	return "", fmt.Errorf("creating a data directory: no free name with prefix %s", prefix)
}

// writePayload writes every file into the (new, empty) tsDir, with its
// mode and owners, then gives the directories the fsGroup if any file
// asked for one.
func writePayload(root *os.Root, tsDir string, payload map[string]File) error {
	paths := make([]string, 0, len(payload))
	for p := range payload {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	dirs := map[string]bool{tsDir: true}
	var group *int64
	for _, p := range paths {
		f := payload[p]
		name := join(tsDir, p)
		for d := path.Dir(name); d != tsDir; d = path.Dir(d) {
			dirs[d] = true
		}
		if err := root.MkdirAll(path.Dir(name), tsDirMode); err != nil {
			return fmt.Errorf("creating the directory of %s: %w", p, err)
		}
		if err := writeFile(root, name, f); err != nil {
			return err
		}
		if group == nil && f.FsGroup != nil {
			group = f.FsGroup
		}
	}
	// MkdirAll's mode went through the umask.
	for d := range dirs {
		if err := root.Chmod(d, tsDirMode); err != nil {
			return fmt.Errorf("setting the mode of %s: %w", d, err)
		}
	}
	if group == nil {
		return nil
	}
	// Upstream's fsGroup pass walks the whole volume after the write; the
	// same result here: the directories, the volume root included, get
	// the group, group read/search and setgid.
	dirs["."] = true
	for d := range dirs {
		if err := setDirGroup(root, d, *group); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(root *os.Root, name string, f File) error {
	mode := fileMode(f)
	// O_EXCL: the directory is new, so an existing entry means something
	// raced us; never write through it.
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	_, werr := out.Write(f.Data)
	cerr := out.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	// Chmod because the umask trimmed the mode open(2) used.
	if err := root.Chmod(name, mode); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", name, err)
	}
	if f.FsUser == nil && f.FsGroup == nil {
		return nil
	}
	uid, gid := -1, -1
	if f.FsUser != nil {
		uid = int(*f.FsUser)
	}
	if f.FsGroup != nil {
		gid = int(*f.FsGroup)
	}
	if err := root.Lchown(name, uid, gid); err != nil {
		return fmt.Errorf("changing the owner of %s: %w", name, err)
	}
	return nil
}

func setDirGroup(root *os.Root, dir string, gid int64) error {
	if err := root.Lchown(dir, -1, int(gid)); err != nil {
		return fmt.Errorf("changing the group of %s: %w", dir, err)
	}
	fi, err := root.Lstat(dir)
	if err != nil {
		return fmt.Errorf("checking %s: %w", dir, err)
	}
	mode := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	if err := root.Chmod(dir, mode|groupReadMask|dirExtraMask); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", dir, err)
	}
	return nil
}

// swapDataDir points ..data at tsDir in one rename, so a reader resolving
// ..data sees either the old version or the new one, never neither.
func swapDataDir(root *os.Root, tsDir string) error {
	// A ..data_tmp left by a write that died would make Symlink fail
	// forever.
	if err := root.Remove(newDataDirName); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing a stale %s: %w", newDataDirName, err)
	}
	if err := root.Symlink(tsDir, newDataDirName); err != nil {
		return fmt.Errorf("creating the %s link: %w", newDataDirName, err)
	}
	if err := root.Rename(newDataDirName, dataDirName); err != nil {
		err = fmt.Errorf("renaming %s to %s: %w", newDataDirName, dataDirName, err)
		if rerr := root.Remove(newDataDirName); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("roll back: removing %s: %w", newDataDirName, rerr))
		}
		return err
	}
	return nil
}

// removeOrphanTsDirs removes timestamped directories other than the current
// one: versions left behind by writes that died before cleaning up.
func removeOrphanTsDirs(root *os.Root) error {
	current, err := currentTsDir(root)
	if err != nil {
		return err
	}
	entries, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return fmt.Errorf("listing the volume: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || name == current || !isTsDirName(name) {
			continue
		}
		if _, err := time.Parse(tsLayout, name[:len(tsLayout)]); err != nil {
			continue // not one of ours
		}
		if err := root.RemoveAll(name); err != nil {
			return fmt.Errorf("removing an orphaned data directory %s: %w", name, err)
		}
	}
	return nil
}

// removeTsDir removes a timestamped directory a failed write made.
func removeTsDir(root *os.Root, tsDir string) error {
	if err := root.RemoveAll(tsDir); err != nil {
		return fmt.Errorf("roll back: removing %s: %w", tsDir, err)
	}
	return nil
}
