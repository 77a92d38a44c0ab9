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
lock="$here/pyenv/requirements.txt"

if [[ "${HACRL_SKIP_PYPI:-}" == 1 ]]; then
	echo "pyenv.sh: HACRL_SKIP_PYPI=1: not installing the Python environment" >&2
	exit 3
fi

base="${HACRL_PYTHON_BASE:-python3}"
if ! version="$("$base" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3]); sys.exit(sys.version_info < (3, 11))' 2>/dev/null)"; then
	echo "pyenv.sh: $base is missing or older than Python 3.11 (set HACRL_PYTHON_BASE to a Python 3.11+ interpreter," \
		"or HACRL_SKIP_PYPI=1 to skip the checks against the Python libraries)" >&2
	exit 1
fi

root="${HACRL_PYENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hacrl/pyenv}"
key="$( { cat "$lock"; echo "$version $(uname -m)"; } | sha256sum | cut -c1-16)"
env="$root/py$version-$key"
python="$env/bin/python"
if [[ -f "$env/.complete" ]]; then
	echo "$python"
	exit 0
fi

mkdir -p "$root"
exec 9>"$root/.lock"
flock 9
if [[ ! -f "$env/.complete" ]]; then
	start=$SECONDS
	echo "pyenv.sh: installing the pinned Python packages into $env (about 4 GB, a few minutes the first time)" >&2
	rm -rf "$env"
	"$base" -m venv "$env"
	# --no-deps: the lock names every package, each with its hashes.
	if ! "$python" -m pip install --quiet --disable-pip-version-check --no-input \
		--require-hashes --no-deps --only-binary=:all: -r "$lock" >&2; then
		echo "pyenv.sh: pip could not install $lock: the first install needs the Python package index" \
			"(set HACRL_SKIP_PYPI=1 to skip the checks against the Python libraries on a machine without it)" >&2
		exit 1
	fi
	"$python" -c 'import torch, transformers, peft, safetensors, tokenizers, math_verify, tensorboard, trl' >&2
	touch "$env/.complete"
	for old in "$root"/py*; do
		[[ "$old" == "$env" ]] || rm -rf "$old"
	done
	echo "pyenv.sh: installed in $((SECONDS - start)) s" >&2
fi
echo "$python"
