"""Per-token log-probs of a Hugging Face Llama/Qwen2/Qwen3 checkpoint, in PyTorch.

    python3 hf_logprobs.py CHECKPOINT_DIR < sequences.json

reads CHECKPOINT_DIR/config.json and CHECKPOINT_DIR/model.safetensors (F32,
F16 or BF16 tensors under Hugging Face's names), builds model.py's Llama from
them and prints {"logprobs": [[...], ...]}: for each input sequence x (a JSON
list of token-id lists on stdin), log p(x[t+1] | x[:t+1]) for t = 0..len(x)-2,
computed in float32. hacrl's model tests compare its engines with it; it
reads the files itself, sharing nothing with the Go code.
"""

import json
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model  # noqa: E402

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    """The tensors of a .safetensors file as float32, by name."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in DTYPES:
            raise ValueError(f"{path}: tensor {name}: dtype {info['dtype']} is not supported")
        lo, hi = info["data_offsets"]
        raw = bytearray(data[base + lo : base + hi])
        t = torch.frombuffer(raw, dtype=DTYPES[info["dtype"]]) if raw else torch.empty(0, dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]).to(torch.float32)
    return out


def config_from_hf(hf):
    """model.Config for a config.json of model_type llama, qwen2 or qwen3 (HF defaults)."""
    kind = hf["model_type"]
    if kind not in ("llama", "qwen2", "qwen3"):
        raise ValueError(f"config.json: model_type {kind!r} is not supported")
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(f"config.json: hidden_act {hf['hidden_act']!r} is not supported")
    if hf.get("mlp_bias", False):
        raise ValueError("config.json: mlp_bias true is not supported")
    attention_bias = hf.get("attention_bias", False)
    heads = hf["num_attention_heads"]
    head_dim = hf.get("head_dim") or (128 if kind == "qwen3" else hf["hidden_size"] // heads)
    return model.Config(
        family="llama",
        vocab=hf["vocab_size"],
        dim=hf["hidden_size"],
        layers=hf["num_hidden_layers"],
        heads=heads,
        kv_heads=hf.get("num_key_value_heads") or heads,
        hidden=hf["intermediate_size"],
        tie=hf.get("tie_word_embeddings", False),
        max_pos=hf["max_position_embeddings"],
        head_size=head_dim,
        qk_norm=kind == "qwen3",
        qkv_bias=kind == "qwen2" or attention_bias,
        o_bias=kind != "qwen2" and attention_bias,
        norm_eps=hf.get("rms_norm_eps", 1e-6),
        rope_theta=hf.get("rope_theta", 10000.0),
        rope_scaling=hf.get("rope_scaling"),
    )


# Hugging Face's names of a layer's tensors -> model.py's LlamaBlock attributes.
LAYER_NAMES = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "mlp_norm",
    "self_attn.q_proj": "q",
    "self_attn.k_proj": "k",
    "self_attn.v_proj": "v",
    "self_attn.o_proj": "o",
    "self_attn.q_norm": "q_norm",
    "self_attn.k_norm": "k_norm",
    "mlp.gate_proj": "gate",
    "mlp.up_proj": "up",
    "mlp.down_proj": "down",
}


def state_dict_from_hf(cfg, tensors):
    """model.py's state dict from the Hugging Face tensors; every model tensor must be present."""
    sd = {"tok.weight": tensors["model.embed_tokens.weight"], "norm.weight": tensors["model.norm.weight"]}
    if not cfg.tie:
        sd["head.weight"] = tensors["lm_head.weight"]
    for i in range(cfg.layers):
        for hf_name, name in LAYER_NAMES.items():
            for kind in ("weight", "bias"):
                key = f"model.layers.{i}.{hf_name}.{kind}"
                if key in tensors:
                    sd[f"blocks.{i}.{name}.{kind}"] = tensors[key]
    return sd


def main():
    ckpt = sys.argv[1]
    with open(os.path.join(ckpt, "config.json")) as f:
        cfg = config_from_hf(json.load(f))
    cfg.validate()
    net = model.Llama(cfg)
    net.load_state_dict(state_dict_from_hf(cfg, read_safetensors(os.path.join(ckpt, "model.safetensors"))), strict=True)
    net.eval()
    out = []
    with torch.inference_mode():
        for seq in json.load(sys.stdin):
            x = torch.tensor([seq], dtype=torch.long)
            logp = F.log_softmax(net(x)[0, :-1].float(), dim=-1)
            out.append(logp.gather(1, x[0, 1:, None])[:, 0].tolist())
    json.dump({"logprobs": out}, sys.stdout)


if __name__ == "__main__":
    main()
