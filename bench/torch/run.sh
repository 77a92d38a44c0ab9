#!/usr/bin/env bash
# Runs the PyTorch reference benchmark (bench.py) with the given flags, e.g.
#   bench/torch/run.sh --family gpt --dim 128 --layers 4 --seq 64 --batch 32
# under the project's pinned Python environment (scripts/pyenv.sh: PyTorch
# 2.15 from the Python package index, installed and cached on first use). Set
# HACRL_PYTHON to use another interpreter that already has torch.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${HACRL_PYTHON:-}"
if [[ -z "$python" ]]; then
	python="$("$here/../../scripts/pyenv.sh")"
fi
exec "$python" "$here/bench.py" "$@"
