package csi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// canary is a host directory a driver points a symlink at. It holds
// decoys that look like Skiff's own volume directories (a vol_data.json
// naming the volume, an empty mount directory), so that a teardown that
// followed the symlink would remove them.
type canary struct {
	dir    string
	before string
}

func newCanary(t *testing.T, decoys ...string) *canary {
	t.Helper()
	c := &canary{dir: t.TempDir()}
	for _, d := range decoys { // "<name>/<mount dir>"
		name, sub, _ := strings.Cut(d, "/")
		must(t, os.MkdirAll(filepath.Join(c.dir, name, sub), 0o750))
		b, err := json.Marshal(volData{SpecVolID: name, VolumeHandle: "vol-1", DriverName: testDriver, VolumeLifecycleMode: "Persistent"})
		must(t, err)
		must(t, os.WriteFile(filepath.Join(c.dir, name, volDataFile), b, 0o600))
	}
	must(t, os.WriteFile(filepath.Join(c.dir, "host-file"), []byte("the host's"), 0o644))
	c.before = c.snapshot(t)
	return c
}

// snapshot lists every entry below the canary with its type, mode, owner,
// size and modification time, and the canary's own.
func (c *canary) snapshot(t *testing.T) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(c.dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %o %d:%d %d %d", strings.TrimPrefix(p, c.dir), st.Mode, st.Uid, st.Gid, st.Size, st.Mtim.Nano()))
		return nil
	})
	must(t, err)
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// untouched fails the test if anything in the canary changed.
func (c *canary) untouched(t *testing.T) {
	t.Helper()
	if now := c.snapshot(t); now != c.before {
		t.Errorf("the host directory changed:\nbefore:\n%s\nafter:\n%s", c.before, now)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var pv1 = Volume{SpecName: "pv-1", Driver: testDriver, Handle: "vol-1", AccessMode: "ReadWriteOnce"}

func handleDir(handle string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(handle))) }

// A driver that turned its plugin directory into a symlink to a host
// directory: staging makes nothing there and the driver is not asked to
// stage; the error names the symlink.
func TestStageRefusesASymlinkedDriverDirectory(t *testing.T) {
	f := newFixture(t, hostpathLike)
	c := newCanary(t)
	base := filepath.Join(f.root, "plugins/kubernetes.io/csi")
	must(t, os.MkdirAll(base, 0o750))
	must(t, os.Symlink(c.dir, filepath.Join(base, testDriver)))
	pod := testPod("s")
	if _, err := f.d.SetUp(context.Background(), pod, f.podDir(pod), pv1); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("set up through a symlinked driver directory: %v", err)
	}
	c.untouched(t)
	if f.srv.last("NodeStageVolume") != nil {
		t.Error("the driver was asked to stage into a symlinked directory")
	}
}

// The pod's CSI plugin directory turned into a symlink: publishing
// writes no vol_data.json there and does not call the driver.
func TestPublishRefusesASymlinkedPodPluginDirectory(t *testing.T) {
	f := newFixture(t, hostpathLike)
	c := newCanary(t)
	pod := testPod("p")
	must(t, os.MkdirAll(filepath.Join(f.podDir(pod), "volumes"), 0o750))
	must(t, os.Symlink(c.dir, podVolumesDir(f.podDir(pod))))
	vol := Volume{SpecName: "scratch", Driver: testDriver, Inline: true, AccessMode: "ReadWriteOnce"}
	if _, err := f.d.SetUp(context.Background(), pod, f.podDir(pod), vol); err == nil {
		t.Error("published through a symlinked plugin directory")
	}
	c.untouched(t)
	if f.srv.last("NodePublishVolume") != nil {
		t.Error("the driver was asked to publish into a symlinked directory")
	}
}

// Teardown of a pod whose plugin directory is a symlink to a host
// directory that looks like a volume's: nothing there is removed.
func TestTearDownRefusesASymlinkedPodPluginDirectory(t *testing.T) {
	f := newFixture(t, hostpathLike)
	c := newCanary(t, "pv-1/"+publishTarget)
	pod := testPod("t")
	must(t, os.MkdirAll(filepath.Join(f.podDir(pod), "volumes"), 0o750))
	must(t, os.Symlink(c.dir, podVolumesDir(f.podDir(pod))))
	if err := f.d.TearDownPod(context.Background(), f.podDir(pod)); err == nil {
		t.Error("no error for a symlinked plugin directory")
	}
	c.untouched(t)
}

