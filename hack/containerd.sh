#!/usr/bin/env bash
# Runs Skiff's own containerd for development and tests: its own config, root,
# state and socket, so it never touches (or fights with) a system containerd
# on /run/containerd.
#
#   hack/containerd.sh start   # idempotent; also builds and imports the images,
#                              # and restarts containerd if its version,
#                              # binary or config changed
#   hack/containerd.sh stop    # stops containerd AND kills its containers
#   hack/containerd.sh status
#   hack/containerd.sh config DIR [--systemd-cgroup]
#                              # writes DIR/containerd.toml for a containerd
#                              # of a test's own (see config_for_dir)
#   hack/containerd.sh bindir  # prints the directory of this version's
#                              # containerd, ctr and runc shim (put it first
#                              # in the PATH of a containerd of one's own)
#   hack/containerd.sh images  # lists the images of the CRI namespace
#   hack/containerd.sh import ARCHIVE  # imports an OCI archive there
#                              # (hack/addons.sh builds its images so)
#
# SKIFF_RUNTIME picks the version:
#   containerd   (default) Debian's containerd 1.6 (/usr/bin)
#   containerd2  containerd 2.x, built by hack/build-tools.sh into
#                _output/containerd2/bin (built here when missing)
# Each version has its own config, root and state dir: containerd 2.x
# migrates the metadata of a root it opens, which 1.6 then cannot read.
# Both listen on the same socket, so Skiff and the tests need no change.
# Starting one version while the other runs stops the other first, with its
# pods (they belong to a root the new one never sees).
#
# CRI endpoint: unix:///run/skiff-dev/containerd.sock
# Images (namespace k8s.io): registry.k8s.io/pause:3.10 (the sandbox image,
# built locally from cmd/pause under the stock name: kubelets are not told it),
# skiff.local/busybox:1.35, skiff.local/grpchealth:1 (hack/grpchealth, the
# target of e2e grpc probes)
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$PWD
# runc, iptables (CNI bridge/portmap) live in /usr/sbin; Go in /usr/local/go.
export PATH="/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

RUNTIME=${SKIFF_RUNTIME:-containerd}
ETC=/etc/skiff-dev
SOCK=/run/skiff-dev/containerd.sock
PIDFILE=/run/skiff-dev/containerd.pid
# Every version's root and state, for `stop` (whichever version runs).
ALL_ROOTS=(/var/lib/skiff-dev/containerd /var/lib/skiff-dev/containerd2)
ALL_STATES=(/run/skiff-dev/containerd /run/skiff-dev/containerd2)
case "$RUNTIME" in
containerd)
	BIN=/usr/bin/containerd
	CTR=/usr/bin/ctr
	ROOT=/var/lib/skiff-dev/containerd
	STATE=/run/skiff-dev/containerd
	LOG=/var/log/skiff-dev/containerd.log
	CONFIG=$ETC/containerd.toml
	CNI_CONF_DIR=$ETC/cni/net.d
	# Outside CNI_CONF_DIR: containerd would load it as a network config there.
	CNI_TEMPLATE=$ETC/cni/skiff.conflist.template
	IPAM_DIR=/var/lib/skiff-dev/cni/networks
	;;
containerd2)
	BIN_DIR=$REPO/_output/containerd2/bin
	BIN=$BIN_DIR/containerd
	CTR=$BIN_DIR/ctr
	ROOT=/var/lib/skiff-dev/containerd2
	STATE=/run/skiff-dev/containerd2
	LOG=/var/log/skiff-dev/containerd2.log
	CONFIG=$ETC/containerd2.toml
	CNI_CONF_DIR=$ETC/cni/net.d-containerd2
	CNI_TEMPLATE=$ETC/cni/skiff-containerd2.conflist.template
	IPAM_DIR=/var/lib/skiff-dev/cni/networks-containerd2
	# The daemon starts shims by name from its PATH: this version's first.
	export PATH="$BIN_DIR:$PATH"
	;;
*)
	echo "containerd.sh: unknown SKIFF_RUNTIME=$RUNTIME (known: containerd, containerd2)" >&2
	exit 2
	;;
