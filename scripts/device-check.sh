#!/usr/bin/env bash
# The GPU check: one prepared run of hacrl's XLA path on a lent GPU machine,
# against PyTorch and transformers on the same GPU, in at most 9 minutes.
#
#   scripts/build-xla.sh              # here: bin/hacrl-xla (cgo, -tags xla)
#   scripts/device-check.sh           # there: carry bin/hacrl-xla
#   scripts/device-check.sh --cpu     # the same parts, shortened, on xla:cpu
#                                     # (the suite's dry run, internal/devicecheck)
#
# It writes $OUT/device-check.json and $OUT/device-check.md (OUT defaults to
# out), and each part's output under $OUT/parts as it goes, so a part that
# fails or runs out of time loses nothing else; checkpoints and runs go to a
# fresh folder under $TMPDIR (removed at the end unless KEEP_WORK=1). The
# parts, most telling first; each has a time limit, cut to what is left of
# BUDGET, and is recorded as skipped when under 20 s are left:
#
#   env        the GPU, driver, glibc, Python packages, where the CUDA plugin
#              is (hacrl's own search, then jax_plugins' through Python)
#   logprobs   per-token log-probs of hacrl (graph engine, xla:cuda) against
#              transformers on the GPU for one random-weight checkpoint of
#              Qwen3-0.6B's shape (8 blocks on the GPU), float32 and bfloat16
#   bench      hacrl bench engine against bench/torch/hf_bench.py (transformers'
#              model, fused AdamW, autocast; generate) at the Qwen3-0.6B and
#              Llama-3.2-1B shapes of bench/configs, bfloat16 then (after the
#              HACPO step) float32: training and sampling tokens/s, peak GPU
#              memory, model FLOP utilisation against PEAK_TFLOPS
#   hacpo      HACPO steps of the examples/real pairing's shapes (Qwen3-0.6B and
#              Llama-3.2-1B, random weights, the arith task, short answers)
#              with hacrl train's per-phase times (metrics.jsonl): two on the
#              GPU (the first compiles), one on the CPU
#
# The GPU machine has Python with torch, transformers and jax-cuda13-pjrt, no
# network and no Go: the hacrl binary is built here and carried. Environment:
# HACRL (default bin/hacrl-xla), PYTHON (default $HACRL_PYTHON, else python3),
# BUDGET (seconds, default 540), PEAK_TFLOPS (default 790, a bf16 dense
# matmul rate of an H100/H200; H100 SXM's datasheet figure is 989),
# HACRL_XLA_PLUGIN (the CUDA plugin, if hacrl's search misses it).
set -uo pipefail
cd "$(dirname "$0")/.."

mode=gpu
if [[ "${1:-}" == --cpu ]]; then
	mode=cpu
fi
OUT="${OUT:-out}"
HACRL="${HACRL:-bin/hacrl-xla}"
PYTHON="${PYTHON:-${HACRL_PYTHON:-python3}}"
BUDGET="${BUDGET:-540}"
PEAK_TFLOPS="${PEAK_TFLOPS:-790}"
parts="$OUT/parts"
rm -rf "$parts"
mkdir -p "$parts"
work="$(mktemp -d "${TMPDIR:-/tmp}/hacrl-device-check.XXXXXX")" || exit 1
[[ -n ${KEEP_WORK:-} ]] || trap 'rm -rf "$work"' EXIT
start=$SECONDS
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

if [[ $mode == gpu ]]; then
	backend=xla:cuda
	threads=16
	device=cuda
else
	backend=xla:cpu
	threads=2
	device=cpu
fi

# part NAME SECONDS CMD… runs CMD with its output in $parts/NAME.out (and
# .err, .rc, .s), for at most SECONDS or what is left of the budget less
# RESERVE (the report's time); with under MIN_PART seconds left it is skipped.
RESERVE=15 MIN_PART=20
part() {
	local name="$1" limit="$2"
	shift 2
	local left=$((BUDGET - (SECONDS - start) - RESERVE))
	if ((left < MIN_PART)); then
		echo "skipped: ${left}s of the budget left" >"$parts/$name.skipped"
		echo "== $name: skipped (${left}s left)" >&2
		return 1
	fi
	((limit > left)) && limit=$left
	echo "== $name (at most ${limit}s)" >&2
	local t0=$SECONDS
	timeout --kill-after=10 "$limit" "$@" >"$parts/$name.out" 2>"$parts/$name.err"
	local rc=$?
	echo $rc >"$parts/$name.rc"
	echo $((SECONDS - t0)) >"$parts/$name.s"
	if ((rc != 0)); then
		echo "   $name: exit $rc; last lines of its stderr:" >&2
		tail -n 5 "$parts/$name.err" >&2
	fi
	return $rc
}

