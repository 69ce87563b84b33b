#!/usr/bin/env bash
# Builds the third-party binaries Skiff's tests run against into _output/bin/:
#
#   kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet
#   kubeadm kube-proxy sample-device-plugin dra-test-driver
#                       k8s.io/kubernetes v1.34.4   (module hack/tools)
#   etcd etcdctl        go.etcd.io/etcd 3.6.4       (module hack/tools/etcd)
#   registry            distribution v3.1.2         (module hack/tools/registry)
#   coredns             CoreDNS v1.12.4             (module hack/tools/addons)
#   metrics-server      metrics-server v0.9.0       (module hack/tools/addons)
#   staticcheck         honnef.co/go/tools v0.8.2   (module hack/tools/staticcheck)
#
# and into _output/containerd2/bin/ (not on anyone's PATH by accident: only
# hack/containerd.sh puts it first, for SKIFF_RUNTIME=containerd2):
#
#   containerd containerd-shim-runc-v2 ctr
#                       containerd v2.4.2           (module hack/tools/containerd2)
#
# Each tools module is a Go module of its own, nested in the repository and so
# invisible to `go build/vet/test ./...` at the root: Skiff's go.mod never sees
# k8s.io/kubernetes. Everything comes from the Go module proxy; go.sum is
# committed and builds run with -mod=readonly, so the versions are exactly the
# committed ones.
#
# A binary is skipped when its stamp, NAME.stamp beside it, matches what it
# would be built from now: a hash of its module's go.mod and go.sum, and its
# tags and linker flags. Editing this script or checking out a branch rebuilds
# nothing whose inputs did not change. (A binary from before stamps, newer than
# its go.mod and go.sum, is taken as up to date and stamped.)
# Builds go to a temporary directory and are renamed into place, binary
# before stamp, so an interrupted build never leaves a half-written binary
# that looks up to date.
#
# Usage: hack/build-tools.sh [-f|--force] [binary...]
#   -f, --force   rebuild even when up to date
#   binary...     only these (default: all)
# Environment: SKIFF_TOOLS_BIN overrides the output directory (and
# SKIFF_CONTAINERD2_BIN containerd 2's); the usual Go
# variables (GOCACHE, GOMODCACHE, GOPROXY, GOFLAGS) are honoured.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPT="$ROOT/hack/build-tools.sh"
OUT=${SKIFF_TOOLS_BIN:-$ROOT/_output/bin}
OUT_CTRD2=${SKIFF_CONTAINERD2_BIN:-$ROOT/_output/containerd2/bin}
export PATH="/usr/local/go/bin:$PATH"

force=0
only=()
for arg in "$@"; do
	case "$arg" in
	-f | --force) force=1 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$SCRIPT" | sed '$d' | sed 's/^# \{0,1\}//'
		exit 0
		;;
	-*)
		echo "build-tools: unknown flag $arg" >&2
		exit 2
		;;
	*) only+=("$arg") ;;
	esac
done

known=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kubeadm kube-proxy sample-device-plugin dra-test-driver etcd etcdctl registry coredns metrics-server staticcheck containerd containerd-shim-runc-v2 ctr)
for o in "${only[@]}"; do
	if [[ " ${known[*]} " != *" $o "* ]]; then
		echo "build-tools: unknown binary $o (known: ${known[*]})" >&2
		exit 2
	fi
done

mkdir -p "$OUT"
# Two builds at once (two `make test`s, say) would only fight over CPU and
# memory; the second waits, then finds everything up to date.
exec 9>"$OUT/.build-tools.lock"
if ! flock -n 9; then
	echo "build-tools: another build is running, waiting for it..."
	flock 9
fi

