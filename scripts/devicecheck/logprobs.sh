#!/usr/bin/env bash
# scripts/device-check.sh's log-prob part: one random-weight checkpoint of
# $WORK/qwen3-0.6b.json ($LP_LAYERS blocks of it when not 0), scored by hacrl
# ($HACRL score on $BACKEND) and by transformers ($PYTHON on $DEVICE), in
# float32 and bfloat16 (hacrl's bfloat16 also without fused attention);
# prints the comparison (sequences.py compare).
set -euo pipefail
ck="$WORK/agents/logprobs-qwen3"
"$PYTHON" scripts/devicecheck/agents.py make "$ck" "$WORK/qwen3-0.6b.json" --layers "${LP_LAYERS:-0}" --device "$DEVICE" >&2
"$PYTHON" scripts/devicecheck/sequences.py "$WORK/seqs"
for dt in float32 bfloat16; do
	"$HACRL" score "$ck" --jsonl "$WORK/seqs.jsonl" --backend "$BACKEND" --compute-dtype "$dt" >"$WORK/hacrl-$dt.jsonl"
done
# bfloat16 scoring takes cuDNN's fused attention where the backend offers it
# (xla:cuda); the same without it says what the fused kernel changes.
HACRL_FUSED_ATTENTION=0 "$HACRL" score "$ck" --jsonl "$WORK/seqs.jsonl" --backend "$BACKEND" --compute-dtype bfloat16 \
	>"$WORK/hacrl-bfloat16-decomposed.jsonl"
"$PYTHON" scripts/devicecheck/agents.py logprobs "$ck" "$WORK/seqs.json" --device "$DEVICE" --dtype float32 bfloat16 >"$WORK/hf.json"
"$PYTHON" scripts/devicecheck/sequences.py compare "$WORK"