esac
# The static config older versions of this script wrote.
LEGACY_CONFLIST=$ETC/cni/net.d/10-skiff.conflist

# containerd's own default sandbox image name, so a kubelet that pulls or
# names none (as upstream 1.34 and Skiff) runs pods on it. The tag is the one
# containerd 2.x defaults to; no registry is reached for it.
PAUSE_IMAGE=registry.k8s.io/pause:3.10
BUSYBOX_IMAGE=skiff.local/busybox:1.35
# Bump the tag when hack/grpchealth changes: images are built only if missing.
GRPC_IMAGE=skiff.local/grpchealth:1

ctr_() { "$CTR" --address "$SOCK" "$@"; }
answering() { ctr_ version >/dev/null 2>&1; }

# exe PID: the binary a process runs (" (deleted)" when it was replaced).
exe() { readlink "/proc/$1/exe" 2>/dev/null; }

# pid of our containerd from the pid file, if that process is still
# containerd (of either version, even if its binary was rebuilt since).
running_pid() {
	local pid
	pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
	[[ -n "$pid" && "$(exe "$pid")" =~ /containerd( \(deleted\))?$ ]] && echo "$pid"
}

# The SKIFF_RUNTIME name of the containerd answering on $SOCK, from the
# version it reports (1.x: containerd, 2.x: containerd2).
answering_runtime() {
	local v
	v=$(ctr_ version | awk '/^Server:/ { s = 1 } s && $1 == "Version:" { print $2; exit }')
	case "${v#v}" in
	1.*) echo containerd ;;
	2.*) echo containerd2 ;;
	*) echo "unknown($v)" ;;
	esac
}

# containerd 2's binaries, built (or found up to date) by build-tools.sh.
ensure_binaries() {
	[[ "$RUNTIME" == containerd2 ]] || return 0
	hack/build-tools.sh containerd containerd-shim-runc-v2 ctr
}

# overlayfs cannot stack on overlayfs (e.g. when CI itself runs in a
# container): fall back to the slow but universal native snapshotter there.
snapshotter() { # root
	mkdir -p "$1"
	if [[ "$(stat -f -c %T "$1")" == overlayfs ]]; then echo native; else echo overlayfs; fi
}

# Why each non-default setting of the configs below is there:
# - restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, and the
#   sandbox's oom_score_adj -998 makes runc fail ("can't get final child's
#   PID from pipe: EOF") unless it is clamped to our own score.
# - sandbox image (1.6: sandbox_image; 2.x: pinned_images.sandbox): there is
#   no registry; the pause image is built locally and imported under this
#   name. The kubelet is not told it: the CRI plugin runs every sandbox with
#   it (2.x also pins it: never garbage-collected).
# - netns_mounts_under_state_dir: pod netns mounts stay under $STATE, so
#   `stop` can clean them without touching other containerds' /run/netns.
# - disabled plugins: snapshotters that cannot work here only log errors;
#   "opt" would create /opt/containerd. (Do not disable runtime.v1.linux on
#   1.6: tasks-service requires it, and without that the CRI plugin fails.)
#   2.x: NRI would listen on the machine-wide /var/run/nri/nri.sock, which
#   a second containerd (a test's own) would fight over; btrfs, devmapper
#   and zfs are not built in at all.
# - conf_template: the pod network comes from the kubelet's pod CIDR, as
#   on a real node. The kubelet's UpdateRuntimeConfig call (standalone:
#   its config's podCIDR; in a cluster: the Node's spec.podCIDRs) makes
#   the CRI plugin write $CNI_CONF_DIR/10-containerd-net.conflist from
#   the template; until then the runtime reports NetworkReady=false.
#   containerd writes it only while no network config exists, so the
#   first pod CIDR it is given sticks until that file is removed.
# - no registry config: the tests' registry (test/registry) listens on
#   127.0.0.1, and the CRI plugin (1.6, and 2.x's transfer service) talks
#   plain HTTP to localhost, 127.0.0.1 and ::1 on any port by default. A
#   registry elsewhere (the node IP) would need config_path and a
#   hosts.toml per host:port.
# - no streaming config: the CRI plugin's streaming server (exec,
#   attach, port-forward) defaults to 127.0.0.1 on a random port,
#   plain HTTP. Only Skiff, on the same host, talks to it: it proxies
#   the kubelet API's streams there.
# - SystemdCgroup (`config DIR --systemd-cgroup` only): runc's systemd
#   cgroup driver; the dev containerd uses cgroupfs, as this machine does.

