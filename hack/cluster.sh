#!/usr/bin/env bash
# Skiff's dev control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler from _output/bin, see hack/build-tools.sh), run in the
# background by test/cluster/cmd/skiff-cluster.
#
#   hack/cluster.sh up [--api-port 6443]   # idempotent; prints the admin kubeconfig last
#   hack/cluster.sh down
#   hack/cluster.sh status
#   hack/cluster.sh node-kubeconfig --node NAME --out FILE
#   hack/cluster.sh bootstrap-kubeconfig --out FILE
#
# State (certificates, etcd data, logs, kubeconfigs) lives in
# $SKIFF_CLUSTER_DIR, default /var/lib/skiff-dev/cluster.
set -euo pipefail

cd "$(dirname "$0")/.."
DIR=${SKIFF_CLUSTER_DIR:-/var/lib/skiff-dev/cluster}
[[ $# -ge 1 ]] || { sed -n '2,13p' "$0" >&2; exit 2; }
cmd=$1
shift
go build -o bin/skiff-cluster ./test/cluster/cmd/skiff-cluster
exec bin/skiff-cluster "$cmd" --dir "$DIR" "$@"
