#!/usr/bin/env bash
# Runs the PyTorch reference benchmark (bench.py) with the given flags, e.g.
#   bench/torch/run.sh --family gpt --dim 128 --layers 4 --seq 64 --batch 32
# It uses Debian's python3 (not a pyenv shim that may come first on PATH) and, when
# that python cannot import torch, installs python3-torch and libopenblas0-pthread
# with apt-get. Set PYTHON to use another interpreter that already has torch.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-/usr/bin/python3}"

missing=()
if ! "$python" -c 'import torch' >/dev/null 2>&1; then
	if [[ -n "${PYTHON:-}" ]]; then
		echo "run.sh: $python cannot import torch (unset PYTHON to use Debian's python3-torch)" >&2
		exit 1
	fi
	missing+=(python3-torch)
fi
if command -v dpkg-query >/dev/null &&
	! dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null | grep -q 'install ok installed'; then
	missing+=(libopenblas0-pthread)
fi
if ((${#missing[@]})); then
	sudo=""
	if [[ "$(id -u)" != 0 ]]; then
		command -v sudo >/dev/null || { echo "run.sh: ${missing[*]} missing; installing needs root or sudo" >&2; exit 1; }
		sudo="sudo"
	fi
	echo "run.sh: installing ${missing[*]} with apt-get" >&2
	$sudo apt-get update >&2
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y "${missing[@]}" >&2
	"$python" -c 'import torch' || { echo "run.sh: $python cannot import torch after apt-get install" >&2; exit 1; }
fi

exec "$python" "$here/bench.py" "$@"
