#!/usr/bin/env python3
"""Throughput of hacrl's two model families in PyTorch, as a reference for `hacrl bench engine`.

It takes the same flags as the Go command and prints one JSON line with
train_tokens_per_s (forward + backward + global-norm clip + AdamW on [B, T]
tokens) and sample_tokens_per_s (temperature-1 sampling with a KV cache).
`--config PATH` takes the model from a Hugging Face config.json (llama, qwen2
or qwen3; bench/configs has the published ones), `--layers` then overriding
only its depth. `--lora-rank N` trains LoRA adapters (written out in
model.py, as PEFT applies them) on a frozen base instead of the whole model.
`--dtype bfloat16` runs the forward passes of training and sampling under
torch.autocast("cpu", dtype=torch.bfloat16) over float32 master weights,
as a PyTorch user runs mixed precision on a CPU. The JSON names the torch
build, its thread settings and whether oneDNN (and its native bf16) and MKL
are in use. `--check` instead runs a self-check on tiny models and exits
non-zero on failure.
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=("gpt", "llama"), default="gpt")
    p.add_argument("--vocab", type=int, default=32)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=None, help="blocks (default 4); with --config: overrides its depth")
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
    p.add_argument("--sample-prompt", type=int, default=1, help="prompt tokens per sampled sequence")
    p.add_argument("--config", default="", help="a Hugging Face config.json (llama, qwen2, qwen3) instead of the size flags")
    p.add_argument("--mem-read-mb", type=int, default=512,
                   help="MiB summed to measure the memory read bandwidth (mem_read_gb_per_s); 0: skip")
    p.add_argument("--lora-rank", type=int, default=0,
                   help="train LoRA adapters of this rank on a frozen base; 0: full fine-tuning")
    p.add_argument("--lora-alpha", type=float, default=None,
                   help="LoRA alpha (the adapters' output is scaled by alpha/rank); default 2*rank")
    p.add_argument("--lora-targets", default="all-linear",
                   help="comma-separated modules given adapters (q_proj,v_proj,..., c_attn for gpt) or all-linear")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="bfloat16: forward passes under torch.autocast(cpu, bfloat16) over float32 weights")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true", help="run the self-check instead of the benchmark")
    args = p.parse_args(argv)
    if args.seq < 2:
        p.error(f"--seq: want >= 2 for next-token prediction, got {args.seq}")
    if args.layers is not None and args.layers < 1:
        p.error(f"--layers: want >= 1, got {args.layers}")
    args.sample_batch = args.sample_batch or args.batch
    args.sample_tokens = args.sample_tokens or args.seq - 1
    for name in ("batch", "steps", "threads", "sample_batch", "sample_tokens", "sample_runs", "sample_prompt"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: want >= 1, got {getattr(args, name)}")
    if args.lora_rank < 0:
        p.error(f"--lora-rank: want >= 0 (0: full fine-tuning), got {args.lora_rank}")
    if args.lora_alpha is not None and (args.lora_rank == 0 or not args.lora_alpha > 0):
        p.error(f"--lora-alpha {args.lora_alpha}: want > 0, with --lora-rank > 0")
    if args.lora_alpha is None:
        args.lora_alpha = 2 * args.lora_rank
    args.lora_targets = [t.strip() for t in args.lora_targets.split(",") if t.strip()]
    if args.lora_rank and not args.lora_targets:
        p.error("--lora-targets: empty, want module names (q_proj, ...) or all-linear")
    if args.warmup < 0 or args.mem_read_mb < 0:
        p.error(f"--warmup and --mem-read-mb: want >= 0, got {args.warmup} and {args.mem_read_mb}")
    return args


def config_from_file(path, layers=None):
    """model.Config of a Hugging Face config.json, with layers (if given) replacing its depth only.

    Returns the config and the file's max_position_embeddings.
    """
    import hf_logprobs

    with open(path) as f:
        hf = json.load(f)
    try:
        cfg = hf_logprobs.config_from_hf(hf)
    except KeyError as err:
        raise ValueError(f"{path}: field {err} is missing") from err
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err
    if layers is not None:
        cfg.layers = layers
    return cfg, cfg.max_pos


def config_from(args, model):
    positions = max(args.seq, args.sample_prompt + args.sample_tokens)
    if args.config:
        cfg, limit = config_from_file(args.config, args.layers)
        # As hacrl bench engine: T is at most the model's positions, and the
        # rotary tables cover only what the run uses.
        args.seq = min(args.seq, limit)
        if args.sample_prompt + args.sample_tokens > limit:
            raise ValueError(f"--sample-prompt {args.sample_prompt} + --sample-tokens {args.sample_tokens} "
                             f"exceed the model's {limit} positions")
        cfg.max_pos = max(args.seq, args.sample_prompt + args.sample_tokens)
        return cfg
    return model.Config(
        family=args.family,
        vocab=args.vocab,
        dim=args.dim,
        layers=4 if args.layers is None else args.layers,
        heads=args.heads,
        kv_heads=args.kv_heads if args.family == "llama" else args.heads,
        hidden=args.hidden,
        act=args.act,
        tie=args.tie,
        max_pos=positions,
    )


def decode_weight_bytes(cfg, params):
    """float32 bytes one decoding step reads: every weight but the tables it only gathers rows of
    (the token embedding unless the LM head is tied to it, gpt's learned positions)."""
    n = params
    if cfg.family == "gpt" or not cfg.tie:
        n -= cfg.vocab * cfg.dim
    if cfg.family == "gpt":
        n -= cfg.max_pos * cfg.dim
    return 4 * n


def mem_read_gb_per_s(torch, nbytes):
    """Memory read bandwidth in GB/s (1e9 bytes/s): best of three torch.sum over a written buffer."""
    buf = torch.ones(nbytes // 4)
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        float(buf.sum())
        best = max(best, buf.numel() * 4 / (time.perf_counter() - start) / 1e9)
    return best


def benchmark(args, torch, model):
    try:
        cfg = config_from(args, model)
    except ValueError as err:
        sys.exit(f"bench.py: invalid model configuration: {err}")
    net = build_or_exit(model, cfg, args.seed)
    if args.lora_rank:
        try:
            model.add_lora(net, args.lora_rank, args.lora_alpha, args.lora_targets, args.seed)
        except ValueError as err:
            sys.exit(f"bench.py: --lora-targets: {err}")
    opt = model.new_optimizer(net)
    gen = torch.Generator().manual_seed(args.seed + 1)
    # One random batch trained on repeatedly, as the Go engine does, so that
    # final_loss (after warmup + steps updates) is comparable across engines.
    tokens = torch.randint(cfg.vocab, (args.batch, args.seq), generator=gen)

    bf16 = args.dtype == "bfloat16"
    for _ in range(args.warmup):
        model.train_step(net, opt, tokens, bf16)
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = model.train_step(net, opt, tokens, bf16)
    train_s = time.perf_counter() - start

    prompt = torch.randint(cfg.vocab, (args.sample_batch, args.sample_prompt), generator=gen)
    if args.warmup > 0:
        model.sample(net, prompt, args.sample_tokens, gen, bf16=bf16)
    start = time.perf_counter()
    for _ in range(args.sample_runs):
        model.sample(net, prompt, args.sample_tokens, gen, bf16=bf16)
    sample_s = (time.perf_counter() - start) / args.sample_runs
    params = model.base_params(net)

    res = {
        "engine": "torch",
        "family": cfg.family,
        "params": params,
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
        "sample_prompt": args.sample_prompt,
        "weights_mb": round(4 * params / (1 << 20), 1),
        # One forward pass per new token (the prompt's prefill, then each
        # token fed back), each reading every weight it uses once.
        "decode_weight_gb_per_s": round(decode_weight_bytes(cfg, params) * args.sample_tokens / sample_s / 1e9, 2),
        "dtype": args.dtype,
        **torch_info(torch),
        "trainable_params": sum(p.numel() for p in model.trainable(net)),
        "lora_rank": args.lora_rank,
    }
    if args.lora_rank:
        res.update(lora_alpha=args.lora_alpha, lora_targets=args.lora_targets)
    return res


def torch_info(torch):
    """Short fields naming the torch build and how it runs on this CPU."""
    backend = [l.split(":", 1)[1].strip() for l in torch.__config__.parallel_info().splitlines()
               if l.startswith("ATen parallel backend")]
    return {
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "parallel_backend": backend[0] if backend else "",
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the ATen kernels' ISA: AVX2, AVX512, ...
        "mkl": torch.backends.mkl.is_available(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        # oneDNN's bf16 products run natively (AVX512_BF16, AMX); otherwise converted to float32.
        "mkldnn_bf16": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
    }


def check_threads(torch, threads):
    """An error message unless torch, OpenMP and MKL all run threads threads, or None."""
    got = {"torch.get_num_threads()": torch.get_num_threads()}
    for line in torch.__config__.parallel_info().splitlines():
        name, _, value = line.strip().partition(" : ")
        if name in ("omp_get_max_threads()", "mkl_get_max_threads()") and value.isdigit():
            got[name] = int(value)
    wrong = {k: v for k, v in got.items() if v != threads}
    return f"--threads {threads} not honoured: {wrong}" if wrong else None


def build_or_exit(model, cfg, seed):
    try:
        return model.build(cfg, seed)
    except ValueError as err:
        sys.exit(f"bench.py: invalid model configuration: {err}")


# Tiny config.json files of the three Hugging Face model types --config reads,
# each with its own features: Qwen2's q/k/v biases, Qwen3's head_dim (here
# twice hidden/heads) and q/k norms, Llama 3's rope scaling; all tied.
TINY_HF = {
    "qwen2": {"model_type": "qwen2", "vocab_size": 11, "hidden_size": 32, "num_hidden_layers": 3,
              "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 40,
              "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
              "tie_word_embeddings": True, "use_sliding_window": False},
    "qwen3": {"model_type": "qwen3", "vocab_size": 11, "hidden_size": 32, "num_hidden_layers": 3,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 48,
              "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "attention_bias": False,
              "tie_word_embeddings": True},
    "llama": {"model_type": "llama", "vocab_size": 11, "hidden_size": 32, "num_hidden_layers": 3,
              "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 8, "intermediate_size": 64,
              "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
              "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
              "tie_word_embeddings": True},
}


def tiny_hf_configs(failures):
    """The TINY_HF models as --config --layers 2 builds them, checking what the file sets."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, hf in TINY_HF.items():
            path = os.path.join(tmp, f"{kind}.json")
            with open(path, "w") as f:
                json.dump(hf, f)
            cfg, positions = config_from_file(path, layers=2)
            got = (cfg.layers, cfg.dim, cfg.vocab, cfg.kv_heads, cfg.mlp_hidden, cfg.tie, cfg.norm_eps, cfg.rope_theta,
                   cfg.qkv_bias, cfg.o_bias, cfg.qk_norm, cfg.head_dim, positions)
            want = (2, hf["hidden_size"], hf["vocab_size"], hf["num_key_value_heads"], hf["intermediate_size"], True,
                    hf["rms_norm_eps"], hf["rope_theta"], kind == "qwen2", False, kind == "qwen3",
                    hf.get("head_dim", hf["hidden_size"] // hf["num_attention_heads"]), hf["max_position_embeddings"])
            if got != want:
                failures.append(f"--config {kind} --layers 2: config {got}, want {want}")
            cfg.max_pos = 12
            out.append(cfg)
    return out


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
        *tiny_hf_configs(failures),
        model.Config(family="gpt", vocab=11, dim=32, layers=2, heads=4, max_pos=12),
        model.Config(family="gpt", vocab=11, dim=32, layers=2, heads=4, act="relu", max_pos=12),
        model.Config(family="gpt", vocab=11, dim=32, layers=1, heads=2, act="gelu_new", max_pos=12),
        model.Config(family="llama", vocab=11, dim=32, layers=2, heads=4, kv_heads=2, max_pos=12),
        model.Config(family="llama", vocab=11, dim=48, layers=2, heads=4, kv_heads=1, hidden=40, tie=True, max_pos=12),
    ]
    for cfg in tiny:
        name = f"{cfg.family}/{cfg.act}/kv{cfg.kv_heads}/tie={cfg.tie}/dh={cfg.head_dim}/qk_norm={cfg.qk_norm}/bias={cfg.qkv_bias}"
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

        lora_check(torch, model, cfg, name, expect)
        bf16_check(torch, model, cfg, name, expect)
    return failures


# bfloat16 keeps 8 significant bits (spacing 2^-8 = 0.0039 just below 1). On the
# tiny models autocast moves the loss (about ln V) by 2e-5 to 1.3e-4 and the
# logits (|logit| < 1.1) by at most 0.0064 from float32's; the tolerances are
# a few times that, and a run that ignores --dtype differs by exactly 0 (the
# loss) or by float32's rounding, under 1e-5 (the sampled logits, whose
# shapes differ from the full forward's), against autocast's 0.0019 or more.
BF16_LOSS_TOL = 0.005
BF16_LOGIT_TOL = 0.02
BF16_MOVED = 1e-4


def bf16_check(torch, model, cfg, name, expect):
    """--dtype bfloat16 on cfg's model: autocast runs the products in bfloat16 over float32
    weights, the loss stays that of float32 within bfloat16's precision and falls, and
    KV-cached sampling under autocast matches one uncached autocast forward."""
    what = f"{name} bf16"
    net = model.build(cfg, seed=3)
    gen = torch.Generator().manual_seed(5)
    tokens = torch.randint(cfg.vocab, (3, 8), generator=gen)
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = net(tokens)
        expect(logits.dtype == torch.bfloat16, f"{what}: autocast logits are {logits.dtype}, want torch.bfloat16")
        f32 = float(model.next_token_loss(net, tokens))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            b16 = float(model.next_token_loss(net, tokens))
    expect(b16 != f32 and abs(b16 - f32) < BF16_LOSS_TOL,
           f"{what}: loss {b16:.6f} against float32's {f32:.6f}: want a difference in (0, {BF16_LOSS_TOL})")
    opt = model.new_optimizer(net)
    losses = [float(model.train_step(net, opt, tokens, bf16=True)) for _ in range(8)]
    expect(losses[0] != f32 and abs(losses[0] - f32) < BF16_LOSS_TOL,
           f"{what}: first training loss {losses[0]:.6f} against float32's {f32:.6f}: want a difference in (0, {BF16_LOSS_TOL})")
    expect(losses[-1] < losses[0], f"{what}: loss did not fall on a repeated batch: {losses}")
    kinds = {p.dtype for p in net.parameters()} | {s.dtype for st in opt.state.values() for s in st.values() if s.dim()}
    expect(kinds == {torch.float32}, f"{what}: weights or AdamW moments in {kinds}, want float32 master copies")

    prompt = torch.randint(cfg.vocab, (4, 1), generator=gen)
    out, cached = model.sample(net, prompt, 10, gen, record_logits=True, bf16=True)
    seq = torch.cat((prompt, out[:, :-1]), dim=1)
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            full = net(seq).float()
        ref = net(seq)
    diff, off = (cached - full).abs().max().item(), (cached - ref).abs().max().item()
    expect(cached.dtype == torch.float32 and diff < BF16_LOGIT_TOL,
           f"{what}: cached sampling logits ({cached.dtype}) differ from the uncached autocast forward by {diff:.3g}")
    expect(BF16_MOVED < off < BF16_LOGIT_TOL,
           f"{what}: cached sampling logits differ from the float32 forward by {off:.3g}: "
           f"want ({BF16_MOVED}, {BF16_LOGIT_TOL}), bfloat16's rounding")


def lora_check(torch, model, cfg, name, expect):
    """LoRA on cfg's model, all-linear and a part of the modules: step 0 is the base exactly,
    the adapters are PEFT's init and count, training moves them and nothing else."""
    part = ["c_attn", "mlp.c_proj"] if cfg.family == "gpt" else ["q_proj", "self_attn.v_proj", "down_proj"]
    tokens = torch.randint(cfg.vocab, (3, 8), generator=torch.Generator().manual_seed(5))
    for targets in (["all-linear"], part):
        what = f"{name} LoRA {targets}"
        base, net = model.build(cfg, seed=3), model.build(cfg, seed=3)
        paths = model.add_lora(net, 4, 8, targets, seed=1)
        expect(len(paths) == cfg.layers * (len(model.HF_MODULES[cfg.family]) if targets == ["all-linear"] else len(part)),
               f"{what}: adapted {paths}")
        with torch.no_grad():
            expect(torch.equal(net(tokens), base(tokens)), f"{what}: step-0 logits differ from the base's")
        count = sum(p.numel() for p in model.trainable(net))
        expect(count == model.expected_lora_params(cfg, 4, targets),
               f"{what}: {count} trainable parameters, closed form {model.expected_lora_params(cfg, 4, targets)}")
        expect(model.base_params(net) == model.expected_params(cfg), f"{what}: base_params counts the adapters")
        for m in net.modules():
            if isinstance(m, model.LoRALinear):
                bound = 1 / m.base.in_features ** 0.5
                expect(m.lora_A.abs().max().item() <= bound and m.lora_A.abs().max().item() > bound / 2,
                       f"{what}: A outside ±1/√in or too narrow")
                expect(not m.lora_B.any() and m.scale == 2, f"{what}: B not zero or scale {m.scale}, want 8/4")
        frozen = {n: p.detach().clone() for n, p in net.named_parameters() if not p.requires_grad}
        opt = model.new_optimizer(net)
        losses = [float(model.train_step(net, opt, tokens)) for _ in range(8)]
        expect(losses[-1] < losses[0], f"{what}: loss did not fall on a repeated batch: {losses}")
        moved = [n for n, p in net.named_parameters() if n in frozen and not torch.equal(p, frozen[n])]
        expect(not moved, f"{what}: training changed frozen base parameters {moved}")
        expect(all(m.lora_B.any() for m in net.modules() if isinstance(m, model.LoRALinear)), f"{what}: a B stayed zero")
    try:
        model.add_lora(model.build(cfg, seed=3), 4, 8, ["no_such_proj"], seed=1)
        expect(False, f"{name}: LoRA on no matching module did not raise")
    except ValueError:
        pass


def main(argv=None):
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # Thread pools read these when torch and OpenBLAS load, so set them first.
    # Debian's torch runs elementwise ops on libgomp and matmuls on OpenBLAS's own
    # pthread pool; with libgomp's default spin-waiting the two pools fight for the
    # cores and a training step can take 2-20x longer. Passive waiting avoids that.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    os.environ["MKL_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import model

    torch.set_num_threads(args.threads)
    if err := check_threads(torch, args.threads):
        sys.exit(f"bench.py: {err}")
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
    if args.mem_read_mb:  # after the peak is taken, so that its buffer does not count
        res["mem_read_gb_per_s"] = round(mem_read_gb_per_s(torch, args.mem_read_mb << 20), 2)
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
