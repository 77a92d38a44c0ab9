#!/usr/bin/env bash
# The project's test command: vet, the XLA build check, and the whole test suite
# with the pure-Go backend and SIMD kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOEXPERIMENT=simd
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
echo "== gofmt"
unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
echo "== go vet"
go vet ./...
echo "== CGO_ENABLED=0 build"
CGO_ENABLED=0 go build -o /dev/null ./...
if command -v gcc >/dev/null; then
  echo "== XLA build tag compiles"
  CGO_ENABLED=1 go build -tags xla -o /dev/null ./backend/
fi
echo "== Python environment (scripts/pyenv.sh: the pinned libraries the tests check hacrl against)"
# The tests' oracles: transformers, PEFT, tokenizers, math-verify, TensorBoard
# and PyTorch, pinned with hashes in scripts/pyenv/requirements.txt and cached
# between runs. HACRL_SKIP_PYPI=1 skips those tests on a machine without the
# Python package index; CI never sets it.
if [[ -z "${HACRL_PYTHON:-}" && "${HACRL_SKIP_PYPI:-}" != 1 ]]; then
  start=$SECONDS
  HACRL_PYTHON="$(./scripts/pyenv.sh)"
  export HACRL_PYTHON
  echo "$HACRL_PYTHON ready in $((SECONDS - start)) s"
fi
echo "== go test"
go test -count=1 -timeout 25m ./... 2>&1 | tee /tmp/hacrl-test.log
