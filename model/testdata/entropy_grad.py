"""The gradient of Σ w·log p + Σ e·H in PyTorch, for hacrl's AccumulateEntropy.

Reads {"models": [{"dir": checkpoint, "adapter": PEFT adapter dir or "",
"seqs": [{"prompt": [ids], "response": [ids]}], "weights": [[...]],
"entropy": [[...]]}]} as JSON on standard input. For each model it loads
the checkpoint with transformers' AutoModelForCausalLM (and, with an
adapter, PEFT's PeftModel.from_pretrained, is_trainable: only the adapters
are trained), in float64, and for the surrogate

    S = Σ_b Σ_t weights[b][t]·lp[b][t] + entropy[b][t]·H[b][t]

where lp[b][t] = log p(response[t] | prompt, response[:t]) and
H[b][t] = −Σ_v p_v log p_v is the entropy of the next-token distribution at
that position (temperature 1), takes torch.autograd's gradient of S with
respect to every trainable parameter. It prints {"results": [{"grads":
{name: [values, flattened in the tensor's shape]}, "logprobs": [[...]],
"entropy": [[...]]}]}, with PEFT's adapter names as the adapter file holds
them (without the ".default" of the adapter's name). It reads only the
local directories.
"""
import json
import sys

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM


def load(spec):
    m = AutoModelForCausalLM.from_pretrained(spec["dir"], dtype=torch.float64, attn_implementation="eager")
    if spec.get("adapter"):
        m = PeftModel.from_pretrained(m, spec["adapter"], is_trainable=True)
    return m.to(torch.float64).eval()  # eval: no dropout; gradients still flow


def surrogate_grads(spec):
    m = load(spec)
    m.zero_grad()
    total = torch.zeros((), dtype=torch.float64)
    lps, ents = [], []
    for s, w, e in zip(spec["seqs"], spec["weights"], spec["entropy"]):
        ids = s["prompt"] + s["response"]
        logits = m(input_ids=torch.tensor([ids])).logits[0]
        logp = torch.log_softmax(logits, dim=-1)
        pos = torch.arange(len(s["response"])) + len(s["prompt"]) - 1
        lp = logp[pos, torch.tensor(s["response"])]
        h = -(logp.exp() * logp).sum(-1)[pos]
        total = total + (torch.tensor(w, dtype=torch.float64) * lp).sum() + (torch.tensor(e, dtype=torch.float64) * h).sum()
        lps.append(lp.tolist())
        ents.append(h.tolist())
    total.backward()
    grads = {}
    for name, p in m.named_parameters():
        if p.requires_grad:
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            grads[name.replace(".default.", ".")] = g.reshape(-1).tolist()
    return {"grads": grads, "logprobs": lps, "entropy": ents}


def main():
    torch.set_num_threads(1)  # tiny models: faster than contending for the cores
    req = json.load(sys.stdin)
    json.dump({"results": [surrogate_grads(spec) for spec in req["models"]]}, sys.stdout)


if __name__ == "__main__":
    main()
