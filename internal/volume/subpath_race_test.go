package volume

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// swapLoop swaps dir between a directory and a symlink to to, as fast as
// it can, until stop is closed: it exchanges dir with a sibling in one
// renameat2(RENAME_EXCHANGE), so dir is always one or the other. A
// container sharing the volume can do the same.
func swapLoop(t *testing.T, dir, to string, stop <-chan struct{}, wg *sync.WaitGroup) {
	t.Helper()
	alt := dir + ".alt"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(to, alt); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("swap: %v", err)
				return
			}
		}
	}()
}

// Directory creation for a subPath raced against a symlink swap, thousands
// of times, with the real kernel: no directory is ever made outside the
// volume, and every subPath bound shows a directory inside it.
func TestSubPathCreationRacesSymlinkSwaps(t *testing.T) {
	needRoot(t)
	n := 3000
	if testing.Short() {
		n = 300
	}
	bothWays(t, func(t *testing.T) {
		root := t.TempDir()
		vol := filepath.Join(root, "vol")
		outside := filepath.Join(root, "host")
		for _, d := range []string{vol, outside} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		marker := filepath.Join(outside, "host-marker")
		if err := os.WriteFile(marker, []byte("host"), 0o644); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(root, "pod", subPathsDir, "v", "c", "0")
		t.Cleanup(func() { _ = unmountAll(target) })
		stop := make(chan struct{})
		var wg sync.WaitGroup
		swapLoop(t, filepath.Join(vol, "x"), outside, stop, &wg)
		bound, refused := 0, 0
		for i := range n {
			// A fresh name each time, so each call has directories to make
			// under the swapped one; every other call binds the swapped
			// directory itself.
			sub := "x/made" + strconv.Itoa(i) + "/deeper"
			if i%2 == 1 {
				sub = "x"
			}
			if _, err := BindSubPath(Mounted{HostPath: vol}, sub, target); err != nil {
				refused++
				continue
			}
			bound++
			if _, err := os.Stat(filepath.Join(target, "host-marker")); err == nil {
				t.Errorf("attempt %d: subPath %q bound the host directory", i, sub)
				break
			}
		}
		close(stop)
		wg.Wait()
		entries, err := os.ReadDir(outside)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("directories were made outside the volume: %v", names)
		}
		t.Logf("%d attempts: %d bound, %d refused", n, bound, refused)
		if bound == 0 || refused == 0 {
			t.Errorf("the race did not happen both ways (%d bound, %d refused): the test proved nothing", bound, refused)
		}
	})
}
