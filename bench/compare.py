#!/usr/bin/env python3
"""The tables of bench/compare.sh, from the runs it left in its work directory.

Each run NAME left NAME.out (its stdout, one JSON line), NAME.err and NAME.rc.
Pair p of config i is hacrl's run go.<i>.<p>, then each peer's <peer>.<i>.<p>.

    compare.py small WORK PAIRS PEERS SKIPPED LABEL...   the toy configs
    compare.py real WORK PAIRS PEERS SKIPPED NAME...     the real shapes of bench/configs

PEERS is the space-separated list of peers that ran (torch, torch-bf16, hf,
hf-bf16), SKIPPED those compare.sh skipped (may be empty). Each table gives
the medians over the pairs of hacrl's and every peer's tokens/s and, per
peer, the median of the per-pair ratios hacrl / peer; every run follows.
"""

import json
import statistics
import sys

PEER_MEANING = {
    "torch": "bench/torch/bench.py, float32",
    "torch-bf16": "bench/torch/bench.py --dtype bfloat16 (forward passes under torch.autocast(cpu, bfloat16), "
                  "float32 weights)",
    "hf": "transformers' AutoModelForCausalLM (bench/torch/hf_bench.py --device cpu), float32",
    "hf-bf16": "transformers' AutoModelForCausalLM, --dtype bfloat16 (training under autocast, generate with "
               "bfloat16 weights)",
}


def result(work, name):
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


def same_model(g, t, peer, what):
    """Error lines where hacrl's and a peer's parameter counts differ."""
    errors = []
    for key, meaning in (("params", "model"), ("trainable_params", "trainable parameters (LoRA adapters)")):
        if g and t and g.get(key) != t.get(key):
            errors.append(f"- {what}: {key} differ (hacrl {g.get(key)}, {peer} {t.get(key)}); "
                          f"the two engines are not running the same {meaning}")
    return errors


def lora_notes(runs):
    """Lines naming the LoRA adapters the runs trained; none for full fine-tuning."""
    seen = {(r.get("lora_rank"), r.get("lora_alpha"), tuple(r.get("lora_targets") or ())) for r in runs if r.get("lora_rank")}
    return [f"LoRA rank {rank}, alpha {alpha:g}, targets {', '.join(targets)}: a frozen base, AdamW over the adapters "
            "only (trainable)." for rank, alpha, targets in sorted(seen)]


def torch_notes(runs_by_peer):
    """One line per peer: what it is, and the torch build and threads it reported."""
    out = []
    for peer, runs in runs_by_peer.items():
        builds = set()
        for r in runs:
            b = f"torch {r.get('torch_version') or r.get('torch')}, {r.get('threads')} threads"
            if r.get("transformers"):
                b += f", transformers {r['transformers']}"
            if "cpu_capability" in r:
                b += (f", {r.get('parallel_backend')}, ATen {r['cpu_capability']}, MKL {r.get('mkl')}, "
                      f"oneDNN {r.get('mkldnn')} (native bf16 {r.get('mkldnn_bf16')})")
            builds.add(b)
        out.append(f"{peer}: {PEER_MEANING[peer]}; {'; '.join(sorted(builds)) or 'no run succeeded'}.")
    return out


def fmt(v, digits=0):
    return f"{v:,.{digits}f}" if isinstance(v, (int, float)) else "–"


def num(r, key):
    v = None if r is None else r.get(key)
    return v if isinstance(v, (int, float)) else None


def median(runs, key):
    vals = [num(r, key) for r in runs if num(r, key) is not None]
    return statistics.median(vals) if vals else None


def pair_ratio(both, key):
    """Median over the pairs of hacrl/peer, each pair measured back to back."""
    vals = [num(g, key) / num(t, key) for g, t in both if num(g, key) is not None and num(t, key)]
    return "–" if not vals else f"{statistics.median(vals):.2f}×"