# gpu_peak NAME CMD… is part with the GPU memory in use sampled every 100 ms
# (nvidia-smi; the whole GPU, which this check has to itself); the largest
# value less the memory in use before the part goes to $parts/NAME.gpumem
# (MiB): the process's CUDA context and XLA's allocator pool, which keeps
# what it once held (PyTorch's peer is max_memory_reserved).
gpu_peak() {
	local name="$1"
	shift
	local poll="" base=0
	if [[ $mode == gpu ]] && command -v nvidia-smi >/dev/null; then
		base="$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -n 1)"
		nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$work/$name.mem" 2>/dev/null &
		poll=$!
	fi
	part "$name" "$@"
	local rc=$?
	if [[ -n $poll ]]; then
		kill "$poll" 2>/dev/null
		wait "$poll" 2>/dev/null
		local peak
		peak="$(sort -n "$work/$name.mem" | tail -n 1)"
		[[ -n $peak ]] && echo $((peak - ${base:-0})) >"$parts/$name.gpumem"
	fi
	return $rc
}

# The environment, and whether the carried binary runs here at all: a
# binary built against a newer glibc than the machine's fails to start
# ("GLIBC_2.34 not found"), which env.err keeps and the report shows.
{
	echo "mode=$mode backend=$backend"
	uname -a
	ldd --version 2>&1 | head -n 1
	echo "XLA_FLAGS=${XLA_FLAGS:-} CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}"
	if command -v nvidia-smi >/dev/null; then
		nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	elif [[ $mode == gpu ]]; then
		echo "nvidia-smi: not on PATH (no GPU memory figures for hacrl)" >&2
	fi
	if [[ ! -x $HACRL ]]; then
		echo "$HACRL: no such executable (build it with scripts/build-xla.sh and carry it)" >&2
	elif "$HACRL" --help >/dev/null; then
		echo "hacrl: runs"
	else
		echo "$HACRL does not start here (glibc: $(ldd --version 2>&1 | head -n 1); scripts/build-xla.sh prints what the binary needs)" >&2
	fi
} >"$parts/env.out" 2>"$parts/env.err"
"$PYTHON" - >"$parts/env-python.out" 2>>"$parts/env.err" <<'EOF'
import importlib, importlib.util, json, os, sys
info = {"python": sys.version.split()[0]}
for name in ("torch", "transformers", "jax", "jaxlib", "tokenizers"):
    try:
        info[name] = importlib.import_module(name).__version__
    except Exception as err:  # a missing package is reported, not fatal
        info[name] = f"missing: {err.__class__.__name__}"
