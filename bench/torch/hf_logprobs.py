"""Per-token log-probs of a Hugging Face GPT-2/Llama/Qwen2/Qwen3 checkpoint, in PyTorch.

    python3 hf_logprobs.py CHECKPOINT_DIR < sequences.json

reads CHECKPOINT_DIR/config.json and CHECKPOINT_DIR/model.safetensors, or
the shards model.safetensors.index.json names (F32, F16 or BF16 tensors
under Hugging Face's names), builds model.py's GPT or Llama from them and
prints {"logprobs": [[...], ...]}: for each input sequence x (a JSON
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


def read_checkpoint(ckpt):
    """The tensors of a checkpoint directory: model.safetensors when it exists
    (as transformers prefers it), else every shard of its index."""
    single = os.path.join(ckpt, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)
    with open(os.path.join(ckpt, "model.safetensors.index.json")) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for shard in shards:
        out.update(read_safetensors(os.path.join(ckpt, shard)))
    return out


def gpt_config_from_hf(hf):
    """model.Config for a config.json of model_type gpt2 (HF defaults)."""
    act = hf.get("activation_function", "gelu_new")
    if act not in model.ACTIVATIONS:
        raise ValueError(f"config.json: activation_function {act!r} is not supported")
    if hf.get("layer_norm_epsilon", 1e-5) != model.NORM_EPS:
        raise ValueError(f"config.json: layer_norm_epsilon {hf['layer_norm_epsilon']} is not model.py's {model.NORM_EPS}")
    d = hf.get("n_embd", 768)
    if hf.get("n_inner") not in (None, 4 * d):
        raise ValueError(f"config.json: n_inner {hf['n_inner']} is not 4·n_embd")
    for key in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"):
        if hf.get(key):
            raise ValueError(f"config.json: {key} true is not supported")
    if not hf.get("scale_attn_weights", True):
        raise ValueError("config.json: scale_attn_weights false is not supported")
    return model.Config(family="gpt", vocab=hf.get("vocab_size", 50257), dim=d, layers=hf.get("n_layer", 12),
                        heads=hf.get("n_head", 12), act=act, max_pos=hf.get("n_positions", 1024))


def gpt_state_dict_from_hf(cfg, hf, tensors):
    """model.py's GPT state dict from GPT-2's tensors: Conv1D weights are
    [in, out], torch.nn.Linear's [out, in]; the LM head is wte when tied."""
    sd = {"tok.weight": tensors["transformer.wte.weight"], "pos.weight": tensors["transformer.wpe.weight"],
          "ln_f.weight": tensors["transformer.ln_f.weight"], "ln_f.bias": tensors["transformer.ln_f.bias"],
          "head.weight": tensors["transformer.wte.weight" if hf.get("tie_word_embeddings", True) else "lm_head.weight"]}
    names = {"ln_1": "ln1", "ln_2": "ln2", "attn.c_attn": "qkv", "attn.c_proj": "proj", "mlp.c_fc": "fc", "mlp.c_proj": "out"}
    for i in range(cfg.layers):
        for hf_name, name in names.items():
            w = tensors[f"transformer.h.{i}.{hf_name}.weight"]
            sd[f"blocks.{i}.{name}.weight"] = w.t().contiguous() if w.dim() == 2 else w
            sd[f"blocks.{i}.{name}.bias"] = tensors[f"transformer.h.{i}.{hf_name}.bias"]
    return sd


def config_from_hf(hf):
    """model.Config for a config.json of model_type llama, qwen2 or qwen3 (HF defaults)."""
    kind = hf["model_type"]
    if kind not in ("llama", "qwen2", "qwen3"):
        raise ValueError(f"config.json: model_type {kind!r} is not supported")
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(f"config.json: hidden_act {hf['hidden_act']!r} is not supported")
    if hf.get("mlp_bias", False):
        raise ValueError("config.json: mlp_bias true is not supported")
    # transformers 5 writes rope_theta and rope_scaling's fields into
    # rope_parameters; older files have them at the top level.
    rope = hf.get("rope_parameters") or {}
    rope_theta = hf.get("rope_theta", rope.get("rope_theta", 10000.0))
    rope_scaling = hf.get("rope_scaling")
    if rope_scaling is None and rope.get("rope_type", "default") != "default":
        rope_scaling = {k: v for k, v in rope.items() if k != "rope_theta"}
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"config.json: partial_rotary_factor {rope['partial_rotary_factor']} is not supported")
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
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
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


def load(ckpt):
    """model.py's network with the weights of the checkpoint directory ckpt."""
    with open(os.path.join(ckpt, "config.json")) as f:
        hf = json.load(f)
    tensors = read_checkpoint(ckpt)
    if hf["model_type"] == "gpt2":
        cfg = gpt_config_from_hf(hf)
        cfg.validate()
        net, sd = model.GPT(cfg), gpt_state_dict_from_hf(cfg, hf, tensors)
    else:
        cfg = config_from_hf(hf)
        cfg.validate()
        net, sd = model.Llama(cfg), state_dict_from_hf(cfg, tensors)
    net.load_state_dict(sd, strict=True)
    return net.eval()


def checkpoint_logprobs(ckpt, seqs):
    """log p(x[t+1] | x[:t+1]) of each sequence x of token ids, in float32."""
    net = load(ckpt)
    out = []
    with torch.inference_mode():
        for seq in seqs:
            x = torch.tensor([seq], dtype=torch.long)
            logp = F.log_softmax(net(x)[0, :-1].float(), dim=-1)
            out.append(logp.gather(1, x[0, 1:, None])[:, 0].tolist())
    return out


def main():
    json.dump({"logprobs": checkpoint_logprobs(sys.argv[1], json.load(sys.stdin))}, sys.stdout)


if __name__ == "__main__":
    main()
