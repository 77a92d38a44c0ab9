"""Sampling throughput of llama.cpp (through llama-cpp-python's low-level
API) on a GGUF file, the peer of `hacrl bench engine`'s sampling half.

N sequences (--sample-batch), each a --sample-prompt-token prompt of random
token ids, are prefilled in one llama_decode call of N·P tokens; then each
sequence gets exactly --sample-tokens new tokens, temperature-1
multinomial sampling over the whole vocabulary (llama.cpp's dist sampler),
one llama_decode of N tokens per step, no stop token. That is hacrl's
sampler: T forward passes per run (the prefill, then T−1 tokens fed
back). Timed: --sample-runs runs after one untimed one (--warmup 1), the
KV cache cleared before each.

Prints one JSON line. Fields shared with `hacrl bench engine`:
sample_tokens_per_s (N·T / run time), sample_ms (mean run time),
decode_weight_gb_per_s (the weight bytes one forward pass reads × T /
run time) and the sample_* settings. Besides: prompt_ms and
prompt_tokens_per_s (the prefill call and the first sampled token:
N·P tokens), decode_ms and decode_tokens_per_s (the other T−1 steps:
N·(T−1) tokens), weight_bytes (from the GGUF's tensor table: every tensor
but the token embedding when a separate output.weight exists, since a
decoding step only gathers rows of it), the tensor types, the KV cache
type and llama.cpp's system info (the SIMD it was built with).

The GGUF must hold float32, float16 or bfloat16 tensors only (what
convert.sh writes).
"""

import argparse
import ctypes
import json
import os
import random
import struct
import sys
import time

import llama_cpp as L

GGUF_TYPES = {0: ("f32", 4), 1: ("f16", 2), 30: ("bf16", 2)}
KV_TYPES = {"f32": 0, "f16": 1, "bf16": 30}