try:
    import torch
    info["cuda"] = torch.version.cuda
    info["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
except Exception:
    pass
looked = []
for mod in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
    try:
        spec = importlib.util.find_spec(mod)
    except Exception:
        spec = None
    for d in (spec.submodule_search_locations or []) if spec else []:
        so = os.path.join(d, "xla_cuda_plugin.so")
        looked.append(so)
        if os.path.exists(so) and "cuda_plugin" not in info:
            info["cuda_plugin"] = so
info["cuda_plugin_looked"] = looked
print(json.dumps(info))
EOF
if [[ $mode == gpu && -z "${HACRL_XLA_PLUGIN:-}" ]]; then
	# hacrl finds the plugin itself (its error lists every place it looked);
	# the Python that has jax says where it is too, in case its packages are
	# where hacrl does not look.
	plugin="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("cuda_plugin") or "")' "$parts/env-python.out" 2>/dev/null)"
	if ! timeout 120 "$HACRL" bench engine --engine graph --backend xla:cuda --dim 16 --layers 1 --seq 8 --batch 1 --steps 1 --warmup 0 --sample-runs 1 --mem-read-mb 0 >"$parts/plugin-search.out" 2>"$parts/plugin-search.err"; then
		if [[ -n $plugin ]]; then
			export HACRL_XLA_PLUGIN="$plugin"
			echo "hacrl's own search failed (plugin-search.err); using HACRL_XLA_PLUGIN=$plugin, from $PYTHON's jax_plugins" >"$parts/plugin-search.note"
		else
			echo "hacrl's own search failed (plugin-search.err), and $PYTHON has no jax_plugins/xla_cuda13 or 12 either" >"$parts/plugin-search.note"
		fi
		cat "$parts/plugin-search.note" >&2
		tail -n 20 "$parts/plugin-search.err" >&2
	fi
fi

# Shapes: the published configs on the GPU; on the CPU narrow ones, with the
# same structure (bench/configs' fields), so every part runs in seconds.
configs=(qwen3-0.6b llama3.2-1b)
for c in "${configs[@]}"; do
	if [[ $mode == gpu ]]; then
		cp "bench/configs/$c.json" "$work/$c.json"
	else
		"$PYTHON" - "bench/configs/$c.json" "$work/$c.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
         num_hidden_layers=1, vocab_size=1024, bos_token_id=0, eos_token_id=1)
json.dump(c, open(sys.argv[2], "w"), indent=1)
EOF
	fi
done
# Each part's limit in seconds; a part gets less when less of the budget is
# left. On the GPU the log-prob checkpoint keeps 8 of Qwen3-0.6B's 28 blocks
# (XLA compiles one graph per shape, and full depth adds compile time, not
# coverage); the benchmarks and the HACPO step run the full models, the
# step twice on the GPU: XLA compiles each graph in the first, so the
# second's phase times are the steady ones.
if [[ $mode == gpu ]]; then
	train=(--seq 512 --batch 8 --steps 4 --warmup 1)
	sample=(--sample-batch 64 --sample-prompt 32 --sample-tokens 128 --sample-runs 1)
	t_logprobs=100 t_hacrl=120 t_torch=60 t_hacpo=180
	lp_layers=8
	hacpo=(--steps 2 --prompts 8 --responses 4 --max-new-tokens 64)
else
	train=(--seq 16 --batch 2 --steps 1 --warmup 1)
	sample=(--sample-batch 2 --sample-prompt 4 --sample-tokens 8 --sample-runs 1)
	t_logprobs=90 t_hacrl=60 t_torch=60 t_hacpo=90
	lp_layers=0
	hacpo=(--steps 1 --prompts 2 --responses 2 --max-new-tokens 8)
fi
export WORK="$work" HACRL PYTHON BACKEND="$backend" DEVICE="$device" LP_LAYERS="$lp_layers" HACPO_ARGS="${hacpo[*]}"

bench() { # bench DTYPE MODEL…: hacrl then PyTorch, for each model
	local dt="$1" c
	shift
	for c in "$@"; do
		gpu_peak "bench-hacrl-$c-$dt" "$t_hacrl" "$HACRL" bench engine --engine graph --backend "$backend" --threads "$threads" \
			--config "$work/$c.json" --compute-dtype "$dt" "${train[@]}" "${sample[@]}" --mem-read-mb 0
		part "bench-torch-$c-$dt" "$t_torch" "$PYTHON" bench/torch/hf_bench.py --config "$work/$c.json" --device "$device" \
			--dtype "$dt" "${train[@]}" "${sample[@]}"
	done
}

# Most telling first: correctness, bfloat16 speed, the HACPO step, float32.
# The dry run benchmarks one shape in each dtype: the same commands, half the time.
if [[ $mode == gpu ]]; then
	bf16_models=("${configs[@]}") f32_models=("${configs[@]}")
else
	bf16_models=(qwen3-0.6b) f32_models=(llama3.2-1b)
fi
part logprobs "$t_logprobs" scripts/devicecheck/logprobs.sh
bench bfloat16 "${bf16_models[@]}"
gpu_peak hacpo "$t_hacpo" scripts/devicecheck/hacpo.sh
bench float32 "${f32_models[@]}"

"$PYTHON" scripts/devicecheck/report.py "$OUT" --work "$work" --mode "$mode" --peak-tflops "$PEAK_TFLOPS" --seconds $((SECONDS - start))