def table(work, pairs, peers, skipped, labels, real):
    digits = 1 if real else 0
    head = ["config"] + (["layers"] if real else []) + ["params", "trainable", "pairs", "train tok/s hacrl"]
    for peer in peers:
        head += [f"train tok/s {peer}", f"hacrl/{peer}"]
    head.append("sample tok/s hacrl")
    for peer in peers:
        head += [f"sample tok/s {peer}", f"hacrl/{peer}"]
    engines = " / ".join(["hacrl"] + peers)
    head.append(f"peak RSS MB {engines}")
    head += [f"decode GB/s {engines}", f"memory read GB/s {engines}"] if real else [f"final loss {engines}"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))

    errors, all_runs, listing = [], [], []
    by_peer = {peer: [] for peer in peers}
    for i, label in enumerate(labels):
        gs, ps, both = [], {peer: [] for peer in peers}, {peer: [] for peer in peers}
        full = 0  # pairs in which hacrl and every peer ran
        for p in range(pairs):
            g, gerr = result(work, f"go.{i}.{p}")
            if gerr:
                errors.append(f"- hacrl, {label}, pair {p + 1}: {gerr}")
            gs += [g] if g else []
            row = [g]
            for peer in peers:
                t, terr = result(work, f"{peer}.{i}.{p}")
                if terr:
                    errors.append(f"- {peer}, {label}, pair {p + 1}: {terr}")
                errors += same_model(g, t, peer, f"{label}, pair {p + 1}")
                if t:
                    ps[peer].append(t)
                    by_peer[peer].append(t)
                    if g:
                        both[peer].append((g, t))
                row.append(t)
            full += all(row)
            for engine, r in zip(["hacrl"] + peers, row):
                listing.append(f"| {label} | {p + 1} | {engine} | {fmt(num(r, 'train_tokens_per_s'), digits)} | "
                               f"{fmt(num(r, 'sample_tokens_per_s'), digits)} | {fmt(num(r, 'peak_rss_mb'))} |")
        runs = gs + [t for peer in peers for t in ps[peer]]
        all_runs += runs
        first = (runs + [{}])[0]
        cells = [label] + ([str(first.get("layers", "–"))] if real else [])
        cells += [fmt(first.get("params")), fmt(first.get("trainable_params")), f"{full}/{pairs}",
                  fmt(median(gs, "train_tokens_per_s"), digits)]
        for peer in peers:
            cells += [fmt(median(ps[peer], "train_tokens_per_s"), digits), pair_ratio(both[peer], "train_tokens_per_s")]
        cells.append(fmt(median(gs, "sample_tokens_per_s"), digits))
        for peer in peers:
            cells += [fmt(median(ps[peer], "sample_tokens_per_s"), digits), pair_ratio(both[peer], "sample_tokens_per_s")]
        sides = [gs] + [ps[peer] for peer in peers]
        cells.append(" / ".join(fmt(median(s, "peak_rss_mb")) for s in sides))
        if real:
            cells.append(" / ".join(fmt(median(s, "decode_weight_gb_per_s"), 1) for s in sides))
            cells.append(" / ".join(fmt(median(s, "mem_read_gb_per_s"), 1) for s in sides))
        else:
            cells.append(" / ".join(fmt(median(s, "final_loss"), 4) for s in sides))
        print("| " + " | ".join(cells) + " |")

    print(f"\nMedians over {pairs} pair(s) per config, each pair hacrl then every peer, one run at a time; "
          "the ratios are the medians of the per-pair ratios.")
    for note in lora_notes(all_runs) + torch_notes(by_peer):
        print(note)
    for peer in skipped:
        print(f"{peer}: skipped: transformers' classes need a config.json, so it runs only with --real.")
    print("\nEvery run (tokens/s):\n")
    print("| config | pair | engine | train tok/s | sample tok/s | peak RSS MB |")
    print("|---|---|---|---|---|---|")
    print("\n".join(listing))
    return errors


def main(argv):
    if len(argv) < 5 or argv[0] not in ("small", "real") or not argv[2].isdigit():
        sys.exit(__doc__)
    errors = table(argv[1], int(argv[2]), argv[3].split(), argv[4].split(), argv[5:], argv[0] == "real")
    if errors:
        print("\nErrors:")
        print("\n".join(errors))


if __name__ == "__main__":
    main(sys.argv[1:])
