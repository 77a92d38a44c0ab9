"""A reward command that answers the first (empty) request properly and then
misbehaves as argv[1] says; the tests of package reward drive it."""
import json
import os
import sys
import time

mode = sys.argv[1]


def send(obj_or_text):
    text = obj_or_text if isinstance(obj_or_text, str) else json.dumps(obj_or_text)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


if mode == "exit-at-start":
    print("misbehave: cannot load my model", file=sys.stderr, flush=True)
    sys.exit(2)
if mode == "hang-start":
    time.sleep(60)

for line in sys.stdin:
    req = json.loads(line)
    items = req["items"]
    if not items:
        send({"rewards": []})
        if mode == "extra-line":
            send({"rewards": []})
        continue
    ids = [it["id"] for it in items]
    good = [{"id": i, "reward": 0.5} for i in ids]
    if mode == "crash":
        print("misbehave: something broke on item %d" % ids[0], file=sys.stderr, flush=True)
        sys.exit(3)
    elif mode == "hang":
        time.sleep(60)
    elif mode == "stdout-close":
        os.close(1)
        time.sleep(60)
    elif mode == "garbage":
        send("this is not json")
    elif mode == "nan":
        send('{"rewards": [%s]}' % ", ".join('{"id": %d, "reward": NaN}' % i for i in ids))
    elif mode == "range":
        good[0]["reward"] = 1.5
        send({"rewards": good})
    elif mode == "negative":
        good[-1]["reward"] = -0.25
        send({"rewards": good})
    elif mode == "unknown":
        good[0]["id"] = ids[-1] + 100
        send({"rewards": good})
    elif mode == "duplicate":
        send({"rewards": good + good[:1]})
    elif mode == "missing":
        send({"rewards": good[:-1]})
    elif mode == "no-reward":
        send({"rewards": [{"id": i} for i in ids]})
    elif mode == "no-list":
        send({"scores": good})
    elif mode == "string-reward":
        send({"rewards": [{"id": i, "reward": "0.5"} for i in ids]})
    else:
        send({"rewards": good})
