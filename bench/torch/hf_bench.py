"""Training and sampling throughput of a Hugging Face model in PyTorch, on a GPU or the CPU.

    python3 hf_bench.py --config bench/configs/qwen3-0.6b.json --device cuda --dtype bfloat16 \
        --seq 512 --batch 16 --steps 10 --sample-batch 64 --sample-prompt 32 --sample-tokens 128

The peer of `hacrl bench engine` on the same shapes, as a PyTorch user runs
it: transformers' AutoModelForCausalLM built from the config.json with random
weights (SDPA attention), float32 weights, and for --dtype bfloat16 the
forward pass under torch.autocast (bfloat16 products, float32 master
weights: what hacrl's compute_dtype bfloat16 does); AdamW (fused on CUDA),
global-norm clipping at 1, next-token cross-entropy over all B×T tokens of
one random batch. Sampling is transformers' generate, at temperature 1
without top-k, exactly --sample-tokens new tokens per row, with the model's
weights cast to bfloat16 for --dtype bfloat16 (how inference is run).
--lora-rank N trains PEFT's LoRA adapters (rank N, alpha --lora-alpha,
default 2N, on --lora-targets, default all-linear) on the frozen base
instead of the whole model. --threads N sets torch's (and OpenMP's and
MKL's) threads; 0 leaves torch's default.
Prints one JSON object: tokens/s of each, the peak memory PyTorch allocated
on a GPU (torch.cuda.max_memory_allocated) and the process's peak resident
memory, and the peak its caching allocator reserved (max_memory_reserved,
the figure to set beside the GPU memory an XLA process holds). Reads only
the config file: no network.
"""

import argparse
import json
import os
import resource
import sys
import time


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, help="a Hugging Face config.json")
    p.add_argument("--layers", type=int, default=0, help="blocks; 0: the config's")
    p.add_argument("--device", default="cuda", help="cuda or cpu")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--sample-batch", type=int, default=32)
    p.add_argument("--sample-prompt", type=int, default=16)
    p.add_argument("--sample-tokens", type=int, default=128)
    p.add_argument("--sample-runs", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads; 0: torch's default")
    p.add_argument("--lora-rank", type=int, default=0, help="train PEFT LoRA adapters of this rank; 0: full fine-tuning")
    p.add_argument("--lora-alpha", type=float, default=None, help="LoRA alpha; default 2*rank")
    p.add_argument("--lora-targets", default="all-linear", help="comma-separated module names, or all-linear")
    args = p.parse_args(argv)
    if args.threads < 0 or args.lora_rank < 0:
        p.error(f"--threads and --lora-rank: want >= 0, got {args.threads} and {args.lora_rank}")
    if args.lora_alpha is not None and (args.lora_rank == 0 or not args.lora_alpha > 0):
        p.error(f"--lora-alpha {args.lora_alpha}: want > 0, with --lora-rank > 0")
    if args.lora_alpha is None:
        args.lora_alpha = 2 * args.lora_rank
    targets = [t.strip() for t in args.lora_targets.split(",") if t.strip()]
    if args.lora_rank and not targets:
        p.error("--lora-targets: empty, want module names (q_proj, ...) or all-linear")
    args.lora_targets = "all-linear" if targets == ["all-linear"] else targets
    return args


def main(argv):
    args = parse(argv)
    if args.threads:
        # Read when torch loads; passive waiting as bench.py (see its README).
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(args.threads)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    import transformers

    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(args.seed)
    cfg = transformers.AutoConfig.from_pretrained(args.config)
    if args.layers:
        cfg.num_hidden_layers = args.layers
    cfg.use_cache = True
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    bf16 = args.dtype == "bfloat16"
    with dev:  # initialized where it runs: a minute less for 1B parameters on a GPU
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.float32)
    params = sum(p.numel() for p in model.parameters())
    if args.lora_rank:
        import peft

        lora = peft.LoraConfig(r=args.lora_rank, lora_alpha=args.lora_alpha, target_modules=args.lora_targets,
                               lora_dropout=0.0, bias="none")
        model = peft.get_peft_model(model, lora)
    trainable = [p for p in model.parameters() if p.requires_grad]

    def sync():
        if cuda:
            torch.cuda.synchronize()

    opt = torch.optim.AdamW(trainable, lr=1e-3, weight_decay=0.01, fused=cuda)
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    tokens = torch.randint(cfg.vocab_size, (args.batch, args.seq), generator=gen).to(dev)

    def step():
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(input_ids=tokens).logits
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    model.train()
    for _ in range(args.warmup):
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    sync()
    train_s = time.perf_counter() - start
    peak_train = torch.cuda.max_memory_allocated() / 2**20 if cuda else 0
    reserved_train = torch.cuda.max_memory_reserved() / 2**20 if cuda else 0

    del opt
    model.eval()
    model.zero_grad(set_to_none=True)
    if bf16:
        model = model.to(torch.bfloat16)
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    prompt = torch.randint(cfg.vocab_size, (args.sample_batch, args.sample_prompt), generator=gen).to(dev)
    kw = dict(max_new_tokens=args.sample_tokens, min_new_tokens=args.sample_tokens, do_sample=True,
              temperature=1.0, top_k=0, top_p=1.0, pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        if args.warmup:
            model.generate(prompt, **kw)
        sync()
        start = time.perf_counter()
        for _ in range(args.sample_runs):
            out = model.generate(prompt, **kw)
        sync()
    sample_s = (time.perf_counter() - start) / args.sample_runs
    new = out.shape[1] - args.sample_prompt
    res = {
        "engine": "torch-hf",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "dtype": args.dtype,
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "params": params,
        "trainable_params": sum(p.numel() for p in trainable),
        "lora_rank": args.lora_rank,
        "layers": cfg.num_hidden_layers,
        "seq": args.seq,
        "batch": args.batch,
        "steps": args.steps,
        "train_step_ms": round(1000 * train_s / args.steps, 3),
        "train_tokens_per_s": round(args.batch * args.seq * args.steps / train_s, 1),
        "final_loss": round(loss.item(), 6),
        "sample_batch": args.sample_batch,
        "sample_prompt": args.sample_prompt,
        "sample_tokens": new,
        "sample_ms": round(1000 * sample_s, 2),
        "sample_tokens_per_s": round(args.sample_batch * new / sample_s, 1),
        "peak_gpu_train_mb": round(peak_train),
        "peak_gpu_sample_mb": round(torch.cuda.max_memory_allocated() / 2**20) if cuda else 0,
        "reserved_gpu_train_mb": round(reserved_train),
        "reserved_gpu_sample_mb": round(torch.cuda.max_memory_reserved() / 2**20) if cuda else 0,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    if args.lora_rank:
        res.update(lora_alpha=args.lora_alpha,
                   lora_targets=[args.lora_targets] if isinstance(args.lora_targets, str) else args.lora_targets)
    print(json.dumps(res))


if __name__ == "__main__":
    main(sys.argv[1:])
