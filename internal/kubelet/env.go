package kubelet

import (
	"context"

	"github.com/skiff-sh/skiff/internal/envvars"
)

// newEnv builds containers' environments. With an apiserver it reads
// ConfigMaps and Secrets by GET (the Node authorizer allows those of bound
// pods) and keeps the Services in an informer; run runs that informer and
// is nil when standalone.
func (k *Kubelet) newEnv() (env *envvars.Builder, run func(context.Context)) {
	cfg := envvars.Config{HostIPs: k.hostIPs, NodeAllocatable: k.allocatable}
	if k.client != nil {
		w := envvars.NewServiceWatch(k.client.CoreV1())
		cfg.Client, cfg.Services, cfg.ServicesSynced = k.client.CoreV1(), w.Lister(), w.HasSynced
		run = w.Run
	}
	return envvars.New(cfg), run
}
