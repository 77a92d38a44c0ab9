"""transformers loads the checkpoints hacrl writes and says what they compute.

With {"make": [{"config": {config.json fields}, "seed": s, "logit_std": σ,
"dtype": "float32" or "bfloat16", "max_shard_size": bytes, "out": dir}]}
it first writes base models for hacrl to train: transformers'
AutoModelForCausalLM.from_config with the weights redrawn for clear greedy
margins (model/testdata/transformers_checkpoints.py's perturb), saved with
save_pretrained in the given dtype and shard size.

Then it reads {"jobs": [{"dir": checkpoint, "texts": [str], "max_tokens": n,
"prompts": [str], "prompt_ids": [[ids]], "new_tokens": k}]} as JSON on
standard input. For each job it loads dir with AutoTokenizer.from_pretrained
and AutoModelForCausalLM.from_pretrained (float32: bfloat16 weights upcast
exactly; eager attention) and prints, per job:

  - "dtype": the weights' dtype as AutoConfig reads it from config.json;
  - "ids": the tokenizer's ids of each text (no special tokens), at most
    max_tokens of them, and "prompt_tokens": those of each prompt;
  - "logprobs": log p(x[t] | x[:t]) for t = 1..len(x)-1 of each text's ids
    (float32 logits and log-sum-exp);
  - "continuations": generate from each prompt_ids greedily (do_sample
    False) for at most k new tokens, with the end tokens of the
    checkpoint's generation_config.json as transformers reads it; the new
    tokens, a final end token included;
  - "eos": the end tokens generate used, and "margin": the smallest gap
    between the best and second-best logit over all greedy steps.
"""
import json
import math
import os
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "model", "testdata"))
from transformers_checkpoints import random_model  # noqa: E402


def make(spec):
    m = random_model(spec)
    m.to(getattr(torch, spec["dtype"])).save_pretrained(spec["out"], max_shard_size=spec["max_shard_size"])


def main():
    torch.set_num_threads(1)  # small models: faster than contending for the cores
    req = json.load(sys.stdin)
    for spec in req.get("make", []):
        make(spec)
    out = []
    for job in req.get("jobs", []):
        tok = AutoTokenizer.from_pretrained(job["dir"])
        m = AutoModelForCausalLM.from_pretrained(job["dir"], dtype=torch.float32, attn_implementation="eager").eval()
        ids = [tok(t, add_special_tokens=False).input_ids[: job["max_tokens"]] for t in job["texts"]]
        res = {"dtype": str(AutoConfig.from_pretrained(job["dir"]).dtype).removeprefix("torch."), "ids": ids,
               "prompt_tokens": [tok(p, add_special_tokens=False).input_ids for p in job["prompts"]]}
        lps, conts, margin = [], [], math.inf
        with torch.no_grad():
            for x in ids:
                logits = m(input_ids=torch.tensor([x])).logits[0, :-1].float()
                lse = torch.logsumexp(logits, dim=-1)
                chosen = logits.gather(1, torch.tensor(x[1:])[:, None])[:, 0]
                lps.append((chosen.double() - lse.double()).tolist())
            for p in job["prompt_ids"]:
                r = m.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long), do_sample=False,
                               max_new_tokens=job["new_tokens"], output_logits=True, return_dict_in_generate=True)
                conts.append(r.sequences[0, len(p):].tolist())
                for logits in r.logits:
                    top = torch.topk(logits[0].float(), 2).values
                    margin = min(margin, (top[0] - top[1]).item())
        eos = m.generation_config.eos_token_id
        res.update(logprobs=lps, continuations=conts, margin=margin, eos=eos if isinstance(eos, list) else [eos])
        out.append(res)
    json.dump({"results": out}, sys.stdout)


if __name__ == "__main__":
    main()
