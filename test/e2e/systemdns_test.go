//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// systemdCgroup is the cgroup (in every hierarchy) that a test's own
// systemd gets as the root of its cgroup namespace: the slices it makes
// appear on the host below it. Each test has its own (systemdCgroup-<name>).
const systemdCgroup = "/skiff-e2e-systemd"

// systemdInit runs as PID 1 of new PID, mount and cgroup namespaces and
// execs systemd there: a private /run (its D-Bus socket and
// /run/systemd/system stay in the namespace, so nothing on the host takes
// the host for a systemd one), cgroup mounts rooted at the namespace's
// cgroup, its own /proc, and a target with no dependencies, so it starts
// nothing but what the test asks for. It refuses to run in the host's
// PID namespace, where its mounts would hide the host's.
//
// Only mounts are private: the namespace shares the host's files. The
// units of a booting system (pulled in through sysinit.target by any unit
// with default dependencies) would act on the host's: tmpfiles empties
// /tmp ("D /tmp"), sysusers edits /etc/passwd, sysctl applies the host's
// sysctl.d. They are masked (runtime masks, in the private /run), so a
// unit that needs them fails to start instead.
const systemdInit = `#!/bin/bash
set -euo pipefail
if [[ $$ != 1 ]]; then echo "init.sh must be PID 1 of its own namespaces" >&2; exit 1; fi
mount --make-rprivate /
cgmounts=$(awk '$3 == "cgroup" || $3 == "cgroup2" {print $2, $3, $4}' /proc/self/mounts)
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/lock /run/systemd/system
printf '[Unit]\nDescription=Skiff e2e: only the units the test starts\nDefaultDependencies=no\n' >/run/systemd/system/skiff-e2e.target
for u in sysinit.target basic.target sockets.target timers.target paths.target \
	systemd-tmpfiles-setup.service systemd-tmpfiles-setup-dev.service systemd-tmpfiles-clean.service \
	systemd-tmpfiles-clean.timer systemd-sysusers.service systemd-sysctl.service \
	systemd-journald.service systemd-journal-flush.service systemd-update-utmp.service \
	systemd-random-seed.service systemd-binfmt.service systemd-modules-load.service \
	systemd-remount-fs.service ldconfig.service systemd-machine-id-commit.service; do
	ln -s /dev/null "/run/systemd/system/$u"
done
if [[ "$(stat -f -c %T /sys/fs/cgroup)" == cgroup2fs ]]; then
	mount -t cgroup2 cgroup2 /sys/fs/cgroup
else
	mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
	while read -r mnt type opts; do
		mkdir -p "$mnt"
		mount -t "$type" -o "$opts" "$type" "$mnt"
	done <<<"$cgmounts"
fi
mount -t proc proc /proc
exec env container=skiff-e2e /lib/systemd/systemd --unit=skiff-e2e.target
`

// systemdNS is a real systemd running as PID 1 of its own namespaces.
type systemdNS struct {
	t      *testing.T
	pid    int    // systemd's pid on the host
	cgroup string // the cgroup namespace's root on the host
	// afterStop run once systemd and everything in its namespaces is gone.
	afterStop []func()
}

// startSystemd boots systemd in new namespaces inside systemdCgroup; the
// cleanup kills it (and with it every process of its PID namespace) and
// removes the cgroups it left.
func startSystemd(t *testing.T, name string) *systemdNS {
	t.Helper()
	cgroup := systemdCgroup + "-" + name
	if _, err := os.Stat("/lib/systemd/systemd"); err != nil {
		t.Fatalf("systemd is not installed (hack/install-deps.sh installs it): %v", err)
	}
	mounts := cgroupMounts(t)
	for _, m := range mounts {
		dir := filepath.Join(m, cgroup)
		must(t, os.MkdirAll(dir, 0o755))
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} { // an empty cpuset takes no task
			if b, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				must(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
			}
		}
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "init.sh")
	must(t, os.WriteFile(script, []byte(systemdInit), 0o755))
	join := ""
	for _, m := range mounts {
		join += fmt.Sprintf("echo $$ >%s; ", filepath.Join(m, cgroup, "cgroup.procs"))
	}
	logf, err := os.Create(filepath.Join(dir, "systemd.log"))
	must(t, err)
	cmd := exec.Command("bash", "-c", join+"exec unshare --pid --fork --mount --cgroup "+script)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	must(t, cmd.Start())
	sd := &systemdNS{t: t, cgroup: cgroup}
	t.Cleanup(func() {
		if sd.pid > 0 {
			sd.checkOnlyTestServices()
			_ = syscall.Kill(sd.pid, syscall.SIGKILL) // PID 1: the whole namespace goes
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("systemd output:\n%s", tail(string(b), 40))
		}
		removeCgroupTrees(t, mounts, cgroup)
		for _, f := range sd.afterStop {
			f()
		}
	})
	waitFor(t, 20*time.Second, "systemd to start", func() (bool, error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		if err != nil {
			return false, fmt.Errorf("unshare exited: %v", err)
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			sd.pid, err = strconv.Atoi(f[0])
			return err == nil && filepath.Base(readlink(fmt.Sprintf("/proc/%d/exe", sd.pid))) == "systemd", err
		}
		return false, nil
	})
	waitFor(t, 60*time.Second, "systemd to finish booting", func() (bool, error) {
		out, _ := sd.run("systemctl", "is-system-running")
		state := strings.TrimSpace(string(out))
		return state == "running" || state == "degraded", nil
	})
	return sd
}

