"""The Hugging Face Python libraries' view of tokenizer files and chat templates.

Reads one JSON request on standard input and prints one JSON answer:

  {"encode": [{"dir": D, "texts": [...]}, ...],
   "apply": [{"dir": D, "contexts": [{"messages": [...],
              "add_generation_prompt": bool, "vars": {...}}, ...]}, ...]}

For each "encode" entry, the ids of every text under tokenizers'
Tokenizer.from_file(D/tokenizer.json) (add_special_tokens=False) and under
transformers' AutoTokenizer.from_pretrained(D) (add_special_tokens=False), and
the text AutoTokenizer decodes those ids back to (skip_special_tokens=True),
all texts in one batch each. For each "apply" entry, AutoTokenizer's
apply_chat_template of every context, as text (tokenize=False) and as ids
(tokenize=True), with the context's vars as template variables; an error is
reported per context. It reads only the local directories it is given.
"""

import json
import sys

from tokenizers import Tokenizer
from transformers import AutoTokenizer


_auto = {}


def auto(path):
    """AutoTokenizer of directory path, loaded once."""
    if path not in _auto:
        _auto[path] = AutoTokenizer.from_pretrained(path)
    return _auto[path]


def encode(req):
    texts = req["texts"]
    raw = Tokenizer.from_file(req["dir"] + "/tokenizer.json")
    fast = auto(req["dir"])
    tok_ids = [e.ids for e in raw.encode_batch(texts, add_special_tokens=False)]
    auto_ids = fast(texts, add_special_tokens=False)["input_ids"]
    decoded = fast.batch_decode(auto_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    return {"tokenizers": tok_ids, "auto": auto_ids, "decoded": decoded}


def ids_of(out):
    # apply_chat_template(tokenize=True) gives a BatchEncoding in
    # transformers 5 and a list in 4.
    if hasattr(out, "keys") and "input_ids" in out:
        out = out["input_ids"]
    return list(out)


def apply(req):
    tok = auto(req["dir"])
    texts, ids, errors = [], [], []
    for ctx in req["contexts"]:
        kw = dict(ctx.get("vars") or {})
        try:
            text = tok.apply_chat_template(ctx["messages"], tokenize=False,
                                           add_generation_prompt=ctx["add_generation_prompt"], **kw)
            got = tok.apply_chat_template(ctx["messages"], tokenize=True,
                                          add_generation_prompt=ctx["add_generation_prompt"], **kw)
            texts.append(text)
            ids.append(ids_of(got))
            errors.append(None)
        except Exception as e:  # reported per context, as the Go side does
            texts.append(None)
            ids.append(None)
            errors.append(f"{type(e).__name__}: {e}")
    return {"texts": texts, "ids": ids, "errors": errors, "template": tok.chat_template}


def main():
    req = json.load(sys.stdin)
    out = {
        "encode": [encode(r) for r in req.get("encode") or []],
        "apply": [apply(r) for r in req.get("apply") or []],
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
