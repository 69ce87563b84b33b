// Package volume prepares a pod's volumes on the node before its containers
// start, one volume at a time (SetUpVolume; the volume manager decides
// when), under <root>/pods/<uid>/volumes/<plugin>/<name>, and tears them
// down when the pod is gone. Claims are followed to their
// PersistentVolumes; CSI volumes go to their driver through the CSI
// interface. Containers get the volumes as CRI bind mounts. Volume types
// Skiff cannot serve are refused with an error naming the type, so the
// pod waits visibly instead of starting half-equipped.
package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	certificatesv1beta1client "k8s.io/client-go/kubernetes/typed/certificates/v1beta1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/skiff-sh/skiff/internal/volume/payload"
)

// Mounted is a prepared volume: where it lives on the host.
type Mounted struct {
	HostPath string
	ReadOnly bool // the volume itself is read-only, whatever the mount says
	// Remount asks for the volume to be set up again on every sync of
	// its pod, while it stays usable (a CSI driver's requiresRepublish).
	Remount bool
	// Device: HostPath is a raw block device (a claim of volumeMode
	// Block), for the containers' volumeDevices, not their volumeMounts.
	Device bool
}

// Client is what volumes read from the apiserver: ConfigMaps and Secrets
// (core/v1) and ClusterTrustBundles (certificates/v1beta1). client-go's
// clientsets satisfy it.
type Client interface {
	CoreV1() corev1client.CoreV1Interface
	CertificatesV1beta1() certificatesv1beta1client.CertificatesV1beta1Interface
}

// Config configures a Manager.
type Config struct {
	RootDir string // --root-dir: pod directories live in RootDir/pods
	// Client reads ConfigMaps, Secrets and ClusterTrustBundles; nil when
	// standalone.
	Client Client
	// NodeAllocatable is what resource limits default to in downward API
	// files when a container sets none.
	NodeAllocatable func() v1.ResourceList
	// Tokens requests service account tokens for projected volumes.
	Tokens *payload.TokenManager
	// Node returns this node's Node (false before it is registered); a
	// PV's node affinity is checked against its labels. nil standalone.
	Node func() (*v1.Node, bool)
	// CSI stages and publishes CSI volumes; nil refuses them.
	CSI CSI
}

// Manager sets volumes up and tears them down.
type Manager struct {
	cfg       Config
	root      string // <root-dir>/pods
	immutable immutableCache
}

// New returns a Manager.
func New(cfg Config) *Manager {
	return &Manager{cfg: cfg, root: filepath.Join(cfg.RootDir, "pods")}
}

// PodDir is the directory of one pod's volumes and other files.
func (m *Manager) PodDir(uid types.UID) string { return filepath.Join(m.root, string(uid)) }

// SetUp prepares every volume of the pod, idempotently, and returns them by
// name. The first volume that cannot be prepared fails the whole call.
func (m *Manager) SetUp(ctx context.Context, pod *v1.Pod) (map[string]Mounted, error) {
	out := make(map[string]Mounted, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		mounted, err := m.SetUpVolume(ctx, pod, vol)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
		out[vol.Name] = mounted
	}
	return out, nil
}

// SetUpVolume prepares one volume of the pod, idempotently.
func (m *Manager) SetUpVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (Mounted, error) {
	switch {
	case vol.ConfigMap != nil || vol.Secret != nil || vol.DownwardAPI != nil || vol.Projected != nil:
		return m.setUpAPIData(ctx, pod, vol)
	case vol.EmptyDir != nil:
		return m.setUpEmptyDir(pod, vol)
	case vol.HostPath != nil:
		return setUpHostPath(vol.HostPath)
	case vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil:
		return m.setUpClaim(ctx, pod, vol)
	case vol.CSI != nil:
		return m.setUpInlineCSI(ctx, pod, vol)
	}
	typ := sourceType(vol)
	if driver, ok := migratedToCSI[typ]; ok {
		return Mounted{}, migrationRefusal(typ, driver)
	}
	return Mounted{}, fmt.Errorf("volume type %s is not supported by this version of Skiff", typ)
}

