//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The CSI hostpath driver deployed as its own deployment does it: the
// driver, node-driver-registrar and external-provisioner as containers of
// one pod on the node, from an image built here of the prebuilt binaries.

const csiImage = "skiff.local/csi-hostpath:1"

// importCSIImage builds an image of the driver and its sidecars on
// busybox (the driver runs mount and umount) and imports it into the
// node's runtime.
func importCSIImage(t *testing.T, cn *clusterNode, sidecars ...string) {
	t.Helper()
	dir := t.TempDir()
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	ociimage := filepath.Join(dir, "ociimage")
	run("go", "build", "-o", ociimage, "../../hack/ociimage")
	args := []string{"--name", csiImage, "-o", filepath.Join(dir, "image.tar"),
		"--add", "/bin/busybox:/bin/busybox", "--busybox-links", "--base-files"}
	for _, b := range append([]string{"hostpathplugin", "csi-node-driver-registrar", "csi-provisioner"}, sidecars...) {
		args = append(args, "--add", csiBinary(t, dir, b)+":/"+b)
	}
	run(ociimage, args...)
	cn.rt.importArchive(t, filepath.Join(dir, "image.tar"))
}

// csiDriverPods is the driver deployed as pods on a private cluster node.
type csiDriverPods struct {
	*clusterNode
	driver  string
	dataDir string // the driver's volumes, on the host
	pod     *v1.Pod
	// resizer: external-resizer runs beside the provisioner, and the
	// storage class allows expansion.
	resizer bool
	// attacher: the driver attaches (--enable-attach: NodeStageVolume
	// of a volume not ControllerPublished fails), external-attacher runs
	// beside the provisioner, and the CSIDriver says attachRequired.
	attacher bool
}

// csiDriverOption changes the driver's deployment.
type csiDriverOption func(*csiDriverPods)

// withResizer deploys external-resizer too.
func withResizer(d *csiDriverPods) { d.resizer = true }

// withAttacher deploys the driver as one of network disks is: attaching,
// with external-attacher, its CSIDriver saying attachRequired.
func withAttacher(d *csiDriverPods) { d.attacher = true }

// deployCSIDriver creates the driver's CSIDriver object (as its own
// deployment's), the provisioner's RBAC and the driver pod, and waits for
// the driver's registration.
func deployCSIDriver(t *testing.T, cn *clusterNode, opts ...csiDriverOption) *csiDriverPods {
	t.Helper()
	d := &csiDriverPods{clusterNode: cn, driver: fmt.Sprintf("hostpath-%d.csi.k8s.io", cn.rt.id),
		dataDir: filepath.Join(cn.rt.dir, "csi-data")}
	for _, o := range opts {
		o(d)
	}
	var sidecars []string
	if d.resizer {
		sidecars = append(sidecars, "csi-resizer")
	}
	csiDriver := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: d.driver}, Spec: storagev1.CSIDriverSpec{
		AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true),
		FSGroupPolicy:        ptr.To(storagev1.FileFSGroupPolicy),
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
	}}
	if d.attacher {
		// A shorter name: the registrar's socket path has a length limit.
		d.driver = fmt.Sprintf("attach-%d.csi.k8s.io", cn.rt.id)
		sidecars = append(sidecars, "csi-attacher")
		csiDriver = &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: d.driver}, Spec: storagev1.CSIDriverSpec{
			AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(true),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		}}
	}
	importCSIImage(t, cn, sidecars...)
	_, err := cn.admin.StorageV1().CSIDrivers().Create(cn.ctx(), csiDriver, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = cn.admin.StorageV1().CSIDrivers().Delete(context.Background(), d.driver, metav1.DeleteOptions{})
	})
	d.provisionerRBAC(t)
	d.pod = cn.createPod(t, d.driverPod(t))
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		if p, err := cn.admin.CoreV1().Pods(cn.ns).Get(context.Background(), d.pod.Name, metav1.GetOptions{}); err == nil {
			t.Logf("driver pod status: %+v", p.Status.ContainerStatuses)
		}
		for _, c := range append([]string{"hostpath", "registrar", "provisioner"}, sidecars...) {
			b, _ := os.ReadFile(d.containerLog(c))
			t.Logf("%s log:\n%s", c, tail(string(b), 30))
		}
	})
	waitFor(t, 90*time.Second, "the driver pod registered its driver", func() (bool, error) {
		_, ok := cn.csiNodeDriver(d.driver)
		return ok, nil
	})
	return d
}

// provisionerRBAC gives the pod's service account what external-
// provisioner reads and writes (its deployment's ClusterRole, without
// leader election, snapshots and capacity, which the test does not use).
func (d *csiDriverPods) provisionerRBAC(t *testing.T) {
	t.Helper()
	ctx := d.ctx()
	_, err := d.admin.CoreV1().ServiceAccounts(d.ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "csi-hostpath"}}, metav1.CreateOptions{})
	must(t, err)
	name := "skiff-e2e-csi-provisioner-" + d.ns
	rule := func(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		rule("", []string{"persistentvolumes"}, "get", "list", "watch", "create", "patch", "delete"),
		rule("", []string{"persistentvolumeclaims"}, "get", "list", "watch", "update", "patch"),
		rule("", []string{"events"}, "list", "watch", "create", "update", "patch"),
		rule("", []string{"nodes"}, "get", "list", "watch"),
		rule("storage.k8s.io", []string{"storageclasses", "csinodes", "volumeattachments", "volumeattributesclasses"}, "get", "list", "watch"),
		rule("snapshot.storage.k8s.io", []string{"volumesnapshots", "volumesnapshotcontents"}, "get", "list"),
	}}
	if d.resizer { // external-resizer's deployment's ClusterRole
		role.Rules = append(role.Rules, rule("", []string{"persistentvolumeclaims/status"}, "patch"),
			rule("", []string{"pods"}, "get", "list", "watch"))
	}
	if d.attacher { // external-attacher's deployment's ClusterRole
		role.Rules = append(role.Rules, rule("storage.k8s.io", []string{"volumeattachments"}, "patch"),
			rule("storage.k8s.io", []string{"volumeattachments/status"}, "patch"))
	}
	_, err = d.admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	must(t, err)
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "csi-hostpath", Namespace: d.ns}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}}
	_, err = d.admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = d.admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = d.admin.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// driverPod is the driver's pod as its deployment's: the driver