# config_v2 ROOT STATE SOCK SNAPSHOTTER CNI_CONF_DIR TEMPLATE SYSTEMD SANDBOX
# prints a containerd 1.x config (version 2). TEMPLATE may be empty (the
# caller then writes a network config itself); SYSTEMD is true or false.
config_v2() {
	cat <<EOF
version = 2
root = "$1"
state = "$2"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.internal.v1.opt",
]

[grpc]
  address = "$3"

[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "$8"
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "$4"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
EOF
	if [[ "$7" == true ]]; then
		cat <<EOF
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
EOF
	fi
	cat <<EOF
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$5"
EOF
	[[ -z "$6" ]] || echo "    conf_template = \"$6\""
}

# config_v3: the same settings for containerd 2.x (version 3: the CRI
# plugin is split into cri.v1.images, cri.v1.runtime and grpc.v1.cri).
config_v3() {
	cat <<EOF
version = 3
root = "$1"
state = "$2"
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.nri.v1.nri",
]

[grpc]
  address = "$3"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "$4"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$8"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
EOF
	if [[ "$7" == true ]]; then
		cat <<EOF
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = true
EOF
	fi
	cat <<EOF
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$5"
EOF
	[[ -z "$6" ]] || echo "    conf_template = \"$6\""
}

# config_for RUNTIME args...: the config for that version.
config_for() {
	local rt=$1
	shift
	case "$rt" in
	containerd) config_v2 "$@" ;;
	containerd2) config_v3 "$@" ;;
	esac
}

# write_config writes containerd's config and the CNI config template, and
# sets CONFIG_CHANGED=1 when the containerd config changed.
CONFIG_CHANGED=
write_config() {
	mkdir -p "$ETC" "$CNI_CONF_DIR" "$ROOT" "$STATE" "$(dirname "$LOG")"
	local new
	new=$(mktemp "$CONFIG.XXXXXX")
	config_for "$RUNTIME" "$ROOT" "$STATE" "$SOCK" "$(snapshotter "$ROOT")" \
		"$CNI_CONF_DIR" "$CNI_TEMPLATE" false "$PAUSE_IMAGE" >"$new"
	# The CRI plugin adds the loopback interface itself (from bin_dir), so
	# the list only needs the pod network: a bridge with NAT to the outside
	# and portmap for hostPort. host-local keeps its leases under our root.
	# containerd fills in (Go template) one range per pod CIDR and a default
	# route per IP family.
	cat >"$CNI_TEMPLATE" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "skiff",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "skiff0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$IPAM_DIR",
        "ranges": [{{range \$i, \$r := .PodCIDRRanges}}{{if \$i}}, {{end}}[{ "subnet": "{{\$r}}" }]{{end}}],
        "routes": [{{range \$i, \$r := .Routes}}{{if \$i}}, {{end}}{ "dst": "{{\$r}}" }{{end}}]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
	# A static network config would keep containerd from ever using the
	# template.
	rm -f "$LEGACY_CONFLIST"
	if cmp -s "$new" "$CONFIG"; then
		rm -f "$new"
	else
		mv "$new" "$CONFIG"
		CONFIG_CHANGED=1
	fi
}

# build_image NAME ociimage-flags...: builds an archive and imports it into
# the k8s.io namespace, where the CRI plugin looks for images.
build_image() {
	local name=$1 tar
	shift
	tar=$(mktemp --suffix=.tar)
	bin/ociimage --name "$name" -o "$tar" "$@"
	ctr_ -n k8s.io images import --snapshotter "$(snapshotter "$ROOT")" "$tar"
	rm -f "$tar"
}

