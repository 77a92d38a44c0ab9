#!/usr/bin/env bash
# Creates (once) the project's Python environment — the exact packages and
# hashes of scripts/pyenv/requirements.txt: PyTorch, transformers, PEFT,
# safetensors, tokenizers, math-verify, TensorBoard, TRL — and prints its
# interpreter's path on standard output. Tests use it as the independent
# implementation hacrl is checked against, bench/ as the peer it is measured
# with.
#
# The environment is a virtualenv under $HACRL_PYENV_DIR (default
# ${XDG_CACHE_HOME:-~/.cache}/hacrl/pyenv), named by a hash of the lock file and
# the base interpreter's version, so a clean clone reuses it and a changed
# lock makes a new one (older ones are removed once it is complete). An
# install that stops half-way is redone: the environment counts only once
# its last step wrote .complete. One install runs at a time (flock).
#
#   HACRL_PYTHON_BASE   the interpreter the virtualenv is made from (default:
#                       python3 on PATH; 3.11 or newer)
#   HACRL_PYENV_DIR     where environments are kept
#   HACRL_SKIP_PYPI=1   on a machine without the Python package index: this
#                       script exits 3 without installing, and the tests that
#                       need the environment skip. CI never sets it.
#
# The first install downloads about 4 GB (PyTorch's wheel depends on the CUDA
# libraries on Linux) and takes about 3 minutes here; later calls return at
# once.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib/pinned-venv.sh"
env="$(pinned_venv pyenv.sh "$here/pyenv/requirements.txt" "" .lock "the checks against the Python libraries" \
	'import torch, transformers, peft, safetensors, tokenizers, math_verify, tensorboard, trl' \
	"about 4 GB, a few minutes the first time")"
echo "$env/bin/python"
