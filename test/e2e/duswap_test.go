//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestDiskWalkIgnoresSwappedSymlinks: a container keeps exchanging a
// directory of its emptyDir with a symlink to a host directory that holds
// a 200 MiB file under a name the directory holds too (cmd/dirswap), while
// Skiff walks the volume every second for /stats/summary and every 10 s
// for sizeLimit eviction. The host directory is on the filesystem of
// Skiff's root, so only the walk itself can keep out of it. Nothing
// outside the volume may be counted: the volume's usedBytes stays at what
// it holds, and the pod, far below its 50 MiB sizeLimit, is not evicted.
func TestDiskWalkIgnoresSwappedSymlinks(t *testing.T) {
	const big = 200 << 20
	host, err := os.MkdirTemp("/var/tmp", "skiff-e2e-du-host-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(host) })
	f, err := os.Create(filepath.Join(host, "zz-big")) // as cmd/dirswap names it
	must(t, err)
	must(t, unix.Fallocate(int(f.Fd()), 0, 0, big)) // allocated blocks, as du counts them
	must(t, f.Close())
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "dirswap"), "./cmd/dirswap")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // static: it runs in busybox
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build dirswap: %v\n%s", err, out)
	}

	cn := newPrivateClusterNode(t)
	cfg, err := os.OpenFile(cn.config, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = cfg.WriteString("volumeStatsAggPeriod: 1s\n")
	must(t, err)
	must(t, cfg.Close())
	cn.start()
	cn.waitNodeReady(t, v1.ConditionTrue, 60*time.Second)

	const name = "dirswap"
	p := busyboxPod(name, "exec /helper/dirswap /scratch "+host)
	limit := resource.MustParse("50Mi")
	dirType := v1.HostPathDirectory
	p.Spec.Volumes = []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &limit}}},
		{Name: "helper", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: bin, Type: &dirType}}},
	}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "scratch", MountPath: "/scratch"},
		{Name: "helper", MountPath: "/helper", ReadOnly: true},
	}
	cn.createPod(t, p)
	running := cn.waitPod(t, cn.ns, name, 60*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	sub := filepath.Join(cn.root, "pods", string(running.UID), "volumes", "kubernetes.io~empty-dir", "scratch", "sub")

	walks := map[time.Time]uint64{} // the volume's usedBytes by walk
	kinds := map[string]bool{}      // what sub was, looked at from the host
	var most uint64
	for end := time.Now().Add(45 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if fi, err := os.Lstat(sub); err == nil {
			kinds[fi.Mode().Type().String()] = true
		}
		s, err := getSummary(cn.url("/stats/summary"))
		if err != nil {
			t.Logf("summary: %v", err)
			continue
		}
		ps := podStats(s, name)
		if ps == nil {
			continue
		}
		for _, v := range ps.VolumeStats {
			if v.Name != "scratch" {
				continue
			}
			used := val(v.UsedBytes)
			if _, seen := walks[v.Time.Time]; !seen && used >= big/2 {
				t.Errorf("walk at %s counted %d bytes in the volume: the host's %d-byte file", v.Time, used, big)
			}
			walks[v.Time.Time] = used
			most = max(most, used)
		}
	}
	t.Logf("%d walks seen, the most counted %d bytes; sub seen as %v", len(walks), most, kinds)
	if len(walks) < 20 {
		t.Errorf("only %d walks of the volume seen in 45 s", len(walks))
	}
	if !kinds["d---------"] || !kinds["L---------"] {
		t.Errorf("sub seen from the host only as %v: the container was not swapping it", kinds)
	}
	got := cn.getPod(t, name)
	if got.Status.Phase != v1.PodRunning || got.Status.Reason != "" {
		t.Errorf("pod far below its sizeLimit is %s (%s: %s)", got.Status.Phase, got.Status.Reason, got.Status.Message)
	}
	if cs := got.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 || cs[0].State.Running == nil {
		t.Errorf("the swapping container did not run throughout: %+v", cs)
	}
}
