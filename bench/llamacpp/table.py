"""Formats compare.sh's results (one JSON line per run, tagged with side,
precision and pair) as a Markdown table of medians over the pairs.

One row per precision and batch size N. Columns: each side's
sample_tokens_per_s (N·T new tokens over the whole run, the prefill
included: the one figure both engines report the same way), the median of
the per-pair ratios hacrl / llama.cpp, llama.cpp's prompt-eval and
decode-only tokens/s, each side's decode_weight_gb_per_s and its fraction
of the memory read bandwidth hacrl measured in the same pair
(mem_read_gb_per_s), and the spread of each side's speeds over the pairs
(max/min − 1) as the noise figure.

    python table.py RESULTS.jsonl
"""

import json
import statistics
import sys


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, digits=1):
    return "—" if x is None else f"{x:.{digits}f}"


def spread(xs):
    return "—" if len(xs) < 2 else f"{100 * (max(xs) / min(xs) - 1):.0f}%"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: table.py RESULTS.jsonl")
    rows = {}
    with open(sys.argv[1]) as f:
        for i, line in enumerate(f, 1):
            try:
                r = json.loads(line)
                key = (r["precision"], r["sample_batch"])
                rows.setdefault(key, {}).setdefault(r["pair"], {})[r["side"]] = r
            except (ValueError, KeyError) as e:
                sys.exit(f"{sys.argv[1]}:{i}: not a compare.sh result line ({e})")
    if not rows:
        sys.exit(f"{sys.argv[1]}: no results")
    some = r  # the settings are the same on every line
    print(f"P={some['sample_prompt']} prompt tokens, T={some['sample_tokens']} new tokens per sequence, "
          f"{some['sample_runs']} timed runs per measurement, {some['threads']} threads; medians over pairs.\n")
    print("| precision | N | hacrl tok/s | llama.cpp tok/s | hacrl / llama.cpp | llama.cpp prompt tok/s "
          "| llama.cpp decode tok/s | hacrl GB/s (of mem) | llama.cpp GB/s (of mem) | mem read GB/s | pairs | spread hacrl / llama.cpp |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for (prec, n), pairs in sorted(rows.items(), key=lambda kv: (kv[0][0] != "f32", kv[0][0], kv[0][1])):
        h = [p["hacrl"] for p in pairs.values() if "hacrl" in p]
        c = [p["llama.cpp"] for p in pairs.values() if "llama.cpp" in p]
        ratios = [p["hacrl"]["sample_tokens_per_s"] / p["llama.cpp"]["sample_tokens_per_s"]
                  for p in pairs.values() if "hacrl" in p and "llama.cpp" in p]
        mem = [r["mem_read_gb_per_s"] for r in h if r.get("mem_read_gb_per_s")]
        # With no hacrl run in this row, the same pair's f32 hacrl runs measured the bandwidth.
        if not mem:
            mem = [p["hacrl"]["mem_read_gb_per_s"] for (pr, nn), ps in rows.items() if nn == n
                   for p in ps.values() if "hacrl" in p and p["hacrl"].get("mem_read_gb_per_s")]
        m = med(mem)
        hgb, cgb = med([r["decode_weight_gb_per_s"] for r in h]), med([r["decode_weight_gb_per_s"] for r in c])

        def of(gb):
            return "—" if gb is None else f"{gb:.2f}" + (f" ({100 * gb / m:.0f}%)" if m else "")

        hs, cs = [r["sample_tokens_per_s"] for r in h], [r["sample_tokens_per_s"] for r in c]
        print(f"| {prec} | {n} | {fmt(med(hs))} | {fmt(med(cs))} | {fmt(med(ratios), 2)} "
              f"| {fmt(med([r['prompt_tokens_per_s'] for r in c]))} | {fmt(med([r['decode_tokens_per_s'] for r in c]))} "
              f"| {of(hgb)} | {of(cgb)} | {fmt(m, 2)} | {len(pairs)} | {spread(hs)} / {spread(cs)} |")


if __name__ == "__main__":
    main()
