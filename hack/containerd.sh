#!/usr/bin/env bash
# Runs Skiff's own containerd for development and tests: its own config, root,
# state and socket, so it never touches (or fights with) a system containerd
# on /run/containerd.
#
#   hack/containerd.sh start   # idempotent; also builds and imports the images,
#                              # and restarts containerd if its config changed
#   hack/containerd.sh stop    # stops containerd AND kills its containers
#   hack/containerd.sh status
#
# CRI endpoint: unix:///run/skiff-dev/containerd.sock
# Images (namespace k8s.io): registry.k8s.io/pause:3.10 (the sandbox image,
# built locally from cmd/pause under the stock name: kubelets are not told it),
# skiff.local/busybox:1.35, skiff.local/grpchealth:1 (hack/grpchealth, the
# target of e2e grpc probes)
set -euo pipefail

cd "$(dirname "$0")/.."
# runc, iptables (CNI bridge/portmap) live in /usr/sbin; Go in /usr/local/go.
export PATH="/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

ETC=/etc/skiff-dev
ROOT=/var/lib/skiff-dev/containerd
STATE=/run/skiff-dev/containerd
SOCK=/run/skiff-dev/containerd.sock
PIDFILE=/run/skiff-dev/containerd.pid
LOG=/var/log/skiff-dev/containerd.log
CONFIG=$ETC/containerd.toml
CNI_CONF_DIR=$ETC/cni/net.d
# Outside CNI_CONF_DIR: containerd would load it as a network config there.
CNI_TEMPLATE=$ETC/cni/skiff.conflist.template
# The static config older versions of this script wrote.
LEGACY_CONFLIST=$CNI_CONF_DIR/10-skiff.conflist

# containerd's own default sandbox_image name, so a kubelet that pulls or
# names none (as upstream 1.34 and Skiff) runs pods on it. The tag is the one
# containerd 2.x defaults to; no registry is reached for it.
PAUSE_IMAGE=registry.k8s.io/pause:3.10
BUSYBOX_IMAGE=skiff.local/busybox:1.35
# Bump the tag when hack/grpchealth changes: images are built only if missing.
GRPC_IMAGE=skiff.local/grpchealth:1

ctr_() { ctr --address "$SOCK" "$@"; }
answering() { ctr_ version >/dev/null 2>&1; }

# pid of our containerd from the pid file, if that process is still containerd.
running_pid() {
	local pid
	pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
	[[ -n "$pid" && "$(readlink "/proc/$pid/exe" 2>/dev/null)" == */containerd ]] && echo "$pid"
}

# overlayfs cannot stack on overlayfs (e.g. when CI itself runs in a
# container): fall back to the slow but universal native snapshotter there.
snapshotter() {
	mkdir -p "$ROOT"
	if [[ "$(stat -f -c %T "$ROOT")" == overlayfs ]]; then echo native; else echo overlayfs; fi
}

