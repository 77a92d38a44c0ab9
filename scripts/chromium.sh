#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed at /usr/bin/chromium, the browser
# that view's browser test (view/browser_test.go) drives headless through
# playwright-core, and prints its path on standard output:
#
#   scripts/chromium.sh && go test -run TestBrowser ./view
#
# The package is pinned to the version Debian bookworm serves
# (CHROMIUM_VERSION overrides the pin). A chromium already installed, in
# whatever version, is used as it is, with a note on standard error when it
# is not the pinned one; running the script again does nothing more. When
# chromium is missing and cannot be installed (no root and no password-less
# sudo, no apt-get, the pinned version gone from the sources), the script
# says why and exits 3.
set -euo pipefail

pinned="${CHROMIUM_VERSION:-156.0.8078.108-1~deb12u1}"

installed() {
	dpkg-query -W -f='${Status} ${Version}\n' chromium 2>/dev/null | sed -n 's/^install ok installed //p'
}

if [[ ! -x /usr/bin/chromium ]]; then
	sudo=()
	if [[ "$(id -u)" != 0 ]]; then
		if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
			echo "chromium.sh: /usr/bin/chromium is missing and installing chromium=$pinned needs root" \
				"(run as root, with password-less sudo, or install it yourself)" >&2
			exit 3
		fi
		sudo=(sudo -n)
	fi
	if ! command -v apt-get >/dev/null; then
		echo "chromium.sh: /usr/bin/chromium is missing and there is no apt-get to install Debian's chromium=$pinned" >&2
		exit 3
	fi
	echo "chromium.sh: installing chromium=$pinned" >&2
	# The package index may be older than the pinned version: update it
	# once when the version is unknown.
	if ! apt-cache show "chromium=$pinned" >/dev/null 2>&1; then
		"${sudo[@]}" apt-get update -qq >&2 || true
	fi
	# chromium-common and chromium-sandbox come from the same source
	# package: pin them too, or apt may pick another version of them.
	if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
		"chromium=$pinned" "chromium-common=$pinned" >&2; then
		echo "chromium.sh: could not install chromium=$pinned (apt-cache policy chromium lists the versions" \
			"this machine's sources serve; CHROMIUM_VERSION overrides the pin)" >&2
		exit 3
	fi
	echo "chromium.sh: installed chromium $(installed)" >&2
fi

if [[ ! -x /usr/bin/chromium ]]; then
	echo "chromium.sh: chromium=$pinned is installed but there is no /usr/bin/chromium" >&2
	exit 3
fi
if have="$(installed)" && [[ -n "$have" && "$have" != "$pinned" ]]; then
	echo "chromium.sh: note: using chromium $have, not the pinned $pinned" >&2
fi
echo /usr/bin/chromium
