#!/usr/bin/env bash
# Makes sure Debian's qemu-user is installed and prints the path of its
# qemu-aarch64 on standard output, so that the arm64 build (the "neon"
# kernel path of internal/kernel) can be tested on an amd64 machine:
#
#   qemu="$(scripts/qemu-arm64.sh)"
#   GOARCH=arm64 CGO_ENABLED=0 go test -exec "$qemu" ./internal/kernel
#
# Go's static arm64 test binaries need no arm64 C library, so qemu-user
# alone runs them. qemu checks correctness only: its timings say nothing
# about an arm64 CPU's speed.
#
# The package is pinned to the version Debian bookworm serves
# (QEMU_USER_VERSION); a qemu-aarch64 already installed in another version
# is used with a note on standard error. When qemu-user is missing and
# cannot be installed (no root and no password-less sudo, no Debian package
# index, the pinned version gone), the script says why and exits 3.
set -euo pipefail

pinned="${QEMU_USER_VERSION:-1:7.2+dfsg-7+deb12u18+b3}"

installed() {
	dpkg-query -W -f='${Status} ${Version}\n' qemu-user 2>/dev/null | sed -n 's/^install ok installed //p'
}

if ! command -v qemu-aarch64 >/dev/null; then
	sudo=()
	if [[ "$(id -u)" != 0 ]]; then
		if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
			echo "qemu-arm64.sh: qemu-aarch64 is missing and installing qemu-user=$pinned needs root" \
				"(run as root, with password-less sudo, or install it yourself)" >&2
			exit 3
		fi
		sudo=(sudo -n)
	fi
	if ! command -v apt-get >/dev/null; then
		echo "qemu-arm64.sh: qemu-aarch64 is missing and there is no apt-get to install Debian's qemu-user=$pinned" >&2
		exit 3
	fi
	echo "qemu-arm64.sh: installing qemu-user=$pinned" >&2
	# The package index may be older than the pinned version: update it
	# once when the version is unknown.
	if ! apt-cache show "qemu-user=$pinned" >/dev/null 2>&1; then
		"${sudo[@]}" apt-get update -qq >&2 || true
	fi
	if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
		"qemu-user=$pinned" >&2; then
		echo "qemu-arm64.sh: could not install qemu-user=$pinned (apt-cache policy qemu-user lists the versions" \
			"this machine's sources serve; QEMU_USER_VERSION overrides the pin)" >&2
		exit 3
	fi
fi

qemu="$(command -v qemu-aarch64 || true)"
if [[ -z "$qemu" ]]; then
	echo "qemu-arm64.sh: qemu-user=$pinned is installed but gives no qemu-aarch64 on PATH" >&2
	exit 3
fi
if have="$(installed)" && [[ -n "$have" && "$have" != "$pinned" ]]; then
	echo "qemu-arm64.sh: note: using qemu-user $have, not the pinned $pinned" >&2
fi
echo "$qemu"