// A staged volume whose driver directory is swapped for a symlink to a
// host directory holding a decoy of its staging directory: unstaging
// removes nothing there, and succeeds once the real directory is back.
func TestUnstageRefusesASymlinkedDriverDirectory(t *testing.T) {
	f := newFixture(t, hostpathLike)
	f.srv.noDisk = true
	ctx := context.Background()
	pod := testPod("u")
	if _, err := f.d.SetUp(ctx, pod, f.podDir(pod), pv1); err != nil {
		t.Fatal(err)
	}
	c := newCanary(t, handleDir("vol-1")+"/"+globalMount)
	driverDir := filepath.Join(f.root, "plugins/kubernetes.io/csi", testDriver)
	must(t, os.Rename(driverDir, driverDir+".real"))
	must(t, os.Symlink(c.dir, driverDir))
	if err := f.d.TearDownPod(ctx, f.podDir(pod)); err == nil {
		t.Error("no error for a symlinked driver directory")
	}
	c.untouched(t)
	if f.srv.last("NodeUnstageVolume") != nil {
		t.Error("unstaged through a symlinked directory")
	}
	must(t, os.Remove(driverDir))
	must(t, os.Rename(driverDir+".real", driverDir))
	if err := f.d.TearDownPod(ctx, f.podDir(pod)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(driverDir, handleDir("vol-1"))); !os.IsNotExist(err) {
		t.Errorf("the staging directory is left: %v", err)
	}
}

// swapper exchanges dir with a symlink to target (renameat2
// RENAME_EXCHANGE) as fast as it can until stopped, then leaves dir a
// directory again.
func swapper(t *testing.T, dir, target string) (stop func()) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o750))
	link := dir + ".swap"
	must(t, os.Symlink(target, link))
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		swapped := false
		for {
			select {
			case <-done:
				if swapped {
					_ = unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
				}
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err == nil {
				swapped = !swapped
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-stopped }) }
	t.Cleanup(stop)
	return stop
}

// Stages, publishes and teardowns race a driver that swaps its plugin
// directory and the pod's CSI directory for symlinks to host directories
// holding decoys: whatever the interleaving, nothing there is made,
// changed or removed. Calls fail now and then (a symlink was in the way)
// and succeed on retry.
func TestSymlinkSwapsRaceStagePublishAndTeardown(t *testing.T) {
	f := newFixture(t, hostpathLike)
	f.srv.noDisk = true
	ctx := context.Background()
	staging := newCanary(t, handleDir("vol-1")+"/"+globalMount)
	pods := newCanary(t, "pv-1/"+publishTarget)
	pod := testPod("race")
	stopStaging := swapper(t, filepath.Join(f.root, "plugins/kubernetes.io/csi", testDriver), staging.dir)
	stopPods := swapper(t, podVolumesDir(f.podDir(pod)), pods.dir)
	// At least 300 rounds, and more (up to 5000) until a setup and a
	// teardown got through: under load the swappers may win for long.
	var setUps, tearDowns, rounds int
	for ; rounds < 300 || (setUps == 0 || tearDowns == 0) && rounds < 5000; rounds++ {
		if _, err := f.d.SetUp(ctx, pod, f.podDir(pod), pv1); err == nil {
			setUps++
		}
		if err := f.d.TearDownPod(ctx, f.podDir(pod)); err == nil {
			tearDowns++
		}
	}
	stopStaging()
	stopPods()
	if err := f.d.TearDownPod(ctx, f.podDir(pod)); err != nil {
		t.Errorf("teardown after the swaps stopped: %v", err)
	}
	staging.untouched(t)
	pods.untouched(t)
	t.Logf("%d setups and %d teardowns of %d got through the swaps", setUps, tearDowns, rounds)
	if setUps == 0 || tearDowns == 0 {
		t.Errorf("no setup (%d) or no teardown (%d) got through: the race was not run", setUps, tearDowns)
	}
}

// FuzzRootDirOpen: whatever path it is given, opening (and making) a
// directory below the root never opens or makes anything outside it,
// with symlinks planted below the root pointing out of it.
func FuzzRootDirOpen(f *testing.F) {
	for _, s := range []string{"pods/u/volumes/kubernetes.io~csi/v", "plugins/kubernetes.io/csi/out/x", "../x", "pods/../../x",
		"pods/u/volumes/link/x", "/etc", "pods//u/./v", "a/b/c/d/e/f/g"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, rel string, create bool) {
		base := t.TempDir()
		root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
		must(t, os.MkdirAll(filepath.Join(root, "pods/u/volumes"), 0o750))
		must(t, os.MkdirAll(filepath.Join(root, "plugins/kubernetes.io/csi"), 0o750))
		must(t, os.Mkdir(outside, 0o750))
		must(t, os.Symlink(outside, filepath.Join(root, "plugins/kubernetes.io/csi/out")))
		must(t, os.Symlink(outside, filepath.Join(root, "pods/u/volumes/link")))
		fd, err := rootDir(root).open(filepath.Join(root, rel), create)
		if err == nil {
			where, lerr := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
			unix.Close(fd)
			must(t, lerr)
			if where != root && !strings.HasPrefix(where, root+"/") {
				t.Fatalf("%q opened %s, outside the root %s", rel, where, root)
			}
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			t.Fatalf("%q made %v outside the root", rel, entries)
		}
	})
}
