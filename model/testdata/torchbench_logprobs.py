"""Per-token log-probs of checkpoint directories on bench/torch/model.py.

Reads {"jobs": [{"dir": checkpoint, "seqs": [[ids], ...]}]} as JSON on
standard input and prints {"logprobs": [per job: [per sequence: [...]]]}:
log p(x[t] | x[:t]) for t = 1..len(x)-1, from bench/torch/hf_logprobs.py's
reading of each directory (config.json and safetensors files read without
transformers) into model.py's GPT or Llama, in float32. The model tests hold
it to transformers' log-probs on the same files, so that benchmarks may use
either as the PyTorch side.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "torch"))
import hf_logprobs  # noqa: E402


def main():
    torch.set_num_threads(1)  # small models: faster than contending for the cores
    req = json.load(sys.stdin)
    json.dump({"logprobs": [hf_logprobs.checkpoint_logprobs(j["dir"], j["seqs"]) for j in req["jobs"]]}, sys.stdout)


if __name__ == "__main__":
    main()
