"""Checks that llama.cpp runs the checkpoint it was given: the logits
bench.py --logits wrote from a GGUF file against transformers' own model
class on the checkpoint directory the GGUF was converted from (float32,
eager attention), every position of the same prompt. Run with the
project's interpreter (scripts/pyenv.sh), offline:

    python check.py CHECKPOINT LOGITS.npz TOLERANCE

Prints one JSON line (max_abs_diff, max_logit, argmax_agree: the fraction
of positions whose top token agrees) and exits 1 when the largest
absolute difference exceeds TOLERANCE. hacrl itself is held to
transformers on such checkpoints by `go test ./model -run
TestTransformersCheckpoints`, so llama.cpp within tolerance of
transformers means both engines sample the same model.
"""

import json
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: check.py CHECKPOINT LOGITS.npz TOLERANCE")
    ckpt, path, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    got = np.load(path)
    tokens, theirs = got["tokens"], got["logits"]
    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with torch.inference_mode():
        ours = model(torch.tensor(tokens[None, :], dtype=torch.long)).logits[0].float().numpy()
    if ours.shape != theirs.shape:
        sys.exit(f"check.py: transformers gives logits {ours.shape}, {path} holds {theirs.shape}")
    diff = float(np.abs(ours - theirs).max())
    res = {"max_abs_diff": diff, "max_logit": float(np.abs(ours).max()),
           "argmax_agree": float((ours.argmax(-1) == theirs.argmax(-1)).mean()), "tolerance": tol,
           "positions": int(len(tokens))}
    print(json.dumps(res))
    sys.exit(0 if diff <= tol else 1)


if __name__ == "__main__":
    main()
