"""The log-prob part of scripts/device-check.sh: its sequences, and the comparison.

    python3 sequences.py WORK/seqs          # writes WORK/seqs.json and WORK/seqs.jsonl
    python3 sequences.py compare WORK       # compares WORK/hacrl-<dtype>.jsonl with WORK/hf.json

The sequences are random byte-token ids (the agents' tokenizer has the 256
bytes) of ragged lengths, as prompt_ids and response_ids. compare prints one
JSON object: for float32 and bfloat16, the largest difference between hacrl's
and transformers' per-token log-probs, and how far each side's bfloat16 is
from its float32.
"""

import json
import random
import sys


def make(prefix):
    rng = random.Random(7)
    seqs = [{"prompt_ids": [rng.randrange(256) for _ in range(6 + 9 * i)],
             "response_ids": [rng.randrange(256) for _ in range(10 + 13 * i)]} for i in range(6)]
    with open(prefix + ".json", "w") as f:
        json.dump(seqs, f)
    with open(prefix + ".jsonl", "w") as f:
        for s in seqs:
            f.write(json.dumps(s) + "\n")


def compare(work):
    def hacrl(dt):
        with open(f"{work}/hacrl-{dt}.jsonl") as f:
            return [json.loads(line)["logprobs"] for line in f if line.strip()]

    with open(f"{work}/hf.json") as f:
        hf_all = json.load(f)

    def hf(dt):
        return hf_all[dt]

    def gap(a, b):
        if [len(r) for r in a] != [len(r) for r in b]:
            raise SystemExit(f"sequences.py: the two sides scored different lengths: {[len(r) for r in a]} and {[len(r) for r in b]}")
        return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))

    h32, h16, t32, t16 = hacrl("float32"), hacrl("bfloat16"), hf("float32"), hf("bfloat16")
    print(json.dumps({
        "tokens": sum(len(r) for r in h32),
        "float32_max_abs_diff": gap(h32, t32),
        "bfloat16_max_abs_diff": gap(h16, t16),
        "hacrl_bf16_vs_f32": gap(h16, h32),
        "transformers_bf16_vs_f32": gap(t16, t32),
        # cuDNN's fused attention (xla:cuda) against hacrl's own decomposed
        # attention, both bfloat16: 0 where the backend has no fused op.
        "hacrl_bf16_fused_vs_decomposed": gap(h16, hacrl("bfloat16-decomposed")),
    }))


if __name__ == "__main__":
    if sys.argv[1] == "compare":
        compare(sys.argv[2])
    else:
        make(sys.argv[1])
