package volume

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/volume/csi"
)

// CSI stages and publishes CSI volumes and tears them down
// (*csi.Drivers).
type CSI interface {
	SetUp(ctx context.Context, pod *v1.Pod, podDir string, vol csi.Volume) (string, error)
	RequiresRepublish(ctx context.Context, driver string) bool
	TearDownPod(ctx context.Context, podDir string) error
	// Expand has the driver grow the volume the pod has set up to size
	// bytes (NodeExpandVolume).
	Expand(ctx context.Context, podDir string, vol csi.Volume, size int64) error
}

var errNoCSI = errors.New("CSI volumes need the CSI driver registry, which this Skiff has not")

// setUpInlineCSI publishes an inline (ephemeral) CSI volume.
func (m *Manager) setUpInlineCSI(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (Mounted, error) {
	src := vol.CSI
	readOnly := src.ReadOnly != nil && *src.ReadOnly
	cv := csi.Volume{
		SpecName: vol.Name, Driver: src.Driver, Inline: true, ReadOnly: readOnly,
		AccessMode: v1.ReadWriteOnce, Attributes: src.VolumeAttributes,
	}
	if src.FSType != nil {
		cv.FSType = *src.FSType
	}
	var err error
	if cv.PublishSecrets, err = m.csiSecrets(ctx, pod, pod.Namespace, src.NodePublishSecretRef); err != nil {
		return Mounted{}, err
	}
	return m.setUpCSI(ctx, pod, cv)
}

// csiPVVolume is a PV's CSI source as a csi.Volume, without secrets.
func csiPVVolume(pv *v1.PersistentVolume, readOnly bool) csi.Volume {
	src := pv.Spec.CSI
	cv := csi.Volume{
		SpecName: pv.Name, Driver: src.Driver, Handle: src.VolumeHandle, ReadOnly: readOnly || src.ReadOnly,
		FSType: src.FSType, MountOptions: pv.Spec.MountOptions, AccessMode: v1.ReadWriteOnce, Attributes: src.VolumeAttributes,
		Block: isBlock(pv),
	}
	if len(pv.Spec.AccessModes) > 0 {
		cv.AccessMode, cv.AccessModes = pv.Spec.AccessModes[0], pv.Spec.AccessModes
	}
	return cv
}

// setUpCSIPV stages and publishes a PV's CSI source.
func (m *Manager) setUpCSIPV(ctx context.Context, pod *v1.Pod, pv *v1.PersistentVolume, readOnly bool) (Mounted, error) {
	src := pv.Spec.CSI
	cv := csiPVVolume(pv, readOnly)
	var err error
	if cv.StageSecrets, err = m.csiSecretRef(ctx, pod, src.NodeStageSecretRef); err != nil {
		return Mounted{}, err
	}
	if cv.PublishSecrets, err = m.csiSecretRef(ctx, pod, src.NodePublishSecretRef); err != nil {
		return Mounted{}, err
	}
	return m.setUpCSI(ctx, pod, cv)
}

func (m *Manager) setUpCSI(ctx context.Context, pod *v1.Pod, cv csi.Volume) (Mounted, error) {
	if m.cfg.CSI == nil {
		return Mounted{}, errNoCSI
	}
	target, err := m.cfg.CSI.SetUp(ctx, pod, m.PodDir(pod.UID), cv)
	if err != nil {
		return Mounted{}, err
	}
	return Mounted{HostPath: target, ReadOnly: cv.ReadOnly, Device: cv.Block, Remount: m.cfg.CSI.RequiresRepublish(ctx, cv.Driver)}, nil
}

func (m *Manager) csiSecretRef(ctx context.Context, pod *v1.Pod, ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	ns := ref.Namespace
	if ns == "" {
		ns = pod.Namespace
	}
	return m.csiSecrets(ctx, pod, ns, &v1.LocalObjectReference{Name: ref.Name})
}

// csiSecrets reads the Secret a CSI volume names for the driver.
func (m *Manager) csiSecrets(ctx context.Context, pod *v1.Pod, ns string, ref *v1.LocalObjectReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	s, err := m.secret(ctx, pod, ns, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s of the CSI volume: %w", ns, ref.Name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}
