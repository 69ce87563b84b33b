#!/usr/bin/env bash
# Runs bin/skiff in the background as the node of Skiff's dev control plane
# (hack/cluster.sh) on Skiff's dev containerd, for `make up` / `make down`,
# with the node's own credentials (system:node:<name>), not the admin's.
#
#   hack/skiff.sh start   # idempotent; needs bin/skiff, hack/containerd.sh start, hack/cluster.sh up
#   hack/skiff.sh stop
#   hack/skiff.sh running # exit 0 when it runs
set -euo pipefail

cd "$(dirname "$0")/.."

PIDFILE=/run/skiff-dev/skiff.pid
LOG=/var/log/skiff-dev/skiff.log
MANIFESTS=/etc/skiff-dev/manifests
CLUSTER_DIR=${SKIFF_CLUSTER_DIR:-/var/lib/skiff-dev/cluster}
KUBECONFIG_NODE=/var/lib/skiff-dev/kubelet/kubeconfig
KUBECTL="$PWD/_output/bin/kubectl --kubeconfig $CLUSTER_DIR/admin.kubeconfig"

# pid of our skiff from the pid file, if that process is still bin/skiff.
running_pid() {
	local pid
	pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
	[[ -n "$pid" && "$(readlink "/proc/$pid/exe" 2>/dev/null)" == */skiff ]] && echo "$pid"
}

start() {
	local pid node
	# Node names are lowercase; the kernel's hostname need not be.
	node=$(uname -n | tr '[:upper:]' '[:lower:]')
	mkdir -p "$MANIFESTS" /var/lib/skiff-dev/kubelet "$(dirname "$LOG")" "$(dirname "$PIDFILE")"
	cp examples/static-pod.yaml "$MANIFESTS/"
	hack/cluster.sh node-kubeconfig --node "$node" --out "$KUBECONFIG_NODE" >/dev/null
	if pid=$(running_pid); then
		echo "skiff.sh: already running (pid $pid)"
	else
		# No sandbox image is given: the runtime uses its own (hack/containerd.sh).
		setsid bin/skiff \
			--container-runtime-endpoint unix:///run/skiff-dev/containerd.sock \
			--root-dir /var/lib/skiff-dev/kubelet \
			--pod-manifest-path "$MANIFESTS" \
			--hostname-override "$node" \
			--kubeconfig "$KUBECONFIG_NODE" \
			--config "$PWD/hack/skiff-dev.yaml" \
			</dev/null >>"$LOG" 2>&1 &
		echo $! >"$PIDFILE"
		sleep 1
		running_pid >/dev/null || { tail -n 20 "$LOG" >&2; echo "skiff.sh: skiff exited; see $LOG" >&2; exit 1; }
		echo "skiff.sh: started (pid $(cat "$PIDFILE"))"
	fi
	echo "skiff.sh: waiting for node $node to be Ready"
	$KUBECTL wait --for=condition=Ready "node/$node" --timeout=120s
	approve_serving_csr "$node"
	$KUBECTL apply -f examples/hello-deployment.yaml
	$KUBECTL rollout status deployment/hello --timeout=120s
	cat <<EOT

Skiff is the node "$node" of a local cluster. Look around:
  alias kubectl='$KUBECTL'
  kubectl get nodes -o wide
  kubectl get pods -o wide            # the hello Deployment and the static pod's mirror pod
  kubectl get events --sort-by=.lastTimestamp
  kubectl top pod -A                  # metrics-server, from Skiff's /metrics/resource
  kubectl -n kube-system get pods     # kube-proxy, CoreDNS, metrics-server (hack/addons.sh)
  curl -s http://127.0.0.1:10255/pods  # pods as Skiff sees them (read-only port)
  tail -f /var/log/pods/default_hello-${node}_*/hello/*.log   # the example static pod's output
  tail -f $LOG
EOT
}

# approve_serving_csr waits until Skiff has its serving certificate
# (serverTLSBootstrap in hack/skiff-dev.yaml), approving the node's pending
# kubelet-serving CSRs as an administrator would: the controller-manager
# signs them but never approves them.
approve_serving_csr() {
	local node=$1
	for _ in $(seq 120); do
		[[ -s /var/lib/skiff-dev/kubelet/pki/kubelet-server-current.pem ]] && return 0
		$KUBECTL get csr -o jsonpath='{range .items[*]}{.metadata.name} {.spec.signerName} {.spec.username} {.status.conditions[0].type}{"\n"}{end}' |
			awk -v u="system:node:$node" '$2 == "kubernetes.io/kubelet-serving" && $3 == u && $4 == "" { print $1 }' |
			xargs -r $KUBECTL certificate approve
		sleep 0.5
	done
	echo "skiff.sh: no serving certificate within 60s; see $LOG" >&2
	return 1
}

stop() {
	local pid
	if pid=$(running_pid); then
		kill -TERM "$pid"
		for _ in $(seq 100); do [[ -d /proc/$pid ]] || break; sleep 0.2; done
		[[ -d /proc/$pid ]] && kill -KILL "$pid"
	fi
	rm -f "$PIDFILE"
	# Skiff serves device plugins where upstream does, whatever --root-dir
	# says. Left behind, /var/lib/kubelet makes kubeadm's preflight (and
	# TestKubeadmJoin) refuse the machine: remove it unless it holds more.
	rm -f /var/lib/kubelet/device-plugins/kubelet.sock
	rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null || true
	echo "skiff.sh: stopped"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
# Exit 0 when make up's Skiff runs: the tests must not share its containerd.
running) running_pid >/dev/null ;;
*) echo "usage: $0 start|stop|running" >&2; exit 2 ;;
esac