func readlink(p string) string {
	s, _ := os.Readlink(p)
	return s
}

// run runs a command in systemd's namespaces, as a process of its node.
func (s *systemdNS) run(args ...string) ([]byte, error) {
	nsArgs := append([]string{"-t", strconv.Itoa(s.pid), "-m", "-p", "-C", "--"}, args...)
	return exec.Command("nsenter", nsArgs...).CombinedOutput()
}

// service runs argv as a transient service of the namespace's systemd,
// its output appended to logPath. With no default dependencies: those
// would pull in sysinit.target (see systemdInit).
func (s *systemdNS) service(unit, logPath string, argv ...string) {
	s.t.Helper()
	args := []string{"systemd-run", "--unit=" + unit, "--collect", "-p", "DefaultDependencies=no",
		"-p", "StandardOutput=append:" + logPath, "-p", "StandardError=append:" + logPath, "--"}
	if out, err := s.run(append(args, argv...)...); err != nil {
		s.t.Fatalf("systemd-run %s: %v\n%s", unit, err, out)
	}
}

// checkOnlyTestServices fails the test if the namespace's systemd ran a
// service of its own (one the test did not start): such a service acts on
// the host's files, which the namespace shares.
func (s *systemdNS) checkOnlyTestServices() {
	s.t.Helper()
	out, err := s.run("systemctl", "list-units", "--all", "--type=service", "--no-legend", "--plain",
		"--state=active,activating,deactivating,failed,reloading")
	if err != nil {
		s.t.Errorf("listing the namespace's services: %v\n%s", err, out)
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "skiff-e2e-") {
			s.t.Errorf("the namespace's systemd ran %s, a unit the test did not start", line)
		}
	}
}

// unitProperty is one property of a unit, as systemctl shows it.
func (s *systemdNS) unitProperty(unit, prop string) string {
	out, err := s.run("systemctl", "show", "--value", "-p", prop, unit)
	if err != nil {
		s.t.Errorf("systemctl show %s %s: %v\n%s", prop, unit, err, out)
	}
	return strings.TrimSpace(string(out))
}

// cgroupMounts lists the cgroup hierarchies' mounts: the unified one on a
// v2 host; each v1 hierarchy (and a hybrid host's unified one) on v1.
func cgroupMounts(t *testing.T) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(cgroupMount, "cgroup.controllers")); err == nil {
		return []string{cgroupMount}
	}
	entries, err := os.ReadDir(cgroupMount)
	must(t, err)
	var out []string
	for _, e := range entries {
		p := filepath.Join(cgroupMount, e.Name())
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil && e.IsDir() {
			out = append(out, p)
		}
	}
	return out
}

// removeCgroupTrees removes name and everything below it in each mount,
// deepest first, giving killed processes a little time to leave.
func removeCgroupTrees(t *testing.T, mounts []string, name string) {
	deadline := time.Now().Add(15 * time.Second)
	for _, m := range mounts {
		var all []string
		_ = filepath.WalkDir(filepath.Join(m, name), func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- {
			for {
				err := syscall.Rmdir(all[i])
				if err == nil || os.IsNotExist(err) {
					break
				}
				if time.Now().After(deadline) {
					t.Logf("cgroup %s left: %v", all[i], err)
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
}
