#!/usr/bin/env bash
# Installs (once) the CPU PJRT plugin of scripts/xla/requirements.txt — the
# pinned, hashed PyPI wheel lammps-jax-pjrt-cpu — and prints the path of its
# pjrt_c_api_cpu_plugin.so on standard output. With it, a hacrl built with
# -tags xla runs its graphs on XLA's CPU client (backend xla:cpu): the test
# suite checks the XLA path this way on machines without a GPU, and hacrl's
# plugin search (backend.FindXLAPlugin) looks where this script installs.
#
# The plugin goes to ${XDG_CACHE_HOME:-~/.cache}/hacrl/xla/<package>-<version>/,
# unpacked from the wheel (it is a self-contained shared library; the wheel's
# declared dependency on jax is not needed and not installed). The download is
# 60 MB. An install cut short leaves nothing behind: the directory appears
# only when complete. HACRL_SKIP_PYPI=1 exits 3 without installing (offline
# machines; the tests that need the plugin then skip), as scripts/pyenv.sh.
# The wheel is built for x86-64 Linux only: elsewhere this exits 4.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lock="$here/xla/requirements.txt"
spec="$(grep -Eo '^[a-z0-9-]+==[^ ]+' "$lock")"
name="${spec%%==*}" version="${spec##*==}"
module="${name//-/_}"

root="${XDG_CACHE_HOME:-$HOME/.cache}/hacrl/xla"
dest="$root/$name-$version"
plugin="$dest/$module/pjrt_c_api_cpu_plugin.so"
if [[ -f "$plugin" ]]; then
	echo "$plugin"
	exit 0
fi
if [[ "${HACRL_SKIP_PYPI:-}" == 1 ]]; then
	echo "xla-cpu-plugin.sh: HACRL_SKIP_PYPI=1: not installing $spec" >&2
	exit 3
fi
if [[ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]]; then
	echo "xla-cpu-plugin.sh: $spec is built for Linux x86-64 only, not $(uname -s) $(uname -m)" >&2
	exit 4
fi

# Any Python with pip downloads the wheel: python3's own, or else the project's
# environment (scripts/pyenv.sh).
python="${HACRL_PYTHON_BASE:-python3}"
if ! "$python" -m pip --version >/dev/null 2>&1; then
	python="${HACRL_PYTHON:-$("$here/pyenv.sh")}"
fi

mkdir -p "$root"
exec 9>"$root/.lock"
flock 9
if [[ ! -f "$plugin" ]]; then
	tmp="$(mktemp -d "$root/.install.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	echo "xla-cpu-plugin.sh: downloading $spec (60 MB) into $dest" >&2
	"$python" -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
		--platform manylinux_2_27_x86_64 --python-version 3 --implementation py \
		-r "$lock" -d "$tmp/wheel" >&2
	"$python" -m zipfile -e "$tmp"/wheel/*.whl "$tmp/unpacked"
	test -f "$tmp/unpacked/$module/pjrt_c_api_cpu_plugin.so"
	rm -rf "$dest"
	mv "$tmp/unpacked" "$dest"
fi
echo "$plugin"
