#!/usr/bin/env bash
# Compares hacrl's Go engine (`hacrl bench engine`) with the PyTorch reference
# (bench/torch/run.sh) on the configurations the README reports, and prints a
# Markdown table of training and sampling tokens/s with the ratios Go/torch.
#
# Usage: bench/compare.sh [flags for both engines, e.g. --steps 10 --threads 2]
#        bench/compare.sh --real [--pairs N] [--configs 'qwen2.5-0.5b qwen3-0.6b llama3.2-1b'] [flags…]
#        (a --configs entry ending in .json is the path of another config.json, from the repository root)
#        bench/compare.sh [--real …] --lora-rank 16 [--lora-alpha 32 --lora-targets all-linear] [flags…]
# Set HACRL to a prebuilt hacrl binary to skip building ./cmd/hacrl.
# The JSON line of every run goes to stderr as it finishes; the table to stdout.
# If the Go side fails, the table keeps the torch numbers and the error is printed below it.
#
# --real measures the real model shapes of bench/configs/NAME.json: for each
# config, N (default 3) alternating pairs of runs (hacrl, then torch, then
# hacrl, …), one at a time, with B=8, T=128, sampling 16 sequences × 32 new
# tokens, 2 timed training steps after 1 warm-up step and 1 timed sampling
# run; later flags override these (e.g. --layers 2 for a quick run of the
# real width and vocabulary). The table gives the medians over the pairs.
#
# --lora-rank N (0: full fine-tuning, the default) makes both sides train LoRA
# adapters of rank N on a frozen base instead of the whole model;
# --lora-alpha (default 2·N) and --lora-targets (default all-linear) go to
# both sides as well. The table then has the adapters' parameter count
# (trainable) beside the base model's (params).
# The tables are printed by bench/compare.py.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

real=""
pairs=3
lora_rank=0
real_configs="qwen2.5-0.5b qwen3-0.6b llama3.2-1b"
args=()
while (($#)); do
	case "$1" in
	--real) real=1 ;;
	--pairs)
		pairs="${2:-}"
		shift
		;;
	--configs)
		real_configs="${2:-}"
		shift
		;;
	--lora-rank)
		lora_rank="${2:-}"
		shift
		;;
	*) args+=("$1") ;;
	esac
	shift
done
if ! [[ "$lora_rank" =~ ^(0|[1-9][0-9]*)$ ]]; then
	echo "compare.sh: --lora-rank $lora_rank: want a non-negative integer (0: full fine-tuning)" >&2
	exit 2
fi
((lora_rank > 0)) && args+=(--lora-rank "$lora_rank")
set -- "${args[@]+"${args[@]}"}"
if [[ -n "$real" ]] && ! [[ "$pairs" =~ ^[1-9][0-9]*$ ]]; then
	echo "compare.sh: --pairs $pairs: want a positive integer" >&2
	exit 2
fi
if [[ -n "$real" ]]; then
	read -r -a names <<<"$real_configs"
	paths=()
	for name in "${names[@]}"; do
		# A name of bench/configs, or the path of another config.json.
		path="bench/configs/$name.json"
		[[ "$name" == *.json ]] && path="$name"
		[[ -f "$path" ]] || { echo "compare.sh: --configs: no $path" >&2; exit 2; }
		paths+=("$path")
	done
fi

configs=(
	"gpt d=128 L=4 T=64 B=32|--family gpt --vocab 32 --dim 128 --layers 4 --heads 4 --seq 64 --batch 32"
	"gpt d=256 L=4 T=64 B=32|--family gpt --vocab 32 --dim 256 --layers 4 --heads 4 --seq 64 --batch 32"
	"llama d=128 L=4 T=64 B=32 kv=2|--family llama --vocab 32 --dim 128 --layers 4 --heads 4 --kv-heads 2 --seq 64 --batch 32"
)

hacrl="${HACRL:-}"
build_error=""
if [[ -z "$hacrl" ]]; then
	hacrl="$work/hacrl"
	echo "compare.sh: building ./cmd/hacrl" >&2
	if ! GOEXPERIMENT=simd go build -o "$hacrl" ./cmd/hacrl 2>"$work/build.err"; then
		build_error="go build ./cmd/hacrl failed: $(tail -n 5 "$work/build.err")"
	fi
fi

# run NAME CMD...: runs one engine, keeping stdout, stderr and the exit status under $work/NAME.
run() {
	local name="$1"
	shift
	"$@" >"$work/$name.out" 2>"$work/$name.err"
	echo $? >"$work/$name.rc"
	grep '^{' "$work/$name.out" | tail -n 1 >&2 || true
}

if [[ -n "$real" ]]; then
	defaults=(--batch 8 --seq 128 --sample-batch 16 --sample-tokens 32 --steps 2 --warmup 1 --sample-runs 1)
	for i in "${!names[@]}"; do
		for ((p = 0; p < pairs; p++)); do
			flags=(--config "${paths[$i]}" "${defaults[@]}" "$@")
			echo "compare.sh: ${names[$i]}, pair $((p + 1))/$pairs" >&2
			if [[ -n "$build_error" ]]; then
				echo "$build_error" >"$work/go$i.$p.err"
				echo 1 >"$work/go$i.$p.rc"
				: >"$work/go$i.$p.out"
			else
				run "go$i.$p" "$hacrl" bench engine "${flags[@]}"
			fi
			run "torch$i.$p" "$root/bench/torch/run.sh" "${flags[@]}"
		done
	done
	python3 "$root/bench/compare.py" real "$work" "$pairs" "${names[@]}"
	exit 0
fi

for i in "${!configs[@]}"; do
	read -r -a flags <<<"${configs[$i]#*|}"
	echo "compare.sh: ${configs[$i]%%|*}" >&2
	if [[ -n "$build_error" ]]; then
		echo "$build_error" >"$work/go$i.err"
		echo 1 >"$work/go$i.rc"
		: >"$work/go$i.out"
	else
		run "go$i" "$hacrl" bench engine "${flags[@]}" "$@"
	fi
	run "torch$i" "$root/bench/torch/run.sh" "${flags[@]}" "$@"
done

labels=()
for c in "${configs[@]}"; do labels+=("${c%%|*}"); done
python3 "$root/bench/compare.py" small "$work" "${labels[@]}"
