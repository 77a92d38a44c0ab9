"""transformers writes checkpoints for hacrl to load, and says what they compute.

Reads JSON on standard input:

    {"texts": [str, ...], "max_tokens": n, "prompt_tokens": p,
     "new_tokens": k, "greedy_texts": g,
     "models": [{"name": ..., "config": {config.json fields}, "seed": s,
                 "logit_std": σ, "tokenizer": tokenizer.json or null,
                 "f32": dir, "bf16": dir, "max_shard_size": bytes}]}

For each model it builds AutoModelForCausalLM.from_config(config) (float32,
transformers' own initialization), redraws its weights so that its
log-probs are far from uniform and its greedy choices have clear margins
(see perturb), and saves it with save_pretrained twice: in float32 to
"f32", and cast to bfloat16 to "bf16" in shards of at most max_shard_size
bytes. It tokenizes the texts with the model's real tokenizer.json (the
tokenizers library, no special tokens added), or, for GPT-2, whose
tokenizer files are not available offline, as GPT-2's byte-level tokens
(gpt2_bytes), keeping at most max_tokens ids of each.

Then it loads each saved directory back with
AutoModelForCausalLM.from_pretrained in float32 (bfloat16 weights upcast
exactly) and prints, per model and dtype:

  - "logprobs": log p(x[t] | x[:t]) for t = 1..len(x)-1 of every text
    (float32 logits and log-sum-exp);
  - "continuations": transformers' generate (do_sample=False, k new
    tokens, the saved generation_config's end tokens) from the first p
    tokens of the first g texts, the new tokens only;
  - "margin": the smallest gap between the best and second-best logit over
    every greedy step, so that a caller can tell a real difference from a
    near-tie.

Output: {"models": [{"name", "ids": [[...]], "f32": {...}, "bf16": {...}}]}.
"""
import json
import math
import sys

import torch
from tokenizers import Tokenizer
from transformers import AutoConfig, AutoModelForCausalLM


def gpt2_bytes(text):
    """GPT-2's ids of text's UTF-8 bytes, one token a byte (a valid, unmerged
    GPT-2 tokenization): GPT-2's first 256 vocabulary entries are the byte
    symbols in the order of its bytes_to_unicode table — the printable bytes
    '!'..'~', '¡'..'¬', '®'..'ÿ' (ids 0-187), then the other bytes in
    increasing order (ids 188-255: a space is 220, a newline 198)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    order = printable + [b for b in range(256) if b not in printable]
    ids = {b: i for i, b in enumerate(order)}
    return [ids[b] for b in text.encode("utf-8")]


def random_model(spec):
    """A float32 model of spec["config"] (a published config.json, edited)
    with transformers' own initialisation under spec["seed"], perturbed to
    spread its logits to spec["logit_std"]."""
    cfg = dict(spec["config"])
    kind = cfg.pop("model_type")
    for k in ("architectures", "transformers_version", "torch_dtype", "dtype"):
        cfg.pop(k, None)
    torch.manual_seed(spec["seed"])
    m = AutoModelForCausalLM.from_config(AutoConfig.for_model(kind, **cfg), dtype=torch.float32)
    perturb(m, spec["logit_std"], spec["seed"])
    return m


def perturb(model, logit_std, seed):
    """Redraws every weight: matrices N(0, 1/fan_in) so that activations stay
    of order one through the layers, and three times that for the blocks'
    output projections, so that the blocks outweigh the token's own
    embedding in the residual stream (a tied model otherwise repeats its
    last token greedily), the token embedding (and an untied LM
    head) N(0, (logit_std/√d)²) so that the logits spread with standard
    deviation about logit_std, position embeddings N(0, 1), biases N(0, 0.1²)
    and norm gains 1 + N(0, 0.1²)."""
    g = torch.Generator().manual_seed(seed)
    d = model.config.hidden_size
    with torch.no_grad():
        for name, p in model.named_parameters():
            def normal(std, mean=0.0):
                p.copy_(mean + std * torch.randn(p.shape, generator=g))

            if "wte" in name or "embed_tokens" in name or "lm_head" in name:
                normal(logit_std / math.sqrt(d))
            elif "wpe" in name:
                normal(1.0)
            elif "norm" in name or ".ln_" in name or name.startswith("transformer.ln_f"):
                normal(0.1, 1.0) if name.endswith("weight") else normal(0.1)
            elif name.endswith("bias"):
                normal(0.1)
            elif p.dim() == 2:
                # torch.nn.Linear is [out, in]; GPT-2's Conv1D is [in, out].
                fan_in = p.shape[0] if "transformer.h." in name else p.shape[1]
                out = any(k in name for k in ("o_proj", "down_proj", "c_proj"))
                normal((3 if out else 1) / math.sqrt(fan_in))
            else:
                raise ValueError(f"perturb: no rule for {name} {tuple(p.shape)}")


def load(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager").eval()


def logprobs(m, ids):
    out = []
    with torch.no_grad():
        for x in ids:
            logits = m(input_ids=torch.tensor([x])).logits[0, :-1].float()
            lse = torch.logsumexp(logits, dim=-1)
            best = logits.gather(1, torch.tensor(x[1:])[:, None])[:, 0]
            out.append((best.double() - lse.double()).tolist())
    return out


def greedy(m, prompts, k):
    conts, margin = [], math.inf
    with torch.no_grad():
        for p in prompts:
            r = m.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long), do_sample=False,
                           max_new_tokens=k, output_logits=True, return_dict_in_generate=True)
            conts.append(r.sequences[0, len(p):].tolist())
            for logits in r.logits:
                top = torch.topk(logits[0].float(), 2).values
                margin = min(margin, (top[0] - top[1]).item())
    return conts, margin


def main():
    torch.set_num_threads(1)  # small models: faster than contending for the cores
    req = json.load(sys.stdin)
    out = []
    for spec in req["models"]:
        m = random_model(spec)
        m.save_pretrained(spec["f32"])
        m.to(torch.bfloat16).save_pretrained(spec["bf16"], max_shard_size=spec["max_shard_size"])
        if spec.get("tokenizer"):
            tok = Tokenizer.from_file(spec["tokenizer"])
            ids = [tok.encode(t, add_special_tokens=False).ids for t in req["texts"]]
        else:
            ids = [gpt2_bytes(t) for t in req["texts"]]
        ids = [x[: req["max_tokens"]] for x in ids]
        res = {"name": spec["name"], "ids": ids}
        prompts = [x[: req["prompt_tokens"]] for x in ids[: req["greedy_texts"]]]
        for dt in ("f32", "bf16"):
            back = load(spec[dt])
            conts, margin = greedy(back, prompts, req["new_tokens"])
            res[dt] = {"logprobs": logprobs(back, ids), "continuations": conts, "margin": margin}
        out.append(res)
    json.dump({"models": out}, sys.stdout)


if __name__ == "__main__":
    main()
