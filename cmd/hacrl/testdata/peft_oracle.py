"""PEFT as the oracle for hacrl's LoRA adapters.

Reads {"jobs": [...]} as JSON on standard input and prints {"results":
[...]}, one result per job, in order. Every model is loaded from a local
directory with transformers' AutoModelForCausalLM in float32 (eager
attention), and every adapter with PEFT's PeftModel.from_pretrained.

A job's "seqs" are [{"prompt": [ids], "response": [ids]}]; the result's
"logprobs" are, per sequence, log p(response token | everything before it)
under the job's model (float32 logits, log-softmax in float64), and "best"
the largest log-prob of any token at the same positions (what a greedy
choice would reach).

Jobs ("op"):
  make   PEFT makes a LoRA adapter on "base" — LoraConfig(r, lora_alpha,
         target_modules "all-linear", use_rslora, init_lora_weights=False,
         task_type CAUSAL_LM), with B drawn from N(0, b_std²) (seeded by
         "seed") so that the adapter changes the model — saves it to "out"
         with save_pretrained, and scores the seqs with the saved adapter
         loaded back onto a fresh base.
  score  scores the seqs with "adapter" (or none, if null) on "base".
  merge  loads "adapter" on "base", folds it in with merge_and_unload,
         saves the merged model to "out" with save_pretrained (float32
         safetensors) with the base's tokenizer and agent files, as a user
         ships it, and scores the seqs with the merged model.
"""
import json
import os
import shutil
import sys

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM


def base_model(path):
    m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")
    return m.eval()


def score(m, seqs):
    lps, best = [], []
    with torch.no_grad():
        for s in seqs:
            ids = s["prompt"] + s["response"]
            logits = m(input_ids=torch.tensor([ids])).logits[0].double()
            logp = torch.log_softmax(logits, dim=-1)
            n = len(s["prompt"])
            rows = [logp[n - 1 + j] for j in range(len(s["response"]))]
            lps.append([rows[j][t].item() for j, t in enumerate(s["response"])])
            best.append([r.max().item() for r in rows])
    return {"logprobs": lps, "best": best}


def make(job):
    torch.manual_seed(job["seed"])
    cfg = LoraConfig(r=job["r"], lora_alpha=job["alpha"], target_modules="all-linear",
                     use_rslora=job["rslora"], init_lora_weights=False, task_type="CAUSAL_LM")
    m = get_peft_model(base_model(job["base"]), cfg)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "lora_B" in name:
                p.normal_(0, job["b_std"])
    m.save_pretrained(job["out"])
    back = PeftModel.from_pretrained(base_model(job["base"]), job["out"]).eval()
    return score(back, job["seqs"])


def main():
    req = json.load(sys.stdin)
    results = []
    for job in req["jobs"]:
        op = job["op"]
        if op == "make":
            results.append(make(job))
        elif op == "score":
            m = base_model(job["base"])
            if job.get("adapter"):
                m = PeftModel.from_pretrained(m, job["adapter"]).eval()
            results.append(score(m, job["seqs"]))
        elif op == "merge":
            m = PeftModel.from_pretrained(base_model(job["base"]), job["adapter"]).merge_and_unload()
            m.save_pretrained(job["out"])
            for f in ("tokenizer.json", "tokenizer_config.json", "agent.json"):
                if os.path.exists(os.path.join(job["base"], f)):
                    shutil.copy(os.path.join(job["base"], f), job["out"])
            results.append(score(m.eval(), job["seqs"]))
        else:
            raise SystemExit(f"unknown op {op!r}")
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
