#!/usr/bin/env bash
# scripts/device-check.sh's HACPO part: random-weight agents of
# $WORK/qwen3-0.6b.json and $WORK/llama3.2-1b.json, the hacrl train steps of
# hacpo.py's config ($HACPO_ARGS) on $BACKEND; prints the run's metrics.jsonl.
set -euo pipefail
"$PYTHON" scripts/devicecheck/agents.py make --device "$DEVICE" \
	"$WORK/agents/qwen3-0.6b" "$WORK/qwen3-0.6b.json" "$WORK/agents/llama3.2-1b" "$WORK/llama3.2-1b.json" >&2
# shellcheck disable=SC2086
"$PYTHON" scripts/devicecheck/hacpo.py "$WORK" $HACPO_ARGS --dtype bfloat16 >"$WORK/hacpo.yaml"
"$HACRL" train "$WORK/hacpo.yaml" --backend "$BACKEND" --out "$WORK/hacpo-run" >&2
cat "$WORK/hacpo-run/metrics.jsonl"
