//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Skiff's cgroup manager with the systemd driver, run inside a real
// systemd's namespaces (no runtime involved): the QoS slices and a pod's
// kubepods-burstable-pod<uid>.slice become active units whose cgroups
// carry the pod's limits; the pod UIDs are read back from the slices;
// removing the pod stops its slice and its cgroups go.
func TestSystemdSlicesForPods(t *testing.T) {
	sd := startSystemd(t, "slices")
	bin := filepath.Join(t.TempDir(), "podslices")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/podslices").CombinedOutput(); err != nil {
		t.Fatalf("build podslices: %v\n%s", err, out)
	}
	const uid = "0a1b2c3d-4e5f-6789-abcd-ef0123456789"
	out, err := sd.run(bin, "ensure", uid)
	if err != nil {
		t.Fatalf("ensure: %v\n%s", err, out)
	}
	unit := "kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	slicePath := "/kubepods.slice/kubepods-burstable.slice/" + unit
	if got := strings.TrimSpace(string(out)); !strings.HasSuffix(got, slicePath) {
		t.Errorf("cgroup parent for CRI %q, want %s", got, slicePath)
	}
	for _, u := range []string{"kubepods.slice", "kubepods-burstable.slice", "kubepods-besteffort.slice", unit} {
		if s := sd.unitProperty(u, "ActiveState"); s != "active" {
			t.Errorf("slice %s is %q, want active", u, s)
		}
	}
	if got := sd.unitProperty(unit, "ControlGroup"); got != slicePath {
		t.Errorf("pod slice's cgroup %q, want %s", got, slicePath)
	}
	host := sd.cgroup + slicePath
	if cgroupV2() {
		if got := cgroupFile(t, "cpu", host, "cpu.max"); got != "50000 100000" {
			t.Errorf("cpu.max %q, want 50000 100000 (500m)", got)
		}
	} else {
		if got := cgroupFile(t, "cpu", host, "cpu.cfs_quota_us"); got != "50000" {
			t.Errorf("CFS quota %q, want 50000 (500m)", got)
		}
		if got := cgroupFile(t, "cpu", host, "cpu.shares"); got != "256" {
			t.Errorf("cpu.shares %q, want 256 (250m)", got)
		}
	}
	if got := cgroupFile(t, "memory", host, memoryLimitFile()); got != "67108864" {
		t.Errorf("memory limit %q, want 64Mi", got)
	}
	if out, err := sd.run(bin, "list"); err != nil || !strings.Contains(string(out), uid) {
		t.Errorf("pod UIDs from the slices: %s (%v), want %s", out, err, uid)
	}

	if out, err := sd.run(bin, "remove", uid); err != nil {
		t.Fatalf("remove: %v\n%s", err, out)
	}
	if s := sd.unitProperty(unit, "ActiveState"); s != "inactive" {
		t.Errorf("pod slice %s is %q after removal, want inactive", unit, s)
	}
	for _, c := range []string{"cpu", "memory", "pids"} {
		if _, err := os.Stat(cgroupDir(c, host)); !os.IsNotExist(err) {
			t.Errorf("pod slice's %s cgroup left: %v", c, err)
		}
	}
	if s := sd.unitProperty("kubepods-burstable.slice", "ActiveState"); s != "active" {
		t.Errorf("the QoS slice went with the pod: %q", s)
	}
}
