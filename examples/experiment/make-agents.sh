#!/usr/bin/env bash
# Remakes the initial agents of the laptop reproduction with hacrl sft,
# replacing the shipped ones in examples/experiment/agents (each config alone
# writes to runs/sft/experiment/<name>, leaving the shipped agent as it is).
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOEXPERIMENT=simd
go build -o /tmp/hacrl-make-agents ./cmd/hacrl
for f in examples/experiment/sft/*.yaml; do
  /tmp/hacrl-make-agents sft "$f" --out "examples/experiment/agents/$(basename "$f" .yaml)"
done
