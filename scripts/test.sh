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
echo "== python3-torch (the PyTorch reference of the model tests)"
# model.TestMatchesPyTorch runs bench/torch/hf_logprobs.py with Debian's
# python3 (or $PYTHON); install python3-torch when it cannot import torch.
# HACRL_TORCH=skip skips that test instead.
if [[ "${HACRL_TORCH:-}" != skip ]] && ! "${PYTHON:-/usr/bin/python3}" -c 'import torch' >/dev/null 2>&1; then
  if [[ -n "${PYTHON:-}" || "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "${PYTHON:-/usr/bin/python3} cannot import torch; installing python3-torch needs root with apt-get" \
      "(or set PYTHON to an interpreter with torch, or HACRL_TORCH=skip)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null
  /usr/bin/python3 -c 'import torch'
fi
echo "== go test"
go test -count=1 -timeout 25m ./... 2>&1 | tee /tmp/hacrl-test.log