# write_config writes containerd's config and the CNI config template, and
# sets CONFIG_CHANGED=1 when the containerd config changed.
CONFIG_CHANGED=
write_config() {
	mkdir -p "$ETC" "$CNI_CONF_DIR" "$ROOT" "$STATE" "$(dirname "$LOG")"
	# version 2 config. Why each non-default setting is here:
	# - restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, and the
	#   sandbox's oom_score_adj -998 makes runc fail ("can't get final child's
	#   PID from pipe: EOF") unless it is clamped to our own score.
	# - sandbox_image: there is no registry; the pause image is built locally
	#   and imported under this name. The kubelet is not told it: the CRI
	#   plugin runs every sandbox with it.
	# - netns_mounts_under_state_dir: pod netns mounts stay under $STATE, so
	#   `stop` can clean them without touching other containerds' /run/netns.
	# - disabled plugins: snapshotters that cannot work here only log errors;
	#   "opt" would create /opt/containerd. (Do not disable runtime.v1.linux:
	#   tasks-service requires it, and without that the CRI plugin fails.)
	# - conf_template: the pod network comes from the kubelet's pod CIDR, as
	#   on a real node. The kubelet's UpdateRuntimeConfig call (standalone:
	#   its config's podCIDR; in a cluster: the Node's spec.podCIDRs) makes
	#   the CRI plugin write $CNI_CONF_DIR/10-containerd-net.conflist from
	#   the template; until then the runtime reports NetworkReady=false.
	#   containerd writes it only while no network config exists, so the
	#   first pod CIDR it is given sticks until that file is removed.
	# - no registry config: the tests' registry (test/registry) listens on
	#   127.0.0.1, and the CRI plugin of containerd 1.6 talks plain HTTP to
	#   localhost, 127.0.0.1 and ::1 on any port by default (checked: plain
	#   and htpasswd pulls work unconfigured). A registry elsewhere (the node
	#   IP) would need config_path and a hosts.toml per host:port.
	# - no streaming config: the CRI plugin's streaming server (exec,
	#   attach, port-forward) defaults to 127.0.0.1 on a random port,
	#   plain HTTP. Only Skiff, on the same host, talks to it: it proxies
	#   the kubelet API's streams there.
	local new
	new=$(mktemp "$CONFIG.XXXXXX")
	cat >"$new" <<EOF
version = 2
root = "$ROOT"
state = "$STATE"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.internal.v1.opt",
]

[grpc]
  address = "$SOCK"

[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "$PAUSE_IMAGE"
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "$(snapshotter)"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CNI_CONF_DIR"
    conf_template = "$CNI_TEMPLATE"
EOF
	# The CRI plugin adds the loopback interface itself (from bin_dir), so
	# the list only needs the pod network: a bridge with NAT to the outside
	# and portmap for hostPort. host-local keeps its leases under our root.
	# containerd fills in (Go template) one range per pod CIDR and a default
	# route per IP family.
	cat >"$CNI_TEMPLATE" <<'EOF'
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
        "dataDir": "/var/lib/skiff-dev/cni/networks",
        "ranges": [{{range $i, $r := .PodCIDRRanges}}{{if $i}}, {{end}}[{ "subnet": "{{$r}}" }]{{end}}],
        "routes": [{{range $i, $r := .Routes}}{{if $i}}, {{end}}{ "dst": "{{$r}}" }{{end}}]
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
	ctr_ -n k8s.io images import --snapshotter "$(snapshotter)" "$tar"
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

start() {
	local pid
	write_config
	if [[ -n "$CONFIG_CHANGED" ]]; then
		if pid=$(running_pid); then
			echo "containerd.sh: config changed; restarting containerd (pods keep running)"
			stop_daemon "$pid"
		elif answering; then
			echo "containerd.sh: config changed, but the containerd on $SOCK has no pid file: restart it yourself" >&2
		fi
	fi
	if ! answering; then
		if ! running_pid >/dev/null; then
			echo "containerd.sh: starting containerd (log $LOG)"
			# setsid: containerd must outlive this shell and the make/CI job
			# that runs it, and not get its terminal's signals.
			setsid containerd --config "$CONFIG" </dev/null >>"$LOG" 2>&1 &
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
	echo "containerd.sh: running; CRI endpoint unix://$SOCK"
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
	awk -v r="$ROOT/" -v s="$STATE/" 'index($5, r) == 1 || index($5, s) == 1 { print $5 }' /proc/self/mountinfo |
		sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
	rm -f "$PIDFILE" "$SOCK"
	echo "containerd.sh: stopped"
}

status() {
	if answering; then
		echo "containerd running (pid $(running_pid || echo '?')), CRI endpoint unix://$SOCK"
		ctr_ -n k8s.io images ls -q | grep -E "^(skiff.local/|$PAUSE_IMAGE$)" || true
	else
		echo "containerd not running"
		return 3
	fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
*) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
