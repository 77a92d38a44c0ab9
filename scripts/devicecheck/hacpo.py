"""The hacrl train config of scripts/device-check.sh's HACPO step, on standard output.

    python3 hacpo.py WORK --steps 2 --prompts 8 --responses 4 --max-new-tokens 64 --dtype bfloat16

HACPO steps (the paper's defaults: KL 0.001 with a frozen reference) of
the examples/real pairing's shapes, the random-weight agents WORK/agents/
qwen3-0.6b and llama3.2-1b, on the generated arith task (no data files on the
GPU machine), plain prompts, no evaluation: the step's per-phase times are
what it measures.
"""

import argparse
import json
import os
import sys


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("work")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--responses", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--dtype", default="bfloat16")
    a = p.parse_args(argv)
    n = a.prompts * a.responses
    agents = [{"name": name, "checkpoint": os.path.abspath(os.path.join(a.work, "agents", name)),
               "template": {"kind": "plain"}, "optimizer": {"lr": 1e-6}, "compute_dtype": a.dtype,
               "sampling": {"temperature": 1.0, "max_new_tokens": a.max_new_tokens}}
              for name in ("qwen3-0.6b", "llama3.2-1b")]
    cfg = {
        "name": "device-check-hacpo",
        "seed": 1,
        "steps": a.steps,
        "method": {"name": "hacpo"},
        "task": {"name": "arith", "digits": 3, "operators": "+-"},
        "batch": {"prompts_per_step": a.prompts, "responses_per_prompt": a.responses,
                  "mini_batch": n, "micro_batch": min(n, 8)},
        "agents": agents,
        "eval": {"at_start": False},
    }
    print(json.dumps(cfg, indent=1))  # JSON is YAML


if __name__ == "__main__":
    main(sys.argv[1:])
