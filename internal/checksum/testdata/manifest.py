"""The manifest internal/checksum should write for a directory, computed
independently: reads {"dir": path} on stdin and prints {"files": {path:
{"size", "sha256"}}} for every regular file under dir but checksums.json,
with SHA-256 from hashlib; a .safetensors file has instead "header_sha256"
(the bytes before the first tensor's data) and "tensors": {name: {"offsets",
"sha256"}}, the byte ranges from the header as the safetensors format
defines it (8-byte little-endian length, JSON header, data offsets relative
to the end of the header; the Python safetensors library loads the file to
check it is valid). It reads only the local directory."""
import hashlib
import json
import os
import struct
import sys

from safetensors.numpy import load_file


root = json.load(sys.stdin)["dir"]
files = {}
for dirpath, dirnames, filenames in os.walk(root):
    for name in filenames:
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        if rel == "checksums.json":
            continue
        data = open(path, "rb").read()
        entry = {"size": len(data)}
        if not name.endswith(".safetensors"):
            entry["sha256"] = hashlib.sha256(data).hexdigest()
        else:
            load_file(path)  # a valid file
            (n,) = struct.unpack("<Q", data[:8])
            header = json.loads(data[8 : 8 + n])
            entry["header_sha256"] = hashlib.sha256(data[: 8 + n]).hexdigest()
            entry["tensors"] = {}
            for tensor, info in header.items():
                if tensor == "__metadata__":
                    continue
                b, e = (8 + n + o for o in info["data_offsets"])
                entry["tensors"][tensor] = {"offsets": [b, e], "sha256": hashlib.sha256(data[b:e]).hexdigest()}
        files[rel] = entry
print(json.dumps({"files": files}))
