"""Judge (gold, answer) pairs with Hugging Face's math-verify.

Reads {"pairs": [{"gold": str, "answer": str}, ...]} as JSON on stdin and
prints {"verdicts": [bool, ...], "seconds": float, "gold_unparsed": [str]}:
verdicts[i] is math_verify.verify(parse(gold), parse(answer)) for pair i, and
gold_unparsed lists the references math-verify reads only as a string (no
SymPy expression), which it then matches by exact text alone.

How math-verify is called (the choices documented in docs/verify-agreement.md):
- the reference is parsed as parse("\\boxed{" + gold + "}"): a benchmark
  reference is a bare LaTeX answer, and math-verify only reads LaTeX between
  delimiters; \\boxed{} keeps nested braces and a "\\$" inside intact;
- the answer, a model's output, is parsed as written with math-verify's
  default configuration (LatexExtractionConfig(), ExprExtractionConfig(),
  fallback_mode="first_match", extraction_mode="any_match");
- verify(gold, answer) with its defaults (float_rounding=6,
  numeric_precision=15, strict=True, timeout_seconds=5).
math-verify's timeouts are signal.alarm based, which works here: this script
runs single-threaded in the main thread. Parses are cached per text, so each
reference is parsed once however many answers it is paired with.
"""
import json
import logging
import sys
import time

from math_verify import parse, verify

logging.disable(logging.CRITICAL)


def main():
    req = json.load(sys.stdin)
    start = time.perf_counter()
    cache = {}

    def parsed(text):
        if text not in cache:
            cache[text] = parse(text)
        return cache[text]

    verdicts, unparsed = [], []
    for p in req["pairs"]:
        gold = parsed("\\boxed{" + p["gold"] + "}")
        if all(isinstance(x, str) for x in gold) and p["gold"] not in unparsed:
            unparsed.append(p["gold"])
        verdicts.append(bool(verify(gold, parsed(p["answer"]))))
    json.dump({"verdicts": verdicts, "seconds": time.perf_counter() - start,
               "gold_unparsed": unparsed}, sys.stdout)


if __name__ == "__main__":
    main()
