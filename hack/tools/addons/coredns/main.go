// Command coredns is CoreDNS with the plugins of the Corefile kubeadm
// deploys (errors, health, ready, kubernetes, prometheus, forward, cache,
// loop, reload, loadbalance) and log, for debugging. Upstream's own main
// links every plugin, the cloud DNS providers' SDKs among them, which
// would triple the cold build for nothing the dev cluster uses.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