# Builds and imports each local image that is not imported yet (when none
# is missing, neither Go nor a build cache is needed).
ensure_images() {
	local have
	have=$(ctr_ -n k8s.io images ls -q)
	mkdir -p bin
	if ! grep -qxF "$PAUSE_IMAGE" <<<"$have" || ! grep -qxF "$BUSYBOX_IMAGE" <<<"$have"; then
		CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o bin/pause ./cmd/pause
		go build -o bin/ociimage ./hack/ociimage
		build_image "$PAUSE_IMAGE" --add bin/pause:/pause --entrypoint /pause
		build_image "$BUSYBOX_IMAGE" --add /bin/busybox:/bin/busybox --busybox-links --base-files --cmd sh
	fi
	if ! grep -qxF "$GRPC_IMAGE" <<<"$have"; then
		CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o bin/grpchealth ./hack/grpchealth
		go build -o bin/ociimage ./hack/ociimage
		build_image "$GRPC_IMAGE" --add bin/grpchealth:/grpchealth --entrypoint /grpchealth
	fi
}

# stop_daemon stops our containerd process only: shims and containers keep
# running, and the restarted containerd adopts them.
stop_daemon() {
	local pid=$1
	kill -TERM "$pid"
	for _ in $(seq 50); do [[ -d /proc/$pid ]] || return 0; sleep 0.2; done
	kill -KILL "$pid"
	sleep 0.2
}

# restart_if_changed stops what runs on $SOCK when it must not go on
# running: another version (stopped with its pods, as `stop` does), or this
# version with another config or a rebuilt binary (the daemon only: pods
# keep running, and the restarted containerd adopts them).
restart_if_changed() {
	local pid rt
	answering || return 0
	rt=$(answering_runtime)
	pid=$(running_pid) || {
		if [[ "$rt" != "$RUNTIME" || -n "$CONFIG_CHANGED" ]]; then
			echo "containerd.sh: $rt answers on $SOCK (want $RUNTIME with $CONFIG), but without a pid file: stop it yourself" >&2
			exit 1
		fi
		return 0
	}
	if [[ "$rt" != "$RUNTIME" ]]; then
		echo "containerd.sh: $rt runs on $SOCK; stopping it and its pods to start $RUNTIME"
		stop
	elif [[ -n "$CONFIG_CHANGED" ]]; then
		echo "containerd.sh: config changed; restarting containerd (pods keep running)"
		stop_daemon "$pid"
	elif [[ "$(exe "$pid")" != "$(readlink -f "$BIN")" ]]; then
		echo "containerd.sh: $BIN changed; restarting containerd (pods keep running)"
		stop_daemon "$pid"
	fi
}

start() {
	ensure_binaries
	write_config
	restart_if_changed
	if ! answering; then
		if ! running_pid >/dev/null; then
			echo "containerd.sh: starting $RUNTIME ($BIN, log $LOG)"
			# setsid: containerd must outlive this shell and the make/CI job
			# that runs it, and not get its terminal's signals.
			setsid "$BIN" --config "$CONFIG" </dev/null >>"$LOG" 2>&1 &
			echo $! >"$PIDFILE"
		fi
		for _ in $(seq 100); do
			answering && break
			running_pid >/dev/null || { tail -n 20 "$LOG" >&2; echo "containerd.sh: containerd exited" >&2; exit 1; }
			sleep 0.2
		done
		answering || { echo "containerd.sh: containerd does not answer on $SOCK" >&2; exit 1; }
	fi
	# containerd answers even when the CRI plugin failed to load (it only
	# logs a warning): check it, or every CRI call fails as "unimplemented".
	if ! ctr_ plugins ls | grep -qE '^io\.containerd\.grpc\.v1 +cri .* ok *$'; then
		grep 'io.containerd.grpc.v1.cri' "$LOG" | tail -n 3 >&2
		echo "containerd.sh: the CRI plugin did not load; see $LOG" >&2
		exit 1
	fi
	ensure_images
	echo "containerd.sh: $RUNTIME running; CRI endpoint unix://$SOCK"
}

# Prints the pids of shims started by our containerd: their command line
# names our socket (-address $SOCK); shims of other containerds do not.
our_shims() {
	local p cmd
	for p in /proc/[0-9]*; do
		cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
		[[ "$cmd" == *containerd-shim*" -address $SOCK "* || "$cmd" == *containerd-shim*" -address $SOCK" ]] && echo "${p#/proc/}"
	done
	return 0
}

