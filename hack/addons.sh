#!/usr/bin/env bash
# The dev cluster's add-ons, run as a kubeadm cluster runs them, as pods
# on the Skiff node: kube-proxy (a hostNetwork, privileged DaemonSet in
# iptables mode), CoreDNS (the kube-dns Service at the nodes' clusterDNS)
# and metrics-server (the Metrics API behind `kubectl top`). Manifests in
# hack/addons/; binaries from hack/build-tools.sh.
#
#   hack/addons.sh images    # build their images and import them into the dev containerd
#   hack/addons.sh render [NAME...]   # print the manifests (kube-proxy coredns
#                            # metrics-server metrics-apiservice; default all)
#   hack/addons.sh up        # images, render, kubectl apply; wait until all three serve
#   hack/addons.sh cleanup   # remove kube-proxy's iptables rules from the host
#
# There is no registry: each image is the add-on's static binary (plus, for
# kube-proxy, the host's iptables and the libraries it loads) in one
# layer, built by hack/ociimage and imported as hack/containerd.sh does.
#
# render reads (defaults are make up's cluster):
#   ADDONS_NAMESPACE   namespace of every namespaced object (kube-system)
#   ADDONS_SUFFIX      appended to cluster-scoped names (none)
#   ADDONS_NODE        run the pods on this node only (any node)
#   ADDONS_API_SERVER  the apiserver URL kube-proxy uses (from the admin kubeconfig)
#   ADDONS_CLUSTER_CIDR  the pod range, inside which traffic is local (10.88.0.0/16)
#   ADDONS_DNS_IP      the kube-dns Service's address (10.96.0.10; empty: allocated)
#   ADDONS_KUBELET_TLS metrics-server's flag for the kubelets' serving
#                      certificates (verified against the cluster CA)
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$PWD
export PATH="/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BIN=$REPO/_output/bin
CLUSTER_DIR=${SKIFF_CLUSTER_DIR:-/var/lib/skiff-dev/cluster}
KUBECTL=("$BIN/kubectl" --kubeconfig "$CLUSTER_DIR/admin.kubeconfig")

# Bump a tag when its image's contents change: images are built only if missing.
KUBE_PROXY_IMAGE=skiff.local/kube-proxy:v1.34.4
COREDNS_IMAGE=skiff.local/coredns:v1.12.4
METRICS_SERVER_IMAGE=skiff.local/metrics-server:v0.9.0
ADDONS=(kube-proxy coredns metrics-server metrics-apiservice)

