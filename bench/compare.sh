#!/usr/bin/env bash
# Compares hacrl's Go engine (`hacrl bench engine`) with the PyTorch reference
# (bench/torch/run.sh) on the configurations the README reports, and prints a
# Markdown table of training and sampling tokens/s with the ratios Go/torch.
#
# Usage: bench/compare.sh [flags for both engines, e.g. --steps 10 --threads 2]
#        bench/compare.sh --real [--pairs N] [--configs 'qwen2.5-0.5b qwen3-0.6b llama3.2-1b'] [flags…]
#        (a --configs entry ending in .json is the path of another config.json, from the repository root)
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
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

real=""
pairs=3
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
	*) args+=("$1") ;;
	esac
	shift
done
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
	python3 - "$work" "$pairs" "${names[@]}" <<'EOF'
import json
import statistics
import sys

work, pairs, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]


def result(name):
    """The engine's JSON result, or None and an error message."""
    rc = open(f"{work}/{name}.rc").read().strip()
    lines = [l for l in open(f"{work}/{name}.out") if l.startswith("{")]
    err = open(f"{work}/{name}.err").read().strip().splitlines()
    if rc == "0" and lines:
        try:
            return json.loads(lines[-1]), None
        except json.JSONDecodeError as e:
            return None, f"output is not JSON ({e}): {lines[-1].strip()}"
    why = "\n    ".join(err[-5:]) or "no output"
    return None, f"exit status {rc}: {why}"


def median(runs, key):
    vals = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
    return statistics.median(vals) if vals else None


def fmt(v, digits=0):
    return "–" if v is None else f"{v:,.{digits}f}"


def pair_ratio(both, key):
    """Median over the pairs of hacrl/torch, each pair measured back to back."""
    vals = [g[key] / t[key] for g, t in both if isinstance(g.get(key), (int, float)) and t.get(key)]
    return "–" if not vals else f"{statistics.median(vals):.2f}×"


print("| config | layers | params | pairs | train tok/s hacrl | train tok/s torch | hacrl/torch | sample tok/s hacrl "
      "| sample tok/s torch | hacrl/torch | peak RSS MB hacrl / torch | decode GB/s hacrl / torch "
      "| memory read GB/s hacrl / torch |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
errors, versions = [], set()
for i, name in enumerate(names):
    gs, ts, both = [], [], []
    for p in range(pairs):
        g, gerr = result(f"go{i}.{p}")
        t, terr = result(f"torch{i}.{p}")
        if gerr:
            errors.append(f"- hacrl, {name}, pair {p + 1}: {gerr}")
        if terr:
            errors.append(f"- torch, {name}, pair {p + 1}: {terr}")
        if g and t and g.get("params") != t.get("params"):
            errors.append(f"- {name}, pair {p + 1}: parameter counts differ (hacrl {g.get('params')}, torch "
                          f"{t.get('params')}); the two engines are not running the same model")
        if t:
            versions.add(f"torch {t.get('torch_version')}, {t.get('threads')} threads")
        gs += [g] if g else []
        ts += [t] if t else []
        if g and t:
            both.append((g, t))
    first = (gs + ts + [{}])[0]
    print(f"| {name} | {first.get('layers', '–')} | {fmt(first.get('params'))} | {len(both)}/{pairs} | "
          f"{fmt(median(gs, 'train_tokens_per_s'), 1)} | {fmt(median(ts, 'train_tokens_per_s'), 1)} | "
          f"{pair_ratio(both, 'train_tokens_per_s')} | "
          f"{fmt(median(gs, 'sample_tokens_per_s'), 1)} | {fmt(median(ts, 'sample_tokens_per_s'), 1)} | "
          f"{pair_ratio(both, 'sample_tokens_per_s')} | "
          f"{fmt(median(gs, 'peak_rss_mb'))} / {fmt(median(ts, 'peak_rss_mb'))} | "
          f"{fmt(median(gs, 'decode_weight_gb_per_s'), 1)} / {fmt(median(ts, 'decode_weight_gb_per_s'), 1)} | "
          f"{fmt(median(gs, 'mem_read_gb_per_s'), 1)} / {fmt(median(ts, 'mem_read_gb_per_s'), 1)} |")
print(f"\nMedians over {pairs} alternating pair(s) per config (hacrl, then torch, one run at a time); "
      "the ratios are the medians of the per-pair ratios.")
if versions:
    print(f"{'; '.join(sorted(versions))}.")
if errors:
    print("\nErrors:")
    print("\n".join(errors))
EOF
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
python3 - "$work" "${labels[@]}" <<'EOF'
import json
import sys

work, labels = sys.argv[1], sys.argv[2:]


def result(name):
    """The engine's JSON result, or None and an error message."""
    rc = open(f"{work}/{name}.rc").read().strip()
    lines = [l for l in open(f"{work}/{name}.out") if l.startswith("{")]
    err = open(f"{work}/{name}.err").read().strip().splitlines()
    if rc == "0" and lines:
        try:
            return json.loads(lines[-1]), None
        except json.JSONDecodeError as e:
            return None, f"output is not JSON ({e}): {lines[-1].strip()}"
    why = "\n    ".join(err[-5:]) or "no output"
    return None, f"exit status {rc}: {why}"


def num(r, key):
    v = None if r is None else r.get(key)
    return f"{v:,.0f}" if isinstance(v, (int, float)) else "–"


def loss(r):
    v = None if r is None else r.get("final_loss")
    return f"{v:.4f}" if isinstance(v, (int, float)) else "–"


def ratio(g, t, key):
    if g is None or t is None or not t.get(key) or not isinstance(g.get(key), (int, float)):
        return "–"
    return f"{g[key] / t[key]:.2f}×"


print("| config | params | train tok/s Go | train tok/s torch | Go/torch | sample tok/s Go | sample tok/s torch | Go/torch "
      "| peak RSS MB Go / torch | final loss Go / torch |")
print("|---|---|---|---|---|---|---|---|---|---|")
errors = []
versions = set()
for i, label in enumerate(labels):
    g, gerr = result(f"go{i}")
    t, terr = result(f"torch{i}")
    if gerr:
        errors.append(f"- Go, {label}: {gerr}")
    if terr:
        errors.append(f"- torch, {label}: {terr}")
    if t:
        versions.add(f"torch {t.get('torch_version')}, {t.get('threads')} threads")
    params = (t or g or {}).get("params")
    if g and t and g.get("params") != t.get("params"):
        errors.append(f"- {label}: parameter counts differ (Go {g.get('params')}, torch {t.get('params')}); "
                      "the two engines are not running the same model")
    print(f"| {label} | {params if params is not None else '–'} | {num(g, 'train_tokens_per_s')} | "
          f"{num(t, 'train_tokens_per_s')} | {ratio(g, t, 'train_tokens_per_s')} | "
          f"{num(g, 'sample_tokens_per_s')} | {num(t, 'sample_tokens_per_s')} | {ratio(g, t, 'sample_tokens_per_s')} | "
          f"{num(g, 'peak_rss_mb')} / {num(t, 'peak_rss_mb')} | {loss(g)} / {loss(t)} |")
if versions:
    print(f"\n{'; '.join(sorted(versions))}.")
if errors:
    print("\nErrors:")
    print("\n".join(errors))
EOF
