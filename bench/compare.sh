#!/usr/bin/env bash
# Compares hacrl's Go engine (`hacrl bench engine`) with the PyTorch reference
# (bench/torch/run.sh) on the configurations the README reports, and prints a
# Markdown table of training and sampling tokens/s with the ratios Go/torch.
#
# Usage: bench/compare.sh [flags for both engines, e.g. --steps 10 --threads 2]
# Set HACRL to a prebuilt hacrl binary to skip building ./cmd/hacrl.
# The JSON line of every run goes to stderr as it finishes; the table to stdout.
# If the Go side fails, the table keeps the torch numbers and the error is printed below it.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

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
