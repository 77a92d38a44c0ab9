#!/usr/bin/env bash
# Remakes the initial agents of the laptop reproduction with hacrl sft.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOEXPERIMENT=simd
go build -o /tmp/hacrl-make-agents ./cmd/hacrl
for f in examples/experiment/sft/*.yaml; do
  /tmp/hacrl-make-agents sft "$f"
done
