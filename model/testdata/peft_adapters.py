"""PEFT writes LoRA adapters with the options a user may choose, for hacrl's
loader to read or refuse.

Reads {"base": dir, "seqs": [{"prompt": [ids], "response": [ids]}],
"cases": [{"name": ..., "out": dir, "config": {LoraConfig keyword
arguments}, "b_std": σ}]} as JSON on standard input. For each case it loads
the base with transformers' AutoModelForCausalLM in float32, wraps it with
PEFT's get_peft_model(LoraConfig(**config)) (a string target_modules is
PEFT's regular expression), draws every lora_B (and lora_embedding_B)
weight from N(0, b_std²) so that the adapter changes the model, saves it
with save_pretrained to "out" (in bfloat16 when the case's "dtype" says
so: PEFT loads it back upcast to float32), loads it back onto a fresh base with
PeftModel.from_pretrained and prints, per case, the log-probs of each
sequence's response tokens (float32 logits, log-softmax in float64):
{"results": [{"logprobs": [[...]]}]}.

With "gpt2": {GPT2Config keyword arguments} it first writes the base: a
GPT2LMHeadModel of the published GPT-2 config (GPT2Config's defaults: the
full 50257-token vocabulary, gelu_new, tied embeddings) with the given
sizes, its random weights (biases and norm gains included) moved by
N(0, 0.02²), saved in float32 with save_pretrained.
"""
import json
import sys

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel


def base_model(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager").eval()


def score(m, seqs):
    out = []
    with torch.no_grad():
        for s in seqs:
            ids = s["prompt"] + s["response"]
            logp = torch.log_softmax(m(input_ids=torch.tensor([ids])).logits[0].double(), dim=-1)
            n = len(s["prompt"])
            out.append([logp[n - 1 + j][t].item() for j, t in enumerate(s["response"])])
    return out


def main():
    req = json.load(sys.stdin)
    if "gpt2" in req:
        torch.manual_seed(7)
        g = GPT2LMHeadModel(GPT2Config(**req["gpt2"]))
        with torch.no_grad():
            for p in g.parameters():
                p.add_(torch.randn_like(p) * 0.02)
        g.save_pretrained(req["base"])
    results = []
    for i, case in enumerate(req["cases"]):
        torch.manual_seed(100 + i)
        m = get_peft_model(base_model(req["base"]), LoraConfig(**case["config"]))
        with torch.no_grad():
            for name, p in m.named_parameters():
                if "lora_B" in name or "lora_embedding_B" in name:
                    p.normal_(0, case["b_std"])
        if case.get("dtype") == "bfloat16":  # as PEFT saves an adapter trained in bfloat16
            m = m.to(torch.bfloat16)
        m.save_pretrained(case["out"])
        back = PeftModel.from_pretrained(base_model(req["base"]), case["out"]).eval()
        results.append({"logprobs": score(back, req["seqs"])})
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
