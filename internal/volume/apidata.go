package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
	"github.com/skiff-sh/skiff/internal/volume/payload"
)

// errNoAPIServer: the volume's data lives in the apiserver, which a
// standalone Skiff does not have.
var errNoAPIServer = errors.New("needs an apiserver; Skiff runs standalone")

// setUpAPIData writes a configMap, secret or downwardAPI volume: files
// from API objects, written atomically (readers never see half an update)
// and re-written on every sync of the pod, so changes show within the sync
// period. Secrets live on a tmpfs, never on the node's disk.
func (m *Manager) setUpAPIData(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (Mounted, error) {
	var (
		plugin string
		files  map[string]atomic.File
		err    error
		tmpfs  bool
	)
	switch {
	case vol.ConfigMap != nil:
		plugin = "kubernetes.io~configmap"
		var cm *v1.ConfigMap
		if cm, err = orNotFound(m.configMap(ctx, pod, pod.Namespace, vol.ConfigMap.Name)); err == nil {
			files, err = payload.ConfigMap(vol.ConfigMap, cm)
		}
	case vol.Secret != nil:
		plugin, tmpfs = "kubernetes.io~secret", true
		var s *v1.Secret
		if s, err = orNotFound(m.secret(ctx, pod, pod.Namespace, vol.Secret.SecretName)); err == nil {
			files, err = payload.Secret(vol.Secret, s)
		}
	case vol.DownwardAPI != nil:
		plugin = "kubernetes.io~downward-api"
		files, err = payload.DownwardAPI(vol.DownwardAPI, pod, m.allocatable())
	case vol.Projected != nil:
		// Projected volumes may hold secrets and tokens: tmpfs, as upstream.
		plugin, tmpfs = "kubernetes.io~projected", true
		if m.cfg.Client == nil {
			return Mounted{}, errNoAPIServer
		}
		files, err = payload.Projected(vol.Projected, pod, m.getters(ctx, pod), m.cfg.Tokens.TokenFunc(ctx, pod))
	}
	if err != nil {
		return Mounted{}, err
	}
	dir := filepath.Join(m.PodDir(pod.UID), "volumes", plugin, vol.Name)
	if err := m.writeFiles(dir, payload.SetFSGroup(files, payload.FSGroup(pod)), tmpfs); err != nil {
		return Mounted{}, err
	}
	return Mounted{HostPath: dir, ReadOnly: true}, nil
}

// writeFiles writes a volume's files into dir, on a fresh tmpfs if asked.
func (m *Manager) writeFiles(dir string, files map[string]atomic.File, tmpfs bool) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create volume directory: %w", err)
	}
	if tmpfs && !isMountPoint(dir) {
		if err := mountTmpfs(dir, ""); err != nil {
			return err
		}
	}
	// Containers run as any user: the directory must be traversable. Keep
	// the setgid bit an fsGroup put there.
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat volume directory: %w", err)
	}
	if err := os.Chmod(dir, fi.Mode()&(os.ModeSetgid|os.ModePerm)|0o755); err != nil {
		return fmt.Errorf("chmod volume directory: %w", err)
	}
	if err := atomic.Write(dir, files); err != nil {
		return fmt.Errorf("write volume files: %w", err)
	}
	return nil
}

// configMap reads a ConfigMap; an immutable one only once per pod.
func (m *Manager) configMap(ctx context.Context, pod *v1.Pod, ns, name string) (*v1.ConfigMap, error) {
	if m.cfg.Client == nil {
		return nil, errNoAPIServer
	}
	return cachedGet(&m.immutable, immutableKey{pod.UID, "ConfigMap", ns, name}, func() (*v1.ConfigMap, error) {
		return m.cfg.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	})
}

// secret reads a Secret; an immutable one only once per pod.
func (m *Manager) secret(ctx context.Context, pod *v1.Pod, ns, name string) (*v1.Secret, error) {
	if m.cfg.Client == nil {
		return nil, errNoAPIServer
	}
	return cachedGet(&m.immutable, immutableKey{pod.UID, "Secret", ns, name}, func() (*v1.Secret, error) {
		return m.cfg.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	})
}

// orNotFound turns NotFound into (nil, nil), for the payload to decide by
// `optional`.
func orNotFound[T any](obj *T, err error) (*T, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

func (m *Manager) allocatable() v1.ResourceList {
	if m.cfg.NodeAllocatable == nil {
		return nil
	}
	return m.cfg.NodeAllocatable()
}

// getters read the ConfigMaps, Secrets and ClusterTrustBundles of
// projected volumes.
func (m *Manager) getters(ctx context.Context, pod *v1.Pod) payload.Getters {
	return payload.Getters{
		ConfigMaps: payload.ConfigMapGetterFunc(func(ns, name string) (*v1.ConfigMap, error) {
			return m.configMap(ctx, pod, ns, name)
		}),
		Secrets: payload.SecretGetterFunc(func(ns, name string) (*v1.Secret, error) {
			return m.secret(ctx, pod, ns, name)
		}),
		TrustBundles:    trustBundles{ctx, m.cfg.Client},
		NodeAllocatable: m.allocatable(),
	}
}
