#!/usr/bin/env python3
"""An external reward for hacrl's arith task, in plain Python (stdlib only).

hacrl starts this program once per run (reward: {command: [python3, THIS]}),
writes one JSON request per line on its stdin and reads one JSON answer per
line from its stdout (docs/reward.md):

  request  {"version": 1, "purpose": "train", "step": 3, "items": [
             {"id": 0, "problem_id": "arith/train/12", "agent": "gpt-char",
              "prompt": "47+38", "response": "...\\n#### 85", "reference": "85",
              "tokens": 31, "truncated": false}, ...]}
  answer   {"rewards": [{"id": 0, "reward": 1.0, "correct": true}, ...]}

The reward shapes the task's own 0/1 check:

  1.0  the final answer (after the last "####", on its line) equals the reference
  0.5  the answer is right but the response ran on to the token limit
  0.1  a well-formed integer answer that is wrong
  0.0  no integer answer at all

"correct" reports whether the answer is right, whatever the shaping, so
hacrl's accuracy/train counts right answers. Anything this program prints
for people goes to stderr; stdout carries answers only.
"""
import json
import re
import sys

INTEGER = re.compile(r"-?[0-9]+")


def final_answer(response):
    """The text after the last "####", up to the end of its line, trimmed."""
    i = response.rfind("####")
    if i < 0:
        return None
    return response[i + 4:].split("\n", 1)[0].strip()


def score(item):
    """(reward, correct) of one item."""
    answer = final_answer(item["response"])
    if answer is None or not INTEGER.fullmatch(answer):
        return 0.0, False
    reference = item["reference"]
    if reference is None or not INTEGER.fullmatch(reference.strip()):
        return 0.0, False
    if int(answer) != int(reference):
        return 0.1, False
    if item["truncated"]:
        return 0.5, True
    return 1.0, True


def main():
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("version") != 1:
            sys.exit("reward.py: unknown protocol version %r" % request.get("version"))
        rewards = []
        for item in request["items"]:
            reward, correct = score(item)
            rewards.append({"id": item["id"], "reward": reward, "correct": correct})
        sys.stdout.write(json.dumps({"rewards": rewards}) + "\n")
        sys.stdout.flush()
        if request["purpose"] == "start":
            print("reward.py: ready", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
