"""Random-weight agents and log-probs for scripts/device-check.sh, with transformers.

    python3 agents.py make DIR CONFIG [DIR CONFIG ...] [--layers N] [--device cuda]
    python3 agents.py logprobs DIR SEQS.json --device cuda --dtype float32 bfloat16

make writes, for each pair, a Hugging Face checkpoint of the config.json CONFIG with random
weights (transformers' own initialization, saved in bfloat16 as published
checkpoints are) and a byte-level BPE tokenizer.json (the 256 bytes, no
merges, and <|endoftext|>: the GPU machine has no tokenizer files and no
network) into DIR, an agent hacrl loads. --layers N keeps N blocks;
--device cuda initializes the weights on the GPU (seconds instead of a
minute for a billion parameters on the CPU).

logprobs prints {"float32": [[...], ...], "bfloat16": ...}, one entry per
--dtype: for each sequence of SEQS.json, log p(x[t+1] | x[:t+1]) for t ≥ its
prompt length, with transformers on DEVICE, in float32 or under bfloat16
autocast (float32 weights). One process does it all: a Python start with
torch and transformers takes seconds.
"""

import argparse
import json
import os
import sys


def make(args):
    if len(args.pairs) % 2:
        raise SystemExit(f"agents.py make: want DIR CONFIG pairs, got {args.pairs}")
    for i in range(0, len(args.pairs), 2):
        make_one(args.pairs[i], args.pairs[i + 1], args)


def make_one(dir, config, args):
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    with open(config) as f:
        hf = json.load(f)
    if args.layers:
        hf["num_hidden_layers"] = args.layers
    special = 256
    hf.update(bos_token_id=special, eos_token_id=special, pad_token_id=None)
    if hf.get("rope_scaling") is None:
        hf.pop("rope_scaling", None)
    os.makedirs(dir, exist_ok=True)
    cfg = transformers.AutoConfig.for_model(**hf)
    torch.manual_seed(args.seed)
    with torch.device(args.device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.to(torch.bfloat16).save_pretrained(dir, safe_serialization=True)

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    tok.save(os.path.join(dir, "tokenizer.json"))
    with open(os.path.join(dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>",
                   "bos_token": None, "model_max_length": hf.get("max_position_embeddings", 4096)}, f)
    print(json.dumps({"dir": dir, "params": sum(p.numel() for p in model.parameters()),
                      "layers": cfg.num_hidden_layers, "vocab": cfg.vocab_size}))


def logprobs(args):
    import torch
    import transformers

    with open(args.seqs) as f:
        seqs = json.load(f)
    dev = torch.device(args.device)
    model = transformers.AutoModelForCausalLM.from_pretrained(args.dir, dtype=torch.float32).to(dev).eval()
    out = {}
    with torch.no_grad():
        for dt in args.dtype:
            out[dt] = []
            for s in seqs:
                ids = torch.tensor([s["prompt_ids"] + s["response_ids"]], device=dev)
                with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=dt == "bfloat16"):
                    logits = model(input_ids=ids).logits
                lp = torch.log_softmax(logits[0].float(), dim=-1)
                p = len(s["prompt_ids"])
                out[dt].append([lp[t - 1, ids[0, t]].item() for t in range(p, ids.shape[1])])
    print(json.dumps(out))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("pairs", nargs="+", metavar="DIR CONFIG")
    m.add_argument("--layers", type=int, default=0)
    m.add_argument("--device", default="cpu")
    m.add_argument("--seed", type=int, default=0)
    lp = sub.add_parser("logprobs")
    lp.add_argument("dir")
    lp.add_argument("seqs")
    lp.add_argument("--device", default="cuda")
    lp.add_argument("--dtype", choices=("float32", "bfloat16"), nargs="+", default=["float32"])
    args = p.parse_args(argv)
    {"make": make, "logprobs": logprobs}[args.cmd](args)


if __name__ == "__main__":
    main(sys.argv[1:])
