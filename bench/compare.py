#!/usr/bin/env python3
"""The tables of bench/compare.sh, from the runs it left in its work directory.

Each run NAME left NAME.out (its stdout, one JSON line), NAME.err and NAME.rc.

    compare.py small WORK LABEL...        one hacrl and one torch run per label: go<i>, torch<i>
    compare.py real WORK PAIRS NAME...    PAIRS alternating pairs per config: go<i>.<p>, torch<i>.<p>
"""

import json
import statistics
import sys


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


def same_model(g, t, what):
    """Error lines where the two sides' parameter counts differ."""
    errors = []
    for key, meaning in (("params", "model"), ("trainable_params", "trainable parameters (LoRA adapters)")):
        if g and t and g.get(key) != t.get(key):
            errors.append(f"- {what}: {key} differ (hacrl {g.get(key)}, torch {t.get(key)}); "
                          f"the two engines are not running the same {meaning}")
    return errors


def lora_notes(runs):
    """Lines naming the LoRA adapters the runs trained; none for full fine-tuning."""
    seen = {(r.get("lora_rank"), r.get("lora_alpha"), tuple(r.get("lora_targets") or ())) for r in runs if r.get("lora_rank")}
    return [f"LoRA rank {rank}, alpha {alpha:g}, targets {', '.join(targets)}: a frozen base, AdamW over the adapters "
            "only (trainable)." for rank, alpha, targets in sorted(seen)]


def fmt(v, digits=0):
    return f"{v:,.{digits}f}" if isinstance(v, (int, float)) else "–"


def small(work, labels):
    def get(r, key):
        return None if r is None else r.get(key)

    def ratio(g, t, key):
        if g is None or t is None or not t.get(key) or not isinstance(g.get(key), (int, float)):
            return "–"
        return f"{g[key] / t[key]:.2f}×"

    print("| config | params | trainable | train tok/s Go | train tok/s torch | Go/torch | sample tok/s Go "
          "| sample tok/s torch | Go/torch | peak RSS MB Go / torch | final loss Go / torch |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    errors, versions, runs = [], set(), []
    for i, label in enumerate(labels):
        g, gerr = result(work, f"go{i}")
        t, terr = result(work, f"torch{i}")
        if gerr:
            errors.append(f"- Go, {label}: {gerr}")
        if terr:
            errors.append(f"- torch, {label}: {terr}")
        if t:
            versions.add(f"torch {t.get('torch_version')}, {t.get('threads')} threads")
        errors += same_model(g, t, label)
        runs += [r for r in (g, t) if r]
        either = t or g or {}
        print(f"| {label} | {fmt(either.get('params'))} | {fmt(either.get('trainable_params'))} | "
              f"{fmt(get(g, 'train_tokens_per_s'))} | {fmt(get(t, 'train_tokens_per_s'))} | "
              f"{ratio(g, t, 'train_tokens_per_s')} | {fmt(get(g, 'sample_tokens_per_s'))} | "
              f"{fmt(get(t, 'sample_tokens_per_s'))} | {ratio(g, t, 'sample_tokens_per_s')} | "
              f"{fmt(get(g, 'peak_rss_mb'))} / {fmt(get(t, 'peak_rss_mb'))} | "
              f"{fmt(get(g, 'final_loss'), 4)} / {fmt(get(t, 'final_loss'), 4)} |")
    notes = lora_notes(runs) + ([f"{'; '.join(sorted(versions))}."] if versions else [])
    if notes:
        print("\n" + "\n".join(notes))
    return errors


def real(work, pairs, names):
    def median(runs, key):
        vals = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
        return statistics.median(vals) if vals else None

    def pair_ratio(both, key):
        """Median over the pairs of hacrl/torch, each pair measured back to back."""
        vals = [g[key] / t[key] for g, t in both if isinstance(g.get(key), (int, float)) and t.get(key)]
        return "–" if not vals else f"{statistics.median(vals):.2f}×"

    print("| config | layers | params | trainable | pairs | train tok/s hacrl | train tok/s torch | hacrl/torch "
          "| sample tok/s hacrl | sample tok/s torch | hacrl/torch | peak RSS MB hacrl / torch "
          "| decode GB/s hacrl / torch | memory read GB/s hacrl / torch |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    errors, versions, runs = [], set(), []
    for i, name in enumerate(names):
        gs, ts, both = [], [], []
        for p in range(pairs):
            g, gerr = result(work, f"go{i}.{p}")
            t, terr = result(work, f"torch{i}.{p}")
            if gerr:
                errors.append(f"- hacrl, {name}, pair {p + 1}: {gerr}")
            if terr:
                errors.append(f"- torch, {name}, pair {p + 1}: {terr}")
            errors += same_model(g, t, f"{name}, pair {p + 1}")
            if t:
                versions.add(f"torch {t.get('torch_version')}, {t.get('threads')} threads")
            gs += [g] if g else []
            ts += [t] if t else []
            if g and t:
                both.append((g, t))
        runs += gs + ts
        first = (gs + ts + [{}])[0]
        print(f"| {name} | {first.get('layers', '–')} | {fmt(first.get('params'))} | {fmt(first.get('trainable_params'))} | "
              f"{len(both)}/{pairs} | "
              f"{fmt(median(gs, 'train_tokens_per_s'), 1)} | {fmt(median(ts, 'train_tokens_per_s'), 1)} | "
              f"{pair_ratio(both, 'train_tokens_per_s')} | "
              f"{fmt(median(gs, 'sample_tokens_per_s'), 1)} | {fmt(median(ts, 'sample_tokens_per_s'), 1)} | "
              f"{pair_ratio(both, 'sample_tokens_per_s')} | "
              f"{fmt(median(gs, 'peak_rss_mb'))} / {fmt(median(ts, 'peak_rss_mb'))} | "
              f"{fmt(median(gs, 'decode_weight_gb_per_s'), 1)} / {fmt(median(ts, 'decode_weight_gb_per_s'), 1)} | "
              f"{fmt(median(gs, 'mem_read_gb_per_s'), 1)} / {fmt(median(ts, 'mem_read_gb_per_s'), 1)} |")
    print(f"\nMedians over {pairs} alternating pair(s) per config (hacrl, then torch, one run at a time); "
          "the ratios are the medians of the per-pair ratios.")
    for note in lora_notes(runs):
        print(note)
    if versions:
        print(f"{'; '.join(sorted(versions))}.")
    return errors


def main(argv):
    if len(argv) >= 2 and argv[0] == "small":
        errors = small(argv[1], argv[2:])
    elif len(argv) >= 3 and argv[0] == "real":
        errors = real(argv[1], int(argv[2]), argv[3:])
    else:
        sys.exit(__doc__)
    if errors:
        print("\nErrors:")
        print("\n".join(errors))


if __name__ == "__main__":
    main(sys.argv[1:])
