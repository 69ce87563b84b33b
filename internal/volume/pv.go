package volume

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// setUpClaim mounts the PersistentVolume bound to the volume's claim. The
// PV's nodeAffinity must match this node, as upstream checks before every
// mount. Sources: hostPath (what kind's and k3s's local-path-provisioner
// makes) is used where it is; local is bind-mounted into the pod's
// directory; csi is staged and published by its driver; every other
// source is refused with its name.
func (m *Manager) setUpClaim(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (Mounted, error) {
	name, readOnly, ephemeral, _ := claimOf(pod, vol)
	pv, err := m.resolveClaim(ctx, pod, name, ephemeral)
	if err != nil {
		return Mounted{}, err
	}
	if err := m.checkNodeAffinity(pv); err != nil {
		return Mounted{}, fmt.Errorf("MountVolume.NodeAffinity check failed for volume %q : %w", vol.Name, err)
	}
	src := pv.Spec.PersistentVolumeSource
	if err := checkVolumeMode(pod, vol.Name, pv); err != nil {
		return Mounted{}, err
	}
	if isBlock(pv) {
		if src.CSI == nil {
			return Mounted{}, fmt.Errorf("PersistentVolume %s: volumeMode Block is supported for csi volumes only by this version of Skiff, not %s", pv.Name, pvSourceType(&src))
		}
		return m.setUpCSIPV(ctx, pod, pv, readOnly)
	}
	switch {
	case src.HostPath != nil:
		mounted, err := setUpHostPath(src.HostPath)
		mounted.ReadOnly = readOnly
		return mounted, err
	case src.Local != nil:
		dir := filepath.Join(m.PodDir(pod.UID), "volumes", "kubernetes.io~local-volume", pv.Name)
		return setUpLocal(src.Local.Path, dir, readOnly)
	case src.CSI != nil:
		return m.setUpCSIPV(ctx, pod, pv, readOnly)
	}
	typ := pvSourceType(&src)
	if driver, ok := migratedToCSI[typ]; ok {
		return Mounted{}, migrationRefusal(typ, driver)
	}
	return Mounted{}, fmt.Errorf("PersistentVolume %s: source %s is not supported by this version of Skiff", pv.Name, typ)
}

// checkNodeAffinity checks the PV's required node affinity against this
// node's labels; a PV without one fits every node.
func (m *Manager) checkNodeAffinity(pv *v1.PersistentVolume) error {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil {
		return nil
	}
	if m.cfg.Node == nil {
		return errors.New("the PV has a node affinity and this node's labels are unknown (standalone)")
	}
	node, ok := m.cfg.Node()
	if !ok || node == nil {
		return errors.New("the PV has a node affinity and this node is not registered yet")
	}
	match, err := corev1helpers.MatchNodeSelectorTerms(node, na.Required)
	if err != nil {
		return err
	}
	if !match {
		return errors.New("no matching NodeSelectorTerms")
	}
	return nil
}

// migratedToCSI are the in-tree volume types upstream 1.34 serves only by
// translating them to these CSI drivers (CSI migration); their in-tree
// code is gone.
var migratedToCSI = map[string]string{
	"awsElasticBlockStore": "ebs.csi.aws.com",
	"gcePersistentDisk":    "pd.csi.storage.gke.io",
	"azureDisk":            "disk.csi.azure.com",
	"azureFile":            "file.csi.azure.com",
	"cinder":               "cinder.csi.openstack.org",
	"vsphereVolume":        "csi.vsphere.vmware.com",
	"portworxVolume":       "pxd.portworx.com",
}

func migrationRefusal(typ, driver string) error {
	return fmt.Errorf("volume type %s is served only through CSI migration (driver %s), which this version of Skiff does not support", typ, driver)
}

// pvSourceType names a PV's source by its API field name.
func pvSourceType(s *v1.PersistentVolumeSource) string {
	for name, set := range map[string]bool{
		"awsElasticBlockStore": s.AWSElasticBlockStore != nil, "gcePersistentDisk": s.GCEPersistentDisk != nil,
		"azureDisk": s.AzureDisk != nil, "azureFile": s.AzureFile != nil, "cinder": s.Cinder != nil,
		"vsphereVolume": s.VsphereVolume != nil, "portworxVolume": s.PortworxVolume != nil,
		"csi": s.CSI != nil, "nfs": s.NFS != nil, "iscsi": s.ISCSI != nil, "fc": s.FC != nil,
		"hostPath": s.HostPath != nil, "local": s.Local != nil,
		"rbd": s.RBD != nil, "cephfs": s.CephFS != nil, "glusterfs": s.Glusterfs != nil,
		"flexVolume": s.FlexVolume != nil, "flocker": s.Flocker != nil, "quobyte": s.Quobyte != nil,
		"scaleIO": s.ScaleIO != nil, "storageos": s.StorageOS != nil, "photonPersistentDisk": s.PhotonPersistentDisk != nil,
	} {
		if set {
			return name
		}
	}
	return "(unknown)"
}