# iptables_flags prints ociimage flags for the host's iptables (the
# backend its `iptables` points at, so kube-proxy's rules sit beside the
# CNI plugins'), the libraries it links and the extensions it loads.
iptables_flags() {
	local multi lib ext
	multi=$(readlink -f "$(command -v iptables)")
	echo "--add=$multi:/usr/sbin/${multi##*/}"
	for cmd in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
		echo "--link=/usr/sbin/$cmd:${multi##*/}"
	done
	ext=$(readlink -f "$(dirname "$(ldd "$multi" | awk '$1 == "libxtables.so.12" { print $3 }')")")/xtables
	# The libraries it and its extensions link (libm, for one), where the
	# host's own directories (merged /usr) put them; the loader at the
	# path the binary names.
	{ ldd "$multi"; for lib in "$ext"/*.so; do ldd "$lib"; done; } |
		awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u | while read -r lib; do
		echo "--add=$(readlink -f "$lib"):$(readlink -f "$(dirname "$lib")")/${lib##*/}"
	done
	lib=$(ldd "$multi" | awk '$1 ~ /^\// { print $1 }')
	echo "--add=$(readlink -f "$lib"):$lib"
	for lib in "$ext"/*.so; do echo "--add=$lib:$lib"; done
}

# The archive images builds; removed when the script exits.
TAR=
trap 'rm -f "$TAR"' EXIT

images() {
	local have flags
	have=$(hack/containerd.sh images)
	for b in kube-proxy coredns metrics-server; do
		[[ -x $BIN/$b ]] || { echo "addons.sh: $BIN/$b is missing: run hack/build-tools.sh $b" >&2; exit 1; }
	done
	mkdir -p bin
	go build -o bin/ociimage ./hack/ociimage
	TAR=$(mktemp --suffix=.tar)
	if ! grep -qxF "$KUBE_PROXY_IMAGE" <<<"$have"; then
		mapfile -t flags < <(iptables_flags)
		bin/ociimage --name "$KUBE_PROXY_IMAGE" -o "$TAR" --add "$BIN/kube-proxy:/usr/local/bin/kube-proxy" "${flags[@]}"
		hack/containerd.sh import "$TAR"
	fi
	if ! grep -qxF "$COREDNS_IMAGE" <<<"$have"; then
		bin/ociimage --name "$COREDNS_IMAGE" -o "$TAR" --add "$BIN/coredns:/coredns" --entrypoint /coredns
		hack/containerd.sh import "$TAR"
	fi
	if ! grep -qxF "$METRICS_SERVER_IMAGE" <<<"$have"; then
		bin/ociimage --name "$METRICS_SERVER_IMAGE" -o "$TAR" --add "$BIN/metrics-server:/metrics-server" --entrypoint /metrics-server
		hack/containerd.sh import "$TAR"
	fi
}

api_server() {
	"${KUBECTL[@]}" config view --minify -o jsonpath='{.clusters[0].cluster.server}'
}

# render NAME...: the manifests with their fields filled in. A line whose
# field is empty (no node, no fixed DNS address) is left out.
render() {
	local names=("$@") n
	[[ ${#names[@]} -gt 0 ]] || names=("${ADDONS[@]}")
	local ns=${ADDONS_NAMESPACE:-kube-system} api=${ADDONS_API_SERVER:-}
	[[ -n $api ]] || api=$(api_server)
	local dns=${ADDONS_DNS_IP-10.96.0.10} node=${ADDONS_NODE:-}
	local tls=${ADDONS_KUBELET_TLS:---kubelet-certificate-authority=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt}
	for n in "${names[@]}"; do
		[[ -f hack/addons/$n.yaml ]] || { echo "addons.sh: no add-on $n (known: ${ADDONS[*]})" >&2; exit 2; }
		echo "---"
		sed -e "${node:+#}/@NODE@/d" -e "${dns:+#}/@DNS_IP@/d" \
			-e "s|@NAMESPACE@|$ns|g; s|@SUFFIX@|${ADDONS_SUFFIX:-}|g; s|@NODE@|$node|g" \
			-e "s|@API_SERVER@|$api|g; s|@CLUSTER_CIDR@|${ADDONS_CLUSTER_CIDR:-10.88.0.0/16}|g; s|@DNS_IP@|$dns|g" \
			-e "s|@KUBELET_TLS@|$tls|g; s|@KUBE_PROXY_IMAGE@|$KUBE_PROXY_IMAGE|g" \
			-e "s|@COREDNS_IMAGE@|$COREDNS_IMAGE|g; s|@METRICS_SERVER_IMAGE@|$METRICS_SERVER_IMAGE|g" \
			"hack/addons/$n.yaml"
	done
}

up() {
	local ns=${ADDONS_NAMESPACE:-kube-system}
	images
	render kube-proxy coredns metrics-server | "${KUBECTL[@]}" apply -f -
	"${KUBECTL[@]}" -n "$ns" rollout status daemonset/kube-proxy --timeout=120s
	"${KUBECTL[@]}" -n "$ns" rollout status deployment/coredns --timeout=120s
	"${KUBECTL[@]}" -n "$ns" rollout status deployment/metrics-server --timeout=180s
	render metrics-apiservice | "${KUBECTL[@]}" apply -f -
	"${KUBECTL[@]}" wait --for=condition=Available apiservice/v1beta1.metrics.k8s.io --timeout=120s
}

# cleanup removes what kube-proxy left in the host's iptables (its pods
# are gone with their node; their rules are not).
cleanup() {
	[[ -x $BIN/kube-proxy ]] || return 0
	"$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || echo "addons.sh: kube-proxy --cleanup failed" >&2
}

case "${1:-}" in
images) images ;;
render) shift; render "$@" ;;
up) up ;;
cleanup) cleanup ;;
*) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
