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
source "$here/lib/pinned-venv.sh"
env="$(pinned_venv mlflowenv.sh "$here/pyenv/mlflow/requirements.txt" mlflow- .mlflow.lock \
	"the tests against an MLflow server" 'import mlflow.server' \
	"about 200 MB to download, 850 MB installed, a few minutes the first time")"
echo "$env/bin/mlflow"
