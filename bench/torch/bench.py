#!/usr/bin/env python3
"""Throughput of hacrl's two model families in PyTorch, as a reference for `hacrl bench engine`.

It takes the same flags as the Go command and prints one JSON line with
train_tokens_per_s (forward + backward + global-norm clip + AdamW on [B, T]
tokens) and sample_tokens_per_s (temperature-1 sampling with a KV cache).
`--check` instead runs a self-check on tiny models and exits non-zero on failure.
"""

import argparse
import json
import os
import resource
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=("gpt", "llama"), default="gpt")
    p.add_argument("--vocab", type=int, default=32)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=4, help="llama key/value heads (GQA)")
    p.add_argument("--hidden", type=int, default=0, help="llama MLP width; 0: 8/3*dim rounded up to 16")
    p.add_argument("--tie", action="store_true", help="llama: tie the LM head to the token embedding")
    p.add_argument("--seq", type=int, default=64, help="training sequence length T")
    p.add_argument("--batch", type=int, default=32, help="training batch B")
    p.add_argument("--act", choices=("gelu", "gelu_new", "relu"), default="gelu",
                   help="gpt MLP activation: exact-erf gelu, tanh gelu_new or relu")
    p.add_argument("--steps", type=int, default=20, help="timed training steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed training steps (and one untimed sampling run if > 0)")
    p.add_argument("--sample-batch", type=int, default=0, help="sequences sampled at once; 0: --batch")
    p.add_argument("--sample-tokens", type=int, default=0, help="new tokens per sequence; 0: --seq - 1")
    p.add_argument("--sample-runs", type=int, default=3, help="timed sampling runs")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true", help="run the self-check instead of the benchmark")
    args = p.parse_args(argv)
    if args.seq < 2:
        p.error(f"--seq: want >= 2 for next-token prediction, got {args.seq}")
    args.sample_batch = args.sample_batch or args.batch
    args.sample_tokens = args.sample_tokens or args.seq - 1
    for name in ("batch", "steps", "threads", "sample_batch", "sample_tokens", "sample_runs"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: want >= 1, got {getattr(args, name)}")
    if args.warmup < 0:
        p.error(f"--warmup: want >= 0, got {args.warmup}")
    return args


def config_from(args, model):
    return model.Config(
        family=args.family,
        vocab=args.vocab,
        dim=args.dim,
        layers=args.layers,
        heads=args.heads,
        kv_heads=args.kv_heads if args.family == "llama" else args.heads,
        hidden=args.hidden,
        act=args.act,
        tie=args.tie,
        max_pos=max(args.seq, 1 + args.sample_tokens),
    )


def benchmark(args, torch, model):
    cfg = config_from(args, model)
    net = build_or_exit(model, cfg, args.seed)
    opt = model.new_optimizer(net)
    gen = torch.Generator().manual_seed(args.seed + 1)
    # One random batch trained on repeatedly, as the Go engine does, so that
    # final_loss (after warmup + steps updates) is comparable across engines.
    tokens = torch.randint(cfg.vocab, (args.batch, args.seq), generator=gen)

    for _ in range(args.warmup):
        model.train_step(net, opt, tokens)
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = model.train_step(net, opt, tokens)
    train_s = time.perf_counter() - start

    prompt = torch.randint(cfg.vocab, (args.sample_batch, 1), generator=gen)
    if args.warmup > 0:
        model.sample(net, prompt, args.sample_tokens, gen)
    start = time.perf_counter()
    for _ in range(args.sample_runs):
        model.sample(net, prompt, args.sample_tokens, gen)
    sample_s = (time.perf_counter() - start) / args.sample_runs

    return {
        "engine": "torch",
        "family": cfg.family,
        "params": sum(p.numel() for p in net.parameters()),
        "vocab": cfg.vocab,
        "dim": cfg.dim,
        "layers": cfg.layers,
        "heads": cfg.heads,
        "kv_heads": cfg.cache_heads,
        "hidden": cfg.mlp_hidden,
        "act": cfg.act if cfg.family == "gpt" else "swiglu",
        "seq": args.seq,
        "batch": args.batch,
        "steps": args.steps,
        "train_step_ms": round(1000 * train_s / args.steps, 3),
        "train_tokens_per_s": round(args.batch * args.seq * args.steps / train_s, 1),
        "final_loss": round(float(loss), 6),
        "sample_batch": args.sample_batch,
        "sample_tokens": args.sample_tokens,
        "sample_runs": args.sample_runs,
        "sample_ms": round(1000 * sample_s, 3),
        "sample_tokens_per_s": round(args.sample_batch * args.sample_tokens / sample_s, 1),
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def build_or_exit(model, cfg, seed):
    try:
        return model.build(cfg, seed)
    except ValueError as err:
        sys.exit(f"bench.py: invalid model configuration: {err}")


def self_check(torch, model):
    """Return a list of failure messages (empty when every check passes)."""
    failures = []

    def expect(ok, what):
        if not ok:
            failures.append(what)

    # GQA grouping must match HF's repeat_kv: query head h reads kv head h // (H/KVH).
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(2, n, 5, 8, generator=g) for n in (6, 2, 2))
    bias = model.causal_bias(5, 0)
    grouped = model.attend(q, k, v, bias)
    expanded = model.attend(q, k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1), bias)
    diff = (grouped - expanded).abs().max().item()
    expect(diff < 1e-6, f"grouped attention differs from repeat_interleave by {diff:.3g}")

    # RoPE (HF rotate_half) must make q.k depend only on the distance between positions.
    cos, sin = model.rope_tables(16, 8)
    qv, kv = torch.randn(8, generator=g), torch.randn(8, generator=g)

    def rotated_dot(m, n):
        rq = qv * cos[m] + model.rotate_half(qv) * sin[m]
        rk = kv * cos[n] + model.rotate_half(kv) * sin[n]
        return (rq @ rk).item()

    diff = max(abs(rotated_dot(m, n) - rotated_dot(m + 4, n + 4)) for m, n in ((3, 1), (7, 7), (9, 2)))
    expect(diff < 1e-4, f"rotary q.k changes under a common shift of positions by {diff:.3g}")

    tiny = [
        model.Config(family="gpt", vocab=11, dim=32, layers=2, heads=4, max_pos=12),
        model.Config(family="gpt", vocab=11, dim=32, layers=2, heads=4, act="relu", max_pos=12),
        model.Config(family="gpt", vocab=11, dim=32, layers=1, heads=2, act="gelu_new", max_pos=12),
        model.Config(family="llama", vocab=11, dim=32, layers=2, heads=4, kv_heads=2, max_pos=12),
        model.Config(family="llama", vocab=11, dim=48, layers=2, heads=4, kv_heads=1, hidden=40, tie=True, max_pos=12),
    ]
    for cfg in tiny:
        name = f"{cfg.family}/{cfg.act}/kv{cfg.kv_heads}/tie={cfg.tie}"
        net = model.build(cfg, seed=3)
        count = sum(p.numel() for p in net.parameters())
        expect(count == model.expected_params(cfg), f"{name}: {count} parameters, formula says {model.expected_params(cfg)}")

        out_proj = net.blocks[0].proj if cfg.family == "gpt" else net.blocks[0].o
        want_std = model.INIT_STD / (2 * cfg.layers) ** 0.5
        got_std = out_proj.weight.std().item()
        expect(abs(got_std / want_std - 1) < 0.2, f"{name}: residual projection init std {got_std:.4g}, want {want_std:.4g}")

        # With zero gradients AdamW only decays: matrices shrink by lr*wd, 1-D parameters stay.
        before = [p.detach().clone() for p in net.parameters()]
        opt = model.new_optimizer(net)
        for p in net.parameters():
            p.grad = torch.zeros_like(p)
        opt.step()
        for (pname, p), old in zip(net.named_parameters(), before):
            want = old * (1 - 1e-3 * 0.01) if p.dim() >= 2 else old
            expect(torch.allclose(p.detach(), want, rtol=0, atol=1e-9), f"{name}: weight decay of {pname} is wrong")

        gen = torch.Generator().manual_seed(5)
        tokens = torch.randint(cfg.vocab, (3, 8), generator=gen)
        opt = model.new_optimizer(net)
        losses = [float(model.train_step(net, opt, tokens)) for _ in range(8)]
        expect(all(torch.isfinite(torch.tensor(losses))), f"{name}: non-finite loss in {losses}")
        expect(abs(losses[0] - torch.log(torch.tensor(float(cfg.vocab))).item()) < 0.1,
               f"{name}: initial loss {losses[0]:.4f}, want about ln(vocab)")
        expect(losses[-1] < losses[0], f"{name}: loss did not fall on a repeated batch: {losses}")

        # Causality: changing a later token must not change earlier logits.
        with torch.no_grad():
            changed = tokens.clone()
            changed[:, 5] = (changed[:, 5] + 1) % cfg.vocab
            diff = (net(tokens)[:, :5] - net(changed)[:, :5]).abs().max().item()
        expect(diff == 0.0, f"{name}: logits before position 5 depend on token 5 (diff {diff:.3g})")

        prompt = torch.randint(cfg.vocab, (4, 1), generator=gen)
        out, cached = model.sample(net, prompt, 10, gen, record_logits=True)
        with torch.no_grad():
            full = net(torch.cat((prompt, out[:, :-1]), dim=1))
        diff = (cached - full).abs().max().item()
        expect(diff < 1e-5, f"{name}: cached sampling logits differ from the uncached forward by {diff:.3g}")
        expect(bool(((out >= 0) & (out < cfg.vocab)).all()), f"{name}: sampled token outside [0, {cfg.vocab})")
    return failures


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # Thread pools read these when torch and OpenBLAS load, so set them first.
    # Debian's torch runs elementwise ops on libgomp and matmuls on OpenBLAS's own
    # pthread pool; with libgomp's default spin-waiting the two pools fight for the
    # cores and a training step can take 2-20x longer. Passive waiting avoids that.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import model

    torch.set_num_threads(args.threads)
    if args.check:
        failures = self_check(torch, model)
        for f in failures:
            print(f"FAIL {f}", file=sys.stderr)
        print("bench.py --check:", "FAIL" if failures else "ok", file=sys.stderr)
        return 1 if failures else 0
    res = benchmark(args, torch, model)
    # Peak resident memory of the whole process, as hacrl bench engine reports
    # it (ru_maxrss is in KiB on Linux, bytes on macOS).
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    res["peak_rss_mb"] = round(peak / (1 << 20) if sys.platform == "darwin" else peak / (1 << 10))
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