// Refreshed tells whether a volume's content follows API objects (a
// configMap, secret, downwardAPI or projected volume), so that it is set
// up again on every sync of its pod.
func Refreshed(vol *v1.Volume) bool {
	return vol.ConfigMap != nil || vol.Secret != nil || vol.DownwardAPI != nil || vol.Projected != nil
}

// TearDown unpublishes the pod's CSI volumes, then unmounts and removes
// everything of the pod on disk.
func (m *Manager) TearDown(ctx context.Context, uid types.UID) error {
	dir := m.PodDir(uid)
	if err := m.unmountPod(ctx, dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove pod directory: %w", err)
	}
	if m.cfg.Tokens != nil {
		m.cfg.Tokens.Forget(uid)
	}
	m.immutable.forget(uid)
	return nil
}

// TearDownVolumes unpublishes the pod's CSI volumes, unmounts its
// volumes and removes their directories (an emptyDir's data goes with
// them), as upstream does once a pod's containers have all ended. The
// rest of the pod's directory (etc-hosts, termination message files)
// stays until TearDown.
func (m *Manager) TearDownVolumes(ctx context.Context, uid types.UID) error {
	dir := m.PodDir(uid)
	if err := m.unmountPod(ctx, dir); err != nil {
		return err
	}
	for _, sub := range []string{"volumes", subPathsDir} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return fmt.Errorf("remove the pod's %s: %w", sub, err)
		}
	}
	return nil
}

// unmountPod unpublishes the CSI volumes of the pod directory dir and
// unmounts everything below it, failing while anything stays mounted.
func (m *Manager) unmountPod(ctx context.Context, dir string) error {
	if m.cfg.CSI != nil {
		if err := m.cfg.CSI.TearDownPod(ctx, dir); err != nil {
			return err // nothing is unmounted under a driver's feet
		}
	}
	var errs []error
	for _, mp := range mountsUnder(dir) {
		if err := unmountBeneath(m.root, mp); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 { // never remove what is still mounted
		return errors.Join(errs...)
	}
	// A subPath mount shows a volume's data, maybe a hostPath's: removing
	// through one that survived would delete that data.
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("still mounted after unmounting: %v", left)
	}
	return nil
}

// PodsOnDisk lists the pods that have a directory, for orphan cleanup.
func (m *Manager) PodsOnDisk() ([]types.UID, error) {
	entries, err := os.ReadDir(m.root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []types.UID
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, types.UID(e.Name()))
		}
	}
	return out, nil
}

// sourceType names a volume's type by its API field name, e.g.
// "persistentVolumeClaim".
func sourceType(vol *v1.Volume) string {
	s := vol.VolumeSource
	for name, set := range map[string]bool{
		"persistentVolumeClaim": s.PersistentVolumeClaim != nil, "configMap": s.ConfigMap != nil,
		"secret": s.Secret != nil, "downwardAPI": s.DownwardAPI != nil, "projected": s.Projected != nil,
		"nfs": s.NFS != nil, "iscsi": s.ISCSI != nil, "csi": s.CSI != nil, "ephemeral": s.Ephemeral != nil,
		"image": s.Image != nil, "gitRepo": s.GitRepo != nil, "fc": s.FC != nil, "rbd": s.RBD != nil,
		"cephfs": s.CephFS != nil, "glusterfs": s.Glusterfs != nil, "flexVolume": s.FlexVolume != nil,
		"flocker": s.Flocker != nil, "quobyte": s.Quobyte != nil, "scaleIO": s.ScaleIO != nil,
		"storageos": s.StorageOS != nil, "photonPersistentDisk": s.PhotonPersistentDisk != nil,
		"awsElasticBlockStore": s.AWSElasticBlockStore != nil, "gcePersistentDisk": s.GCEPersistentDisk != nil,
		"azureDisk": s.AzureDisk != nil, "azureFile": s.AzureFile != nil, "cinder": s.Cinder != nil,
		"vsphereVolume": s.VsphereVolume != nil, "portworxVolume": s.PortworxVolume != nil,
	} {
		if set {
			return name
		}
	}
	return "(unknown)"
}
