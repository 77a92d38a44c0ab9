"""The manifest internal/checksum should write for a directory, computed
independently: reads {"dir": path} on stdin and prints {"files": {path:
{"size", "sha256", "tensors": {name: {"offsets", "crc32c"}}}}} for every
regular file under dir but checksums.json, with SHA-256 from hashlib, tensor
byte ranges from the header as the safetensors format defines it (8-byte
little-endian length, JSON header, data offsets relative to the end of the
header; the Python safetensors library loads the file to check the header is
valid), and CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) computed
bit by bit. It reads only the local directory."""
import hashlib
import json
import os
import struct
import sys

from safetensors.numpy import load_file


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


root = json.load(sys.stdin)["dir"]
files = {}
for dirpath, dirnames, filenames in os.walk(root):
    for name in filenames:
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        if rel == "checksums.json":
            continue
        data = open(path, "rb").read()
        entry = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        if name.endswith(".safetensors"):
            load_file(path)  # a valid file
            (n,) = struct.unpack("<Q", data[:8])
            header = json.loads(data[8 : 8 + n])
            entry["tensors"] = {}
            for tensor, info in header.items():
                if tensor == "__metadata__":
                    continue
                b, e = (8 + n + o for o in info["data_offsets"])
                entry["tensors"][tensor] = {"offsets": [b, e], "crc32c": "%08x" % crc32c(data[b:e])}
        files[rel] = entry
print(json.dumps({"files": files}))
