//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerLogLinks is where Skiff links container logs, as upstream.
const containerLogLinks = "/var/log/containers"

// logLink is the link a container of a pod should have, and the log file
// it should point at.
func logLink(p *v1.Pod, container string) (link, target string) {
	var id string
	restarts := int32(0)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container {
			_, id, _ = strings.Cut(cs.ContainerID, "://")
			restarts = cs.RestartCount
		}
	}
	link = filepath.Join(containerLogLinks, fmt.Sprintf("%s_%s_%s-%s.log", p.Name, p.Namespace, container, id))
	target = filepath.Join(podLogsRoot, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), container, fmt.Sprintf("%d.log", restarts))
	return link, target
}

// waitLink waits until link is a symlink to target.
func waitLink(t *testing.T, link, target string) {
	t.Helper()
	waitFor(t, 30*time.Second, "log link "+link, func() (bool, error) {
		got, err := os.Readlink(link)
		return err == nil && got == target, nil
	})
}

// waitNoLink waits until link is gone.
func waitNoLink(t *testing.T, link string) {
	t.Helper()
	waitFor(t, 60*time.Second, "log link "+link+" removed", func() (bool, error) {
		_, err := os.Lstat(link)
		return os.IsNotExist(err), nil
	})
}

// writerScript prints a numbered line a second.
const writerScript = `i=0; while true; do i=$((i+1)); echo "writer-line-$i"; sleep 1; done`

// A log shipper run as upstream's users run them, a DaemonSet tailing
// /var/log/containers/*.log with /var/log/containers and /var/log/pods
// mounted read-only, reads another pod's lines through the link Skiff
// made for it; the link goes when the pod goes.
func TestLogShipperReadsContainerLinks(t *testing.T) {
	cn := sharedNode(t)
	writer := busyboxPod("writer", writerScript)
	cn.createPod(t, writer)
	w := cn.waitPod(t, cn.ns, "writer", 60*time.Second, "ready", isReady)
	link, target := logLink(w, "main")
	waitLink(t, link, target)

	ds := shipperDaemonSet(cn, fmt.Sprintf("/var/log/containers/writer_%s_main-*.log", cn.ns))
	_, err := cn.admin.AppsV1().DaemonSets(cn.ns).Create(cn.ctx(), ds, metav1.CreateOptions{})
	must(t, err)
	// Before the pods go (cleanups run last first): the controller would
	// make them again.
	t.Cleanup(func() { _ = cn.admin.AppsV1().DaemonSets(cn.ns).Delete(cn.ctx(), ds.Name, metav1.DeleteOptions{}) })

	var shipped string
	waitFor(t, 90*time.Second, "the shipper's log holds the writer's lines", func() (bool, error) {
		pods, err := cn.admin.CoreV1().Pods(cn.ns).List(cn.ctx(), metav1.ListOptions{LabelSelector: "app=shipper"})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		b, err := cn.admin.CoreV1().Pods(cn.ns).GetLogs(pods.Items[0].Name, &v1.PodLogOptions{}).DoRaw(cn.ctx())
		if err != nil {
			return false, nil // not running yet
		}
		shipped = string(b)
		// The CRI log format, as a shipper reads it from the file.
		return strings.Contains(shipped, " stdout F writer-line-"), nil
	})
	t.Logf("shipped:\n%s", tail(shipped, 3))

	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "writer", metav1.DeleteOptions{}))
	waitNoLink(t, link)
}

// shipperDaemonSet tails the files matching glob, once they exist, on the
// node only.
func shipperDaemonSet(cn *clusterNode, glob string) *appsv1.DaemonSet {
	p := busyboxPod("shipper", fmt.Sprintf(`until ls %[1]s >/dev/null 2>&1; do sleep 1; done; exec tail -n +1 -F %[1]s`, glob))
	p.Spec.NodeName = ""
	p.Spec.NodeSelector = map[string]string{v1.LabelHostname: cn.hostname()}
	p.Labels["app"] = "shipper"
	dir := v1.HostPathDirectory
	for _, d := range []string{containerLogLinks, podLogsRoot} {
		name := filepath.Base(d)
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name,
			VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: d, Type: &dir}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts,
			v1.VolumeMount{Name: name, MountPath: d, ReadOnly: true})
	}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "shipper"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shipper"}},
			Template: v1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec},
		},
	}
}

// A restart of Skiff while a pod runs keeps its links as they are, makes
// the one lost meanwhile again, removes the dangling link of a container
// that is gone, and leaves a file that is not a symlink alone, whatever
// its name.
func TestLogLinksAcrossSkiffRestart(t *testing.T) {
	cn := newPrivateClusterNode(t)
	cn.start()
	p := busyboxPod("links", writerScript)
	p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0])
	p.Spec.Containers[1].Name = "second"
	cn.createPod(t, p)
	p = cn.waitPod(t, cn.ns, "links", 60*time.Second, "ready", isReady)
	kept, keptTarget := logLink(p, "main")
	lost, lostTarget := logLink(p, "second")
	waitLink(t, kept, keptTarget)
	waitLink(t, lost, lostTarget)
	keptIno := inodeOf(t, kept)

	cn.stop()
	must(t, os.Remove(lost))
	fakeID := strings.Repeat("0f", 32)
	gone := filepath.Join(containerLogLinks, fmt.Sprintf("gone_%s_main-%s.log", cn.ns, fakeID))
	must(t, os.Symlink(filepath.Join(podLogsRoot, cn.ns+"_gone_0000", "main", "0.log"), gone))
	t.Cleanup(func() { _ = os.Remove(gone) })
	notLink := filepath.Join(containerLogLinks, fmt.Sprintf("file_%s_main-%s.log", cn.ns, fakeID))
	must(t, os.WriteFile(notLink, []byte("not a link\n"), 0o644))
	t.Cleanup(func() { _ = os.Remove(notLink) })
	cn.start()

	waitLink(t, lost, lostTarget)
	// Another Skiff of the suite starting meanwhile sweeps the same way.
	waitNoLink(t, gone)
	if ino := inodeOf(t, kept); ino != keptIno {
		t.Errorf("the running container's link was made anew across the restart (inode %d, was %d)", ino, keptIno)
	}
	if b, err := os.ReadFile(notLink); err != nil || string(b) != "not a link\n" {
		t.Errorf("a file that is not a link was touched: %q, %v", b, err)
	}
	after := cn.getPod(t, "links")
	if l, _ := logLink(after, "main"); l != kept {
		t.Fatalf("the pod's containers changed across the restart: %s, was %s", l, kept)
	}
	must(t, cn.admin.CoreV1().Pods(cn.ns).Delete(cn.ctx(), "links", metav1.DeleteOptions{}))
	waitNoLink(t, kept)
	waitNoLink(t, lost)
}

func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	must(t, err)
	return fi.Sys().(*syscall.Stat_t).Ino
}