// (privileged) with the node's pods and plugins directories mounted
// Bidirectional at the paths Skiff uses, so that what it mounts there
// reaches the host; the registrar with the plugin registry; the
// provisioner talking to the apiserver with the pod's service account.
// hostNetwork, and the apiserver's own address in place of the
// kubernetes Service's: the node runs no kube-proxy.
func (d *csiDriverPods) driverPod(t *testing.T) *v1.Pod {
	t.Helper()
	api, err := url.Parse(d.c.APIServerURL())
	must(t, err)
	socketDir := filepath.Join(d.root, "plugins", d.driver)
	hostPath := func(name, path string) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{
			Path: path, Type: ptr.To(v1.HostPathDirectoryOrCreate)}}}
	}
	mount := func(name, path string, prop v1.MountPropagationMode) v1.VolumeMount {
		return v1.VolumeMount{Name: name, MountPath: path, MountPropagation: &prop}
	}
	container := func(name string, args ...string) v1.Container {
		return v1.Container{Name: name, Image: csiImage, ImagePullPolicy: v1.PullNever, Command: args,
			VolumeMounts: []v1.VolumeMount{mount("socket-dir", "/csi", v1.MountPropagationNone)}}
	}
	driver := container("hostpath", "/hostpathplugin", "--drivername="+d.driver, "--endpoint=unix:///csi/csi.sock",
		"--nodeid="+d.hostname(), "--statedir=/csi-data-dir", "--v=5")
	driver.SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	driver.VolumeMounts = append(driver.VolumeMounts,
		mount("mountpoint-dir", filepath.Join(d.root, "pods"), v1.MountPropagationBidirectional),
		mount("plugins-dir", filepath.Join(d.root, "plugins"), v1.MountPropagationBidirectional),
		mount("csi-data-dir", "/csi-data-dir", v1.MountPropagationNone))
	registrar := container("registrar", "/csi-node-driver-registrar", "--csi-address=/csi/csi.sock",
		"--kubelet-registration-path="+filepath.Join(socketDir, "csi.sock"), "--v=5")
	registrar.VolumeMounts = append(registrar.VolumeMounts, mount("registration-dir", "/registration", v1.MountPropagationNone))
	provisioner := container("provisioner", "/csi-provisioner", "--csi-address=/csi/csi.sock", "--v=5")
	provisioner.Env = []v1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: api.Hostname()}, {Name: "KUBERNETES_SERVICE_PORT", Value: api.Port()}}
	containers := []v1.Container{driver, registrar, provisioner}
	if d.resizer {
		resizer := container("csi-resizer", "/csi-resizer", "--csi-address=/csi/csi.sock", "--v=5")
		resizer.Env = provisioner.Env
		containers = append(containers, resizer)
	}
	if d.attacher {
		containers[0].Command = append(containers[0].Command, "--enable-attach")
		attacher := container("csi-attacher", "/csi-attacher", "--csi-address=/csi/csi.sock", "--v=5")
		attacher.Env = provisioner.Env
		containers = append(containers, attacher)
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-hostpath", Labels: map[string]string{testLabel: "true"}},
		Spec: v1.PodSpec{
			NodeName: d.hostname(), HostNetwork: true, ServiceAccountName: "csi-hostpath",
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers:                    containers,
			Volumes: []v1.Volume{hostPath("socket-dir", socketDir), hostPath("mountpoint-dir", filepath.Join(d.root, "pods")),
				hostPath("plugins-dir", filepath.Join(d.root, "plugins")), hostPath("registration-dir", filepath.Join(d.root, "plugins_registry")),
				hostPath("csi-data-dir", d.dataDir)},
		},
	}
}

// containerLog is the log of a container of the driver pod on the host.
func (d *csiDriverPods) containerLog(container string) string {
	return filepath.Join(podLogsRoot, fmt.Sprintf("%s_%s_%s", d.ns, d.pod.Name, d.pod.UID), container, "0.log")
}

// driverLog is the driver's log: it logs every gRPC call it receives.
func (d *csiDriverPods) driverLog() string { return d.containerLog("hostpath") }

// storageClass makes a StorageClass of the driver, deleted after the test.
func (d *csiDriverPods) storageClass(t *testing.T) string {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csi-hostpath-" + d.ns}, Provisioner: d.driver,
		ReclaimPolicy: ptr.To(v1.PersistentVolumeReclaimDelete), VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		AllowVolumeExpansion: ptr.To(d.resizer)}
	_, err := d.admin.StorageV1().StorageClasses().Create(d.ctx(), sc, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = d.admin.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})
	})
	return sc.Name
}
