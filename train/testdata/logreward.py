"""A reward command for train's tests: reward (characters of the response
mod 7) / 6, correct when that count is even; it appends every request and
its answers, one JSON line each, to the file argv[1]."""
import json
import sys

log = open(sys.argv[1], "a")
for line in sys.stdin:
    req = json.loads(line)
    rewards, logged = [], []
    for it in req["items"]:
        n = len(it["response"])
        r = {"id": it["id"], "reward": (n % 7) / 6, "correct": n % 2 == 0}
        rewards.append(r)
        logged.append(dict(r, agent=it["agent"], response=it["response"], problem_id=it["problem_id"],
                           reference=it["reference"], truncated=it["truncated"], tokens=it["tokens"]))
    log.write(json.dumps({"purpose": req["purpose"], "step": req["step"], "items": logged}) + "\n")
    log.flush()
    print(json.dumps({"rewards": rewards}), flush=True)
