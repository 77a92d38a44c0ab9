#!/usr/bin/env bash
# Remakes the initial agents of the laptop reproduction (and of the
# complementary-skills setting, complement-*) with hacrl sft,
# replacing the shipped ones in examples/experiment/agents (each config alone
# writes to runs/sft/experiment/<name>, leaving the shipped agent as it is).
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOEXPERIMENT=simd
go build -o /tmp/hacrl-make-agents ./cmd/hacrl
for f in examples/experiment/sft/*.yaml; do
  out="examples/experiment/agents/$(basename "$f" .yaml)"
  /tmp/hacrl-make-agents sft "$f" --out "$out"
  rm -f "$out/optimizer.safetensors" # SFT's Adam state, only for resuming SFT: a run starts its own optimizer
done
