"""Counts the parameters of PEFT adapters with safetensors: for each
adapter_model.safetensors path given on standard input ({"files": [...]}),
the total number of scalars over its tensors and the short names of the
modules they adapt (the last name before .lora_A/.lora_B), each once,
sorted."""
import json
import re
import sys

from safetensors import safe_open

req = json.load(sys.stdin)
out = []
for path in req["files"]:
    total, mods = 0, set()
    with safe_open(path, framework="numpy") as f:
        for name in f.keys():
            n = 1
            for d in f.get_slice(name).get_shape():
                n *= d
            total += n
            m = re.match(r".*\.([^.]+)\.lora_[AB]\.weight$", name)
            if m is None:
                raise SystemExit(f"{path}: tensor {name} is not a LoRA weight")
            mods.add(m.group(1))
    out.append({"params": total, "modules": sorted(mods)})
print(json.dumps({"adapters": out}))
