package podcgroups

import (
	"fmt"
	"path"
	"strings"

	cgsystemd "github.com/opencontainers/cgroups/systemd"
	"k8s.io/apimachinery/pkg/types"
)

// Cgroup drivers, the values of the config's cgroupDriver.
const (
	DriverCgroupfs = "cgroupfs"
	DriverSystemd  = "systemd"
)

// cgroupName is a driver-neutral cgroup name, one element per level:
// {"kubepods", "burstable", "pod<uid>"}. The driver turns it into the
// path the cgroup has below each hierarchy's mount.
type cgroupName []string

// child is n with one more level; it never shares n's backing array.
func (n cgroupName) child(c string) cgroupName {
	return append(append(cgroupName{}, n...), c)
}

// parseCgroupfs splits a cgroupfs path ("/a/b") into a name; "/" is the
// empty name.
func parseCgroupfs(p string) cgroupName {
	p = strings.Trim(path.Clean("/"+p), "/")
	if p == "" {
		return cgroupName{}
	}
	return strings.Split(p, "/")
}

// cgroupfs is n's path with the cgroupfs driver: "/kubepods/burstable".
func (n cgroupName) cgroupfs() string { return "/" + path.Join(n...) }

// systemd is n's path with the systemd driver, as upstream's ToSystemd:
// each level becomes a slice named after all levels above it joined by
// "-" (systemd's own hierarchy separator, so a "-" inside a level becomes
// "_"): {"kubepods", "burstable"} is
// /kubepods.slice/kubepods-burstable.slice. The empty name is "/".
func (n cgroupName) systemd() (string, error) {
	if len(n) == 0 {
		return "/", nil
	}
	parts := make([]string, len(n))
	for i, p := range n {
		parts[i] = strings.ReplaceAll(p, "-", "_")
	}
	return cgsystemd.ExpandSlice(strings.Join(parts, "-") + ".slice")
}

// checkSystemdRoot refuses a cgroupRoot the systemd driver cannot map
// back and forth: "_" stands for "-" in slice names, so a level with "_"
// would come back different (upstream refuses it too).
func checkSystemdRoot(root cgroupName) error {
	for _, p := range root {
		if strings.Contains(p, "_") || strings.HasSuffix(p, ".slice") {
			return fmt.Errorf("cgroupRoot %q: with cgroupDriver systemd its levels are slice name parts, without \"_\" or \".slice\" (e.g. /kubelet for kubelet.slice)", root.cgroupfs())
		}
	}
	_, err := root.child("kubepods").systemd()
	return err
}

// podUIDFromDir reads a pod UID back from a pod cgroup's directory name:
// "pod<uid>" (cgroupfs) or "<parent>-pod<uid with _>.slice" (systemd).
func podUIDFromDir(driver, dir string) (types.UID, bool) {
	if driver == DriverSystemd {
		stem, ok := strings.CutSuffix(dir, ".slice")
		if !ok {
			return "", false
		}
		dir = strings.ReplaceAll(stem[strings.LastIndex(stem, "-")+1:], "_", "-")
	}
	uid, ok := strings.CutPrefix(dir, "pod")
	if !ok || uid == "" {
		return "", false
	}
	return types.UID(uid), true
}
