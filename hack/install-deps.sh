#!/usr/bin/env bash
# Installs what Skiff's development and test environment needs on Debian 12:
# containerd + runc (the CRI runtime), the CNI plugins (in /usr/lib/cni),
# static busybox (the base of the local test images), iptables and iproute2
# (used by the bridge/portmap plugins and by tests), systemd (the e2e test
# of the systemd cgroup driver boots one in its own namespaces) and dbus (the
# graceful shutdown tests run a private system bus). Idempotent: apt is only
# called for packages that are missing, so a second run is instant and offline.
set -euo pipefail

packages=(containerd runc containernetworking-plugins busybox-static iptables iproute2 systemd dbus)

missing=()
for p in "${packages[@]}"; do
	# dpkg-query prints "install ok installed" only for a fully installed package.
	if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]]; then
		missing+=("$p")
	fi
done

if ((${#missing[@]})); then
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
	# The Debian package enables and starts the system containerd; Skiff's
	# environment never uses it (hack/containerd.sh runs its own), so leave it
	# alone rather than risk tests talking to /run/containerd by accident.
fi

# Go comes from the tarball in /usr/local/go, not from apt (Debian's is too old).
export PATH="/usr/local/go/bin:$PATH"
if ! command -v go >/dev/null; then
	echo "install-deps: Go not found; install it in /usr/local/go (https://go.dev/dl/)" >&2
	exit 1
fi
echo "install-deps: ok ($(go version | cut -d' ' -f3), containerd $(containerd --version | cut -d' ' -f3))"
