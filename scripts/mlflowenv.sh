#!/usr/bin/env bash
# Creates (once) the environment of the MLflow tracking server that the tests
# of tracking/mlflow start on loopback — the exact packages and hashes of
# scripts/pyenv/mlflow/requirements.txt — and prints the path of its `mlflow`
# command on standard output. It is apart from the oracles' environment
# (scripts/pyenv.sh), whose pins MLflow's dependencies would change.
#
# Like pyenv.sh: a virtualenv under $HACRL_PYENV_DIR (default
# ${XDG_CACHE_HOME:-~/.cache}/hacrl/pyenv), named mlflow-py<version>-<hash of
# the lock>, complete once .complete is written; HACRL_PYTHON_BASE is the
# base interpreter and HACRL_SKIP_PYPI=1 exits 3 without installing.
#
# The first install downloads about 200 MB (850 MB installed) and takes about
# 2 minutes here; later calls return at once.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lock="$here/pyenv/mlflow/requirements.txt"

if [[ "${HACRL_SKIP_PYPI:-}" == 1 ]]; then
	echo "mlflowenv.sh: HACRL_SKIP_PYPI=1: not installing MLflow" >&2
	exit 3
fi

base="${HACRL_PYTHON_BASE:-python3}"
if ! version="$("$base" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3]); sys.exit(sys.version_info < (3, 11))' 2>/dev/null)"; then
	echo "mlflowenv.sh: $base is missing or older than Python 3.11 (set HACRL_PYTHON_BASE to a Python 3.11+ interpreter," \
		"or HACRL_SKIP_PYPI=1 to skip the tests against an MLflow server)" >&2
	exit 1
fi

root="${HACRL_PYENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hacrl/pyenv}"
key="$( { cat "$lock"; echo "$version $(uname -m)"; } | sha256sum | cut -c1-16)"
env="$root/mlflow-py$version-$key"
mlflow="$env/bin/mlflow"
if [[ -f "$env/.complete" ]]; then
	echo "$mlflow"
	exit 0
fi

mkdir -p "$root"
exec 9>"$root/.mlflow.lock"
flock 9
if [[ ! -f "$env/.complete" ]]; then
	start=$SECONDS
	echo "mlflowenv.sh: installing MLflow's pinned packages into $env (a few minutes the first time)" >&2
	rm -rf "$env"
	"$base" -m venv "$env"
	# --no-deps: the lock names every package, each with its hashes.
	if ! "$env/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
		--require-hashes --no-deps --only-binary=:all: -r "$lock" >&2; then
		echo "mlflowenv.sh: pip could not install $lock: the first install needs the Python package index" \
			"(set HACRL_SKIP_PYPI=1 to skip the tests against an MLflow server on a machine without it)" >&2
		exit 1
	fi
	"$env/bin/python" -c 'import mlflow.server' >&2
	touch "$env/.complete"
	for old in "$root"/mlflow-py*; do
		[[ "$old" == "$env" ]] || rm -rf "$old"
	done
	echo "mlflowenv.sh: installed in $((SECONDS - start)) s" >&2
fi
echo "$mlflow"
