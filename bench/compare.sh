#!/usr/bin/env bash
# Compares hacrl's Go engine (`hacrl bench engine`) with its PyTorch peers
# (bench/torch: bench.py through run.sh, and transformers' classes through
# hf_bench.py) on the configurations the README reports, and prints a Markdown
# table of training and sampling tokens/s with the ratios hacrl/peer.
#
# Usage: bench/compare.sh [--pairs N] [--peers 'torch …'] [flags for both engines, e.g. --steps 10 --threads 2]
#        bench/compare.sh --real [--pairs N] [--peers 'torch …'] [--configs 'qwen2.5-0.5b qwen3-0.6b llama3.2-1b'] [flags…]
#        (a --configs entry ending in .json is the path of another config.json, from the repository root)
#        bench/compare.sh [--real …] --lora-rank 16 [--lora-alpha 32 --lora-targets all-linear] [flags…]
# Set HACRL to a prebuilt hacrl binary to skip building ./cmd/hacrl, and
# HACRL_PYTHON to an interpreter with torch (default: scripts/pyenv.sh's).
#
# --peers (default torch) names the PyTorch runs set beside hacrl's, any of:
#   torch       bench/torch/bench.py, float32
#   torch-bf16  bench/torch/bench.py --dtype bfloat16: forward passes under
#               torch.autocast(cpu, bfloat16) over float32 weights
#   hf          transformers' AutoModelForCausalLM (bench/torch/hf_bench.py
#               --device cpu), float32; PEFT's LoRA with --lora-rank
#   hf-bf16     the same, --dtype bfloat16 (autocast training, bf16 weights
#               for generate)
# The hf peers need a config.json, so they run only with --real; for the toy
# configs they are skipped, and the table says so. Every pair runs hacrl, then
# each peer in turn, one process at a time; the tables give one ratio column
# (hacrl / peer) per peer, the medians of the per-pair ratios, and list every
# run below. --pairs defaults to 1 for the toy configs, 3 with --real.
# The JSON line of every run goes to stderr as it finishes; the table to stdout.
# If the Go side fails, the table keeps the torch numbers and the error is printed below it.
#
# --real measures the real model shapes of bench/configs/NAME.json: for each
# config, N (default 3) alternating pairs of runs (hacrl, then each peer, then
# hacrl, …), one at a time, with B=8, T=128, sampling 16 sequences × 32 new
# tokens, 2 timed training steps after 1 warm-up step and 1 timed sampling
# run; later flags override these (e.g. --layers 2 for a quick run of the
# real width and vocabulary). The table gives the medians over the pairs.
#
# --lora-rank N (0: full fine-tuning, the default) makes every side train LoRA
# adapters of rank N on a frozen base instead of the whole model;
# --lora-alpha (default 2·N) and --lora-targets (default all-linear) go to
# every side as well. The table then has the adapters' parameter count
# (trainable) beside the base model's (params).
# The tables are printed by bench/compare.py.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

real=""
pairs=""
peers="torch"
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
	--peers)
		peers="${2:-}"
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
if [[ -z "$pairs" ]]; then
	pairs=1
	[[ -n "$real" ]] && pairs=3
fi
if ! [[ "$pairs" =~ ^[1-9][0-9]*$ ]]; then
	echo "compare.sh: --pairs $pairs: want a positive integer" >&2
	exit 2
fi
read -r -a peer_list <<<"$peers"
if ((${#peer_list[@]} == 0)); then
	echo "compare.sh: --peers '$peers': want one or more of torch, torch-bf16, hf, hf-bf16" >&2
	exit 2
fi
runs=() skipped=()
for peer in "${peer_list[@]}"; do
	case "$peer" in
	torch | torch-bf16) runs+=("$peer") ;;
	hf | hf-bf16)
		if [[ -n "$real" ]]; then
			runs+=("$peer")
		else
			skipped+=("$peer")
			echo "compare.sh: --peers $peer: transformers' classes need a config.json; skipped for the toy configs (use --real)" >&2
		fi
		;;
	*)
		echo "compare.sh: --peers: unknown peer '$peer', want torch, torch-bf16, hf or hf-bf16" >&2
		exit 2
		;;
	esac
done
python=""
if [[ " ${runs[*]} " == *" hf"* ]]; then
	python="${HACRL_PYTHON:-}"
	[[ -n "$python" ]] || python="$("$root/scripts/pyenv.sh")" || exit 1
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

# peer NAME FLAGS...: runs peer NAME on the given flags.
peer() {
	local name="$1"
	shift
	case "$name" in
	torch) "$root/bench/torch/run.sh" "$@" ;;
	torch-bf16) "$root/bench/torch/run.sh" "$@" --dtype bfloat16 ;;
	# hf_bench's own defaults differ from hacrl's: the 1-token prompt and 2 threads first, the caller's flags after.
	hf) HF_HUB_OFFLINE=1 "$python" "$root/bench/torch/hf_bench.py" --device cpu --sample-prompt 1 --threads 2 "$@" ;;
	hf-bf16) HF_HUB_OFFLINE=1 "$python" "$root/bench/torch/hf_bench.py" --device cpu --sample-prompt 1 --threads 2 "$@" --dtype bfloat16 ;;
	esac
}

# pair LABEL I P FLAGS...: pair P of config I: hacrl, then every peer.
pair() {
	local label="$1" i="$2" p="$3" name
	shift 3
	echo "compare.sh: $label, pair $((p + 1))/$pairs" >&2
	if [[ -n "$build_error" ]]; then
		echo "$build_error" >"$work/go.$i.$p.err"
		echo 1 >"$work/go.$i.$p.rc"
		: >"$work/go.$i.$p.out"
	else
		run "go.$i.$p" "$hacrl" bench engine "$@"
	fi
	for name in "${runs[@]}"; do
		run "$name.$i.$p" peer "$name" "$@"
	done
}

if [[ -n "$real" ]]; then
	defaults=(--batch 8 --seq 128 --sample-batch 16 --sample-tokens 32 --steps 2 --warmup 1 --sample-runs 1)
	for i in "${!names[@]}"; do
		for ((p = 0; p < pairs; p++)); do
			pair "${names[$i]}" "$i" "$p" --config "${paths[$i]}" "${defaults[@]}" "$@"
		done
	done
	python3 "$root/bench/compare.py" real "$work" "$pairs" "${runs[*]}" "${skipped[*]-}" "${names[@]}"
	exit 0
fi

labels=()
for i in "${!configs[@]}"; do
	read -r -a flags <<<"${configs[$i]#*|}"
	labels+=("${configs[$i]%%|*}")
	for ((p = 0; p < pairs; p++)); do
		pair "${labels[$i]}" "$i" "$p" "${flags[@]}" "$@"
	done
done
python3 "$root/bench/compare.py" small "$work" "$pairs" "${runs[*]}" "${skipped[*]-}" "${labels[@]}"
