package kubelet

import (
	"context"
	"path/filepath"

	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/dra"
	"github.com/skiff-sh/skiff/internal/kube"
	"github.com/skiff-sh/skiff/internal/pluginwatcher"
	"github.com/skiff-sh/skiff/internal/volume/csi"
	"github.com/skiff-sh/skiff/internal/volume/payload"
)

// newCSIDrivers makes the registry of CSI drivers (k.csiDrivers), which
// publishes their node information through the apiserver when there is
// one, and waits there for the attachment of the volumes that need it.
func (k *Kubelet) newCSIDrivers(client kube.Interface, tokens *payload.TokenManager) *csi.Drivers {
	cc := csi.Config{NodeName: k.cfg.NodeName, RootDir: k.cfg.RootDir,
		// Volumes that waited for a driver need not wait out their back-off.
		Registered: func(string) { k.volumeManager.RetryNow() }}
	if client != nil {
		cc.Nodes, cc.CSINodes = client.CoreV1().Nodes(), client.StorageV1().CSINodes()
		cc.CSIDrivers = client.StorageV1().CSIDrivers()
		cc.Tokens = tokens
		// The attach/detach controller acts on volumesInUse: post it at once.
		cc.InUseChanged = k.cluster.syncNodeStatus
		// Without the controller (enableControllerAttachDetach false)
		// nobody attaches: such volumes are refused, not waited for.
		if ptr.Deref(k.cfg.Kubelet.EnableControllerAttachDetach, true) {
			cc.VolumeAttachments, cc.Node = client.StorageV1().VolumeAttachments(), k.cluster.node
		}
	}
	k.csiDrivers = csi.New(cc)
	return k.csiDrivers
}

// newPlugins makes the plugin watcher on <root-dir>/plugins_registry with
// a handler per plugin type.
func (k *Kubelet) newPlugins(csiDrivers *csi.Drivers, draDrivers *dra.Drivers) *pluginwatcher.Watcher {
	return pluginwatcher.New(pluginwatcher.Config{
		Dir: filepath.Join(k.cfg.RootDir, pluginwatcher.DirName),
		Handlers: map[string]pluginwatcher.Handler{
			registerapi.CSIPlugin: csiDrivers,
			registerapi.DRAPlugin: draDrivers,
		},
		Clock: k.clock,
	})
}

// runPlugins runs the plugin watcher; without it no plugin registers, so
// its failure to start is logged, and the rest of Skiff runs on.
func (k *Kubelet) runPlugins(ctx context.Context) {
	if err := k.plugins.Run(ctx); err != nil {
		klog.ErrorS(err, "The plugin watcher stopped: no CSI or DRA driver can register")
	}
}