def gguf_tensors(path):
    """Returns {name: (type name, bytes)} from a GGUF file's header."""
    with open(path, "rb") as f:

        def read(fmt):
            n = struct.calcsize(fmt)
            b = f.read(n)
            if len(b) != n:
                raise ValueError(f"{path}: truncated GGUF header")
            return struct.unpack("<" + fmt, b)[0]

        def string():
            return f.read(read("Q")).decode("utf-8", "replace")

        scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

        def skip(t):
            if t in scalar:
                f.seek(struct.calcsize("<" + scalar[t]), 1)
            elif t == 8:
                f.seek(read("Q"), 1)
            elif t == 9:
                et, n = read("I"), read("Q")
                if et in scalar:
                    f.seek(n * struct.calcsize("<" + scalar[et]), 1)
                else:
                    for _ in range(n):
                        skip(et)
            else:
                raise ValueError(f"{path}: metadata value type {t}: not a GGUF type")

        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file (its first bytes are not 'GGUF')")
        version, n_tensors, n_kv = read("I"), read("Q"), read("Q")
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version}: want 2 or newer")
        for _ in range(n_kv):
            string()
            skip(read("I"))
        tensors = {}
        for _ in range(n_tensors):
            name = string()
            n = 1
            for _ in range(read("I")):
                n *= read("Q")
            t = read("I")
            read("Q")  # offset
            if t not in GGUF_TYPES:
                raise ValueError(f"{path}: tensor {name} has GGML type {t}: want f32 (0), f16 (1) or bf16 (30)")
            tensors[name] = (GGUF_TYPES[t][0], n * GGUF_TYPES[t][1])
        return tensors


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a GGUF file")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--sample-batch", type=int, default=1, help="sequences sampled at once (N)")
    p.add_argument("--sample-prompt", type=int, default=1, help="prompt tokens per sequence (P)")
    p.add_argument("--sample-tokens", type=int, default=32, help="new tokens per sequence (T)")
    p.add_argument("--sample-runs", type=int, default=3, help="timed runs")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first")
    p.add_argument("--kv-type", choices=sorted(KV_TYPES), default="",
                   help="KV cache type; default f32 for a float32 model, else llama.cpp's f16")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--logits", default="",
                   help="instead of timing: write the logits of every position of one --sample-prompt-token prompt, "
                        "with its tokens, to this .npz file (check.py compares them with transformers)")
    a = p.parse_args()
    N, P, T = a.sample_batch, a.sample_prompt, a.sample_tokens
    for name, v, lo in [("--sample-batch", N, 1), ("--sample-prompt", P, 1), ("--sample-tokens", T, 1),
                        ("--sample-runs", a.sample_runs, 1), ("--warmup", a.warmup, 0), ("--threads", a.threads, 1)]:
        if v < lo:
            sys.exit(f"bench.py: {name} {v}: want ≥ {lo}")

    tensors = gguf_tensors(a.model)
    types = sorted({t for t, _ in tensors.values()})
    weight_bytes = sum(b for n, (_, b) in tensors.items() if not (n == "token_embd.weight" and "output.weight" in tensors))
    matrix_type = tensors["token_embd.weight"][0] if "token_embd.weight" in tensors else types[0]
    kv_type = a.kv_type or ("f32" if matrix_type == "f32" else "f16")

    global _quiet  # llama.cpp keeps the callback: it must outlive this call
    _quiet = L.llama_log_callback(lambda level, text, data: None)
    L.llama_log_set(_quiet, ctypes.c_void_p())
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    model = L.llama_model_load_from_file(a.model.encode(), mp)
    if not model:
        sys.exit(f"bench.py: {a.model}: llama.cpp could not load it")
    vocab = L.llama_model_get_vocab(model)
    V = L.llama_vocab_n_tokens(vocab)

    cp = L.llama_context_default_params()
    per_seq = -(-(P + T) // 256) * 256
    cp.n_ctx = N * per_seq
    cp.n_batch = cp.n_ubatch = max(N * P, N)
    cp.n_seq_max = N
    cp.n_threads = cp.n_threads_batch = a.threads
    cp.type_k = cp.type_v = KV_TYPES[kv_type]
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        sys.exit(f"bench.py: llama.cpp could not make a context (n_ctx {cp.n_ctx}, {N} sequences, KV {kv_type})")
    mem = L.llama_get_memory(ctx)

    rng = random.Random(a.seed)
    prompts = [[rng.randrange(V) for _ in range(P)] for _ in range(N)]
    batch = L.llama_batch_init(max(N * P, N), 0, N)
    chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
    L.llama_sampler_chain_add(chain, L.llama_sampler_init_dist(a.seed))

    def fill(items):
        """items: (token, pos, seq, wants logits) per batch row."""
        for i, (tok, pos, seq, logits) in enumerate(items):
            batch.token[i] = tok
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = logits
        batch.n_tokens = len(items)

    def decode():
        rc = L.llama_decode(ctx, batch)
        if rc != 0:
            sys.exit(f"bench.py: llama_decode returned {rc}")

    def run():
        """One sampling run; returns (prefill seconds, decode seconds)."""
        L.llama_memory_clear(mem, True)
        t0 = time.perf_counter()
        fill([(tok, j, s, j == P - 1) for s in range(N) for j, tok in enumerate(prompts[s])])
        decode()
        last = [L.llama_sampler_sample(chain, ctx, s * P + P - 1) for s in range(N)]
        t1 = time.perf_counter()
        for step in range(1, T):
            fill([(last[s], P + step - 1, s, True) for s in range(N)])
            decode()
            last = [L.llama_sampler_sample(chain, ctx, s) for s in range(N)]
        return t1 - t0, time.perf_counter() - t1

    if a.logits:
        import numpy as np
        fill([(tok, j, 0, True) for j, tok in enumerate(prompts[0])])
        decode()
        logits = np.array([np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, j), shape=(V,)) for j in range(P)])
        np.savez(a.logits, tokens=np.array(prompts[0]), logits=logits)
        return

    for _ in range(a.warmup):
        run()
    pre = dec = 0.0
    for _ in range(a.sample_runs):
        x, y = run()
        pre, dec = pre + x, dec + y
    R = a.sample_runs
    total = pre + dec
    res = {
        "engine": "llama.cpp",
        "llama_cpp_python": L.__version__,
        "model": a.model,
        "tensor_types": types,
        "kv_type": kv_type,
        "threads": a.threads,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
        "sample_batch": N, "sample_prompt": P, "sample_tokens": T, "sample_runs": R,
        "sample_ms": round(1000 * total / R, 3),
        "sample_tokens_per_s": round(N * T * R / total, 1),
        "prompt_ms": round(1000 * pre / R, 3),
        "prompt_tokens_per_s": round(N * P * R / pre, 1),
        "decode_ms": round(1000 * dec / R, 3),
        "decode_tokens_per_s": round(N * (T - 1) * R / dec, 1) if T > 1 else None,
        "params": L.llama_model_n_params(model),
        "weight_bytes": weight_bytes,
        "weights_mb": round(weight_bytes / (1 << 20), 1),
        "decode_weight_gb_per_s": round(weight_bytes * T * R / total / 1e9, 2),
        "system_info": L.llama_print_system_info().decode().strip(),
    }
    L.llama_sampler_free(chain)
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    L.llama_model_free(model)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
