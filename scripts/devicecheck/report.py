"""The report of scripts/device-check.sh: OUT/device-check.json and OUT/device-check.md.

    python3 report.py OUT --mode gpu --peak-tflops 790 --seconds 512

reads what each part left in OUT/parts (NAME.out, .err, .rc, .s, .skipped,
.gpumem) and writes one JSON object and one Markdown page: the machine, each
part's status, the log-prob agreement, the engine benchmark (tokens/s, peak
memory, model FLOP utilisation) and the HACPO step's per-phase times.

Model FLOPs per token, with N the parameters the products use (all but an
untied token embedding, which is only gathered from), L blocks of H query
heads of width Dh: training 6·N + 12·L·H·Dh·T (PaLM's formula, T the
sequence length); sampling 2·N + 4·L·H·Dh·C, C the mean context (prompt +
half the new tokens). Utilisation is against --peak-tflops for both dtypes.
hacrl's peak GPU memory is what nvidia-smi saw in use during its part, less
what was in use before (its CUDA context and XLA's allocator pool, which
keeps what it once held); PyTorch's is max_memory_allocated (its tensors)
and max_memory_reserved (its caching allocator's pool, the like figure).
"""

import argparse
import glob
import json
import math
import os
import sys


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def last_json(text):
    """The last line of text that is a JSON object, or None."""
    for line in reversed((text or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def status(parts, name):
    s = {"name": name}
    skipped = read(f"{parts}/{name}.skipped")
    if skipped is not None:
        s.update(status="skipped", why=skipped.strip())
        return s
    rc = read(f"{parts}/{name}.rc")
    if rc is None:
        s["status"] = "not run"
        return s
    rc = int(rc)
    s.update(status="ok" if rc == 0 else ("timeout" if rc in (124, 137) else "failed"), exit=rc,
             seconds=int(read(f"{parts}/{name}.s", "0")))
    if rc != 0:
        s["stderr_tail"] = (read(f"{parts}/{name}.err", "") or "").splitlines()[-8:]
    mem = read(f"{parts}/{name}.gpumem")
    if mem and mem.strip():
        s["gpu_mem_peak_mb"] = int(float(mem.strip()))
    return s


def flops(cfg, params):
    d, L, H = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    dh = cfg.get("head_dim") or d // H
    n = params - (0 if cfg.get("tie_word_embeddings") else cfg["vocab_size"] * d)
    return n, L * H * dh


def bench_row(parts, work, model, dtype, peak):
    cfg = json.loads(read(f"{work}/{model}.json", "{}") or "{}")
    row = {"model": model, "dtype": dtype}
    for side in ("hacrl", "torch"):
        name = f"bench-{side}-{model}-{dtype}"
        st = status(parts, name)
        res = last_json(read(f"{parts}/{name}.out")) if st.get("status") == "ok" else None
        entry = {"status": st.get("status")}
        if res and cfg:
            n, attn = flops(cfg, res["params"])
            T = res["seq"]
            ctx = res["sample_prompt"] + res["sample_tokens"] / 2
            train_f = (6 * n + 12 * attn * T) * res["train_tokens_per_s"]
            sample_f = (2 * n + 4 * attn * ctx) * res["sample_tokens_per_s"]
            entry.update(
                train_tokens_per_s=res["train_tokens_per_s"],
                sample_tokens_per_s=res["sample_tokens_per_s"],
                train_mfu=train_f / (peak * 1e12),
                sample_mfu=sample_f / (peak * 1e12),
                params=res["params"],
            )
            if side == "torch":
                entry["peak_gpu_mb"] = max(res.get("peak_gpu_train_mb", 0), res.get("peak_gpu_sample_mb", 0))
                entry["reserved_gpu_mb"] = max(res.get("reserved_gpu_train_mb", 0), res.get("reserved_gpu_sample_mb", 0))
            elif "gpu_mem_peak_mb" in st:
                entry["peak_gpu_mb"] = st["gpu_mem_peak_mb"]
            entry["peak_rss_mb"] = res.get("peak_rss_mb")
        row[side] = entry
    h, t = row["hacrl"], row["torch"]
    for k in ("train_tokens_per_s", "sample_tokens_per_s"):
        if k in h and k in t and t[k] > 0:
            row[k.replace("_tokens_per_s", "_ratio")] = h[k] / t[k]
    return row


def hacpo_times(parts):
    """{step: {agent: {phase: seconds}}} from the HACPO part's metrics.jsonl;
    the run-wide records (no agent) under "(whole step)"."""
    steps = {}
    for line in (read(f"{parts}/hacpo.out", "") or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        times = {k[5:]: v for k, v in rec.items() if k.startswith("time/") and k != "time/eval"}
        if times:
            steps.setdefault(str(rec.get("step")), {}).setdefault(rec.get("agent") or "(whole step)", {}).update(times)
    return steps


def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)) else "–"


def markdown(rep):
    e = rep["env"]
    lines = [f"# device check ({rep['mode']}), {rep['seconds']} s", ""]
    lines.append(f"GPU: {e.get('gpu') or '–'}; driver: {e.get('driver') or '–'}; Python {e.get('python')}, torch {e.get('torch')}, "
                 f"transformers {e.get('transformers')}, jax {e.get('jax')}; CUDA plugin: {e.get('cuda_plugin') or '–'}")
    if e.get("xla_flags"):
        lines.append(f"{e['xla_flags']}; glibc: {e.get('glibc')}; hacrl starts: {e.get('hacrl_runs')}")
    if e.get("plugin_note"):
        lines.append(f"Plugin: {e['plugin_note']}")
    if e.get("errors"):
        lines += ["", "Environment messages:", ""] + [f"    {l}" for l in e["errors"]]
    lines += ["", "| part | status | seconds |", "|---|---|---|"]
    for p in rep["parts"]:
        lines.append(f"| {p['name']} | {p['status']}{' (' + p['why'] + ')' if 'why' in p else ''} | {p.get('seconds', '–')} |")
    lp = rep.get("logprobs")
    if lp:
        lines += ["", "Log-probs, hacrl against transformers on the same checkpoint "
                  f"({lp['tokens']} tokens): float32 max |Δ| {lp['float32_max_abs_diff']:.2g}, bfloat16 {lp['bfloat16_max_abs_diff']:.2g} "
                  f"(bfloat16 against float32: hacrl {lp['hacrl_bf16_vs_f32']:.2g}, transformers {lp['transformers_bf16_vs_f32']:.2g}; "
                  f"hacrl's bfloat16 with fused attention against without: {lp.get('hacrl_bf16_fused_vs_decomposed', float('nan')):.2g})."]
    lines += ["", "| model | dtype | train tok/s hacrl | PyTorch | ratio | MFU hacrl | PyTorch | sample tok/s hacrl | generate | ratio | peak GPU MB hacrl | PyTorch allocated / reserved |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rep["bench"]:
        h, t = r["hacrl"], r["torch"]
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            r["model"], r["dtype"], fmt(h.get("train_tokens_per_s"), ".0f"), fmt(t.get("train_tokens_per_s"), ".0f"),
            fmt(r.get("train_ratio"), ".2f"), fmt(h.get("train_mfu"), ".1%"), fmt(t.get("train_mfu"), ".1%"),
            fmt(h.get("sample_tokens_per_s"), ".0f"), fmt(t.get("sample_tokens_per_s"), ".0f"), fmt(r.get("sample_ratio"), ".2f"),
            fmt(h.get("peak_gpu_mb"), "d"), fmt(t.get("peak_gpu_mb"), "d") + " / " + fmt(t.get("reserved_gpu_mb"), "d")))
    for step, agents in rep["hacpo_steps"].items():
        keys = sorted({k for ph in agents.values() for k in ph})
        lines += ["", f"HACPO step {step} (seconds per phase{', XLA compiling' if step == '1' else ''}):", "",
                  "| agent | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
        for agent, ph in agents.items():
            lines.append(f"| {agent} | " + " | ".join(fmt(ph.get(k), ".2f") for k in keys) + " |")
    return "\n".join(lines) + "\n"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--mode", default="gpu")
    p.add_argument("--peak-tflops", type=float, default=790)
    p.add_argument("--seconds", type=int, default=0)
    p.add_argument("--work", help="the folder of the run's configs (default OUT/work)")
    a = p.parse_args(argv)
    parts, work = os.path.join(a.out, "parts"), a.work or os.path.join(a.out, "work")
    env = last_json(read(f"{parts}/env-python.out")) or {}
    envtxt = (read(f"{parts}/env.out", "") or "").splitlines()
    for line in envtxt:
        if line.count(",") >= 2 and "MiB" in line:
            name, driver, mem = [x.strip() for x in line.split(",")[:3]]
            env.update(gpu=env.get("gpu") or name, driver=driver, gpu_memory=mem)
    env["hacrl_runs"] = "hacrl: runs" in envtxt
    env["host"] = envtxt[1] if len(envtxt) > 1 else None
    env["glibc"] = envtxt[2] if len(envtxt) > 2 else None
    env["xla_flags"] = envtxt[3] if len(envtxt) > 3 else None
    env["errors"] = [l for l in (read(f"{parts}/env.err", "") or "").splitlines() if l.strip()][-12:]
    env["plugin_note"] = (read(f"{parts}/plugin-search.note", "") or "").strip() or None
    names = sorted({os.path.basename(f).rsplit(".", 1)[0] for f in glob.glob(f"{parts}/*.rc") + glob.glob(f"{parts}/*.skipped")})
    models = sorted({n.split("-", 2)[2].rsplit("-", 1)[0] for n in names if n.startswith("bench-")})
    rep = {
        "mode": a.mode,
        "seconds": a.seconds,
        "peak_tflops": a.peak_tflops,
        "env": env,
        "parts": [status(parts, n) for n in names],
        "logprobs": last_json(read(f"{parts}/logprobs.out")),
        "bench": [bench_row(parts, work, m, dt, a.peak_tflops) for dt in ("bfloat16", "float32") for m in models
                  if os.path.exists(f"{parts}/bench-hacrl-{m}-{dt}.rc") or os.path.exists(f"{parts}/bench-hacrl-{m}-{dt}.skipped")],
        "hacpo_steps": hacpo_times(parts),
    }
    # The last step's times: the steady ones when there are two.
    rep["hacpo"] = rep["hacpo_steps"][max(rep["hacpo_steps"], key=lambda s: int(s) if s.isdigit() else -1)] if rep["hacpo_steps"] else {}
    with open(os.path.join(a.out, "device-check.json"), "w") as f:
        json.dump(rep, f, indent=1)
    md = markdown(rep)
    with open(os.path.join(a.out, "device-check.md"), "w") as f:
        f.write(md)
    sys.stdout.write(md)


if __name__ == "__main__":
    main(sys.argv[1:])