# Prints the direct children of pid $1 (field 4 of /proc/PID/stat is the
# parent; the command name before it may contain spaces, hence the split).
children_of() {
	local p stat fields
	for p in /proc/[0-9]*; do
		stat=$(cat "$p/stat" 2>/dev/null) || continue  # processes come and go
		read -ra fields <<<"${stat##*) }"
		[[ "${fields[1]}" == "$1" ]] && echo "${p#/proc/}"
	done
	return 0
}

stop() {
	local pid shim
	if pid=$(running_pid); then
		kill -TERM "$pid"
		for _ in $(seq 50); do [[ -d /proc/$pid ]] || break; sleep 0.2; done
		[[ -d /proc/$pid ]] && kill -KILL "$pid"
	fi
	# Shims outlive containerd by design (containers keep running across a
	# restart); a stopped dev environment must not leave pods behind. Kill
	# each shim's container init (each is PID 1 of its PID namespace, so its
	# descendants die too), then the shim.
	for shim in $(our_shims); do
		for pid in $(children_of "$shim"); do kill -KILL "$pid" 2>/dev/null || true; done
		kill -KILL "$shim" 2>/dev/null || true
	done
	sleep 0.5
	# Rootfs, shm and netns mounts left by the killed containers; deepest
	# first. Lazy unmount as a fallback for a mount still briefly busy.
	# Both versions' dirs: `stop` ends whichever version ran.
	local d
	for d in "${ALL_ROOTS[@]}" "${ALL_STATES[@]}"; do
		awk -v d="$d/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo
	done | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
	rm -f "$PIDFILE" "$SOCK"
	echo "containerd.sh: stopped"
}

status() {
	if answering; then
		echo "$(answering_runtime) running (pid $(running_pid || echo '?')), CRI endpoint unix://$SOCK"
		ctr_ -n k8s.io images ls -q | grep -E "^(skiff.local/|$PAUSE_IMAGE$)" || true
	else
		echo "containerd not running"
		return 3
	fi
}

# config_for_dir DIR [--systemd-cgroup] [--state DIR] [--sandbox-image NAME]
# writes DIR/containerd.toml, for a containerd a test runs of its own, on
# SKIFF_RUNTIME's version and with the dev containerd's settings: root
# DIR/root, state DIR/state (or --state), socket DIR/containerd.sock, CNI
# configs in DIR/net.d (no template: the caller writes its network config).
config_for_dir() {
	local dir=${1:-} systemd=false state sandbox=$PAUSE_IMAGE
	[[ -n "$dir" && "$dir" != -* ]] || { echo "usage: $0 config DIR [--systemd-cgroup] [--state DIR] [--sandbox-image NAME]" >&2; exit 2; }
	dir=$(realpath -m "$dir")
	state=$dir/state
	shift
	while [[ $# -gt 0 ]]; do
		case "$1" in
		--systemd-cgroup) systemd=true ;;
		--state) state=${2:?--state needs a directory}; shift ;;
		--sandbox-image) sandbox=${2:?--sandbox-image needs a name}; shift ;;
		*) echo "containerd.sh config: unknown flag $1" >&2; exit 2 ;;
		esac
		shift
	done
	mkdir -p "$dir/root" "$dir/net.d"
	config_for "$RUNTIME" "$dir/root" "$state" "$dir/containerd.sock" "$(snapshotter "$dir/root")" \
		"$dir/net.d" "" "$systemd" "$sandbox" >"$dir/containerd.toml"
	echo "$dir/containerd.toml"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
config) shift; config_for_dir "$@" ;;
bindir) ensure_binaries >&2; dirname "$BIN" ;;
images) ctr_ -n k8s.io images ls -q ;;
import) ctr_ -n k8s.io images import --snapshotter "$(snapshotter "$ROOT")" "${2:?usage: $0 import ARCHIVE}" ;;
*) echo "usage: $0 start|stop|status|bindir|images|import ARCHIVE|config DIR [--systemd-cgroup] [--state DIR] [--sandbox-image NAME]" >&2; exit 2 ;;
esac