tmpdirs=()
cleanup() { [[ ${#tmpdirs[@]} -eq 0 ]] || rm -rf "${tmpdirs[@]}"; }
trap cleanup EXIT

# --- version stamps ---------------------------------------------------------
# Without them the Kubernetes binaries report v0.0.0-master, which kubectl
# refuses to parse. These are the variables upstream's hack/lib/version.sh
# sets, in both packages that carry them: component-base/version (servers,
# kubelet, and kubectl's client version) and client-go/pkg/version.
# buildDate is the release time of the k8s.io/kubernetes v1.34.4 module on the
# proxy: fixed, so rebuilds are reproducible. gitCommit is left empty: the
# module proxy does not record the tag's commit.
KUBE_VERSION=v1.34.4
KUBE_BUILD_DATE=2026-02-10T12:53:36Z
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	kube_ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION"
	kube_ldflags+=" -X $pkg.gitMajor=1 -X $pkg.gitMinor=34"
	kube_ldflags+=" -X $pkg.gitCommit= -X $pkg.gitTreeState=clean"
	kube_ldflags+=" -X $pkg.buildDate=$KUBE_BUILD_DATE"
done
# Upstream's release build tags (hack/lib/golang.sh, non-debug build).
kube_tags="selinux,notest,grpcnotrace"

# etcd takes its version from a constant (go.etcd.io/etcd/api/v3/version);
# only the Git SHA is stamped by etcd's own build, and the proxy does not know it.
etcd_ldflags="-s -w"

dist=github.com/distribution/distribution/v3
registry_ldflags="-s -w -X $dist/version.version=v3.1.2 -X $dist/version.mainpkg=$dist"

# containerd's static release build (its Makefile with STATIC=1): the
# version it reports through CRI (the Node's containerRuntimeVersion) is
# stamped like upstream's; the module proxy does not know the revision.
# btrfs needs cgo and is out anyway; devmapper and zfs cannot work here and
# would only log errors. The CRI plugin and the overlayfs snapshotter are
# built in by default. The shim drops the gRPC server (no_grpc), as upstream's.
ctrd=github.com/containerd/containerd/v2
CTRD2_VERSION=v2.4.2
ctrd2_tags="urfave_cli_no_docs,osusergo,netgo,static_build,no_btrfs,no_devmapper,no_zfs"
ctrd2_ldflags="-s -w -X $ctrd/version.Version=$CTRD2_VERSION -X $ctrd/version.Package=$ctrd"

# The dev cluster's add-ons (hack/addons): CoreDNS reports its version from
# a constant; metrics-server's build stamps client-go's version variables.
addons_ldflags="-s -w -X k8s.io/client-go/pkg/version.gitVersion=v0.9.0"

# --- building ---------------------------------------------------------------
wanted() {
	[[ ${#only[@]} -eq 0 ]] && return 0
	local o
	for o in "${only[@]}"; do [[ "$o" == "$1" ]] && return 0; done
	return 1
}

# The name `go build -o dir/` gives a main package: its last path element, or
# the one before a major-version suffix (go.etcd.io/etcd/server/v3 -> server).
default_name() {
	local base=${1##*/}
	if [[ "$base" =~ ^v[0-9]+$ ]]; then
		base=${1%/*}
		base=${base##*/}
	fi
	echo "$base"
}

# stamp_of moddir flags: what a binary of moddir built with flags is built
# from.
stamp_of() {
	cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -d' ' -f1
	echo "$2"
}
# fresh binary moddir flags: the binary exists and was built from the same
# inputs. An unstamped binary newer than its module files (from before
# stamps) is stamped and kept.
fresh() {
	[[ $force -eq 0 && -x "$1" ]] || return 1
	[[ "$(cat "$1.stamp" 2>/dev/null)" == "$(stamp_of "$2" "$3")" ]] && return 0
	if [[ ! -e "$1.stamp" && "$1" -nt "$2/go.mod" && "$1" -nt "$2/go.sum" ]]; then
		stamp_of "$2" "$3" >"$1.stamp"
		return 0
	fi
	return 1
}

built=()
skipped=()

# build_module moddir tags ldflags name=package...
# (OUT_DIR selects where binaries go.)
# One `go build` for all stale binaries of a module: they share most packages,
# and go build already runs GOMAXPROCS compiles/links in parallel.
build_module() {
	local mod=$1 dir="$ROOT/$1" tags=$2 ldflags=$3
	shift 3
	local spec name pkg names=() pkgs=()
	for spec in "$@"; do
		name=${spec%%=*}
		pkg=${spec#*=}
		wanted "$name" || continue
		if fresh "${OUT_DIR:-$OUT}/$name" "$dir" "$tags $ldflags"; then
			echo "build-tools: skip  $name (up to date)"
			skipped+=("$name")
		else
			names+=("$name")
			pkgs+=("$pkg")
		fi
	done
	[[ ${#pkgs[@]} -gt 0 ]] || return 0

	local tmp start i src dst
	tmp=$(mktemp -d "${OUT_DIR:-$OUT}/.build.XXXXXX")
	tmpdirs+=("$tmp")
	start=$SECONDS
	echo "build-tools: build ${names[*]} (module $mod)..."
	(
		cd "$dir"
		CGO_ENABLED=0 go build -mod=readonly -buildvcs=false -trimpath \
			-tags "$tags" -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
	)
	for i in "${!pkgs[@]}"; do
		src=$tmp/$(default_name "${pkgs[$i]}")
		dst=${OUT_DIR:-$OUT}/${names[$i]}
		rm -f "$dst.stamp"
		mv -f "$src" "$dst"
		stamp_of "$dir" "$tags $ldflags" >"$dst.stamp"
	done
	rm -rf "$tmp"
	echo "build-tools: built ${names[*]} in $((SECONDS - start))s"
	built+=("${names[@]}")
}

total_start=$SECONDS

# sample-device-plugin and dra-test-driver (upstream's DRA e2e test
# driver) need nothing k8s.io/kubernetes does not already require, so they
# are not in the module's tool block: adding them would change go.mod, and
# with it every other binary's stamp.
build_module hack/tools "$kube_tags" "$kube_ldflags" \
	kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
	kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
	kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
	kubectl=k8s.io/kubernetes/cmd/kubectl \
	kubelet=k8s.io/kubernetes/cmd/kubelet \
	kubeadm=k8s.io/kubernetes/cmd/kubeadm \
	kube-proxy=k8s.io/kubernetes/cmd/kube-proxy \
	sample-device-plugin=k8s.io/kubernetes/test/images/sample-device-plugin \
	dra-test-driver=k8s.io/kubernetes/test/e2e/dra/test-driver

build_module hack/tools/etcd "" "$etcd_ldflags" \
	etcd=go.etcd.io/etcd/server/v3 \
	etcdctl=go.etcd.io/etcd/etcdctl/v3

build_module hack/tools/registry "" "$registry_ldflags" \
	registry=$dist/cmd/registry

# CoreDNS from a main of our own with kubeadm's Corefile plugins (see
# hack/tools/addons/coredns).
build_module hack/tools/addons "" "$addons_ldflags" \
	coredns=github.com/skiff-sh/skiff/hack/tools/addons/coredns \
	metrics-server=sigs.k8s.io/metrics-server/cmd/metrics-server

# staticcheck reports its version from its module's build info: no ldflags.
build_module hack/tools/staticcheck "" "-s -w" \
	staticcheck=honnef.co/go/tools/cmd/staticcheck

# containerd 2, its ctr and its shim, one tags set each (the shim's adds
# no_grpc).
mkdir -p "$OUT_CTRD2"
OUT_DIR=$OUT_CTRD2 build_module hack/tools/containerd2 "$ctrd2_tags" "$ctrd2_ldflags" \
	containerd=$ctrd/cmd/containerd \
	ctr=$ctrd/cmd/ctr
OUT_DIR=$OUT_CTRD2 build_module hack/tools/containerd2 "$ctrd2_tags,no_grpc" "$ctrd2_ldflags" \
	containerd-shim-runc-v2=$ctrd/cmd/containerd-shim-runc-v2

echo "build-tools: built ${#built[@]} (${built[*]:-none}), up to date ${#skipped[@]}, $((SECONDS - total_start))s"
