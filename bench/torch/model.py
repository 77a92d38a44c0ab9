"""PyTorch reference of hacrl's two model families (gpt and llama).

The llama family also takes the Hugging Face variants hacrl loads (Qwen2's
q/k/v biases, Qwen3's head_dim and q/k norms, Llama 3.x's llama3 rotary
scaling); hf_logprobs.py builds one from a checkpoint directory.

The math mirrors hacrl's Go engine (package model) so that the two can be
timed against each other: same layers, same normalisation, same attention,
same training step and the same KV-cache sampling loop. Weights are
float32 on the CPU; train_step and sample take bf16=True to run their
forward passes under torch.autocast("cpu", dtype=torch.bfloat16).
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

NORM_EPS = 1e-5
ROPE_THETA = 10000.0
INIT_STD = 0.02

ACTIVATIONS = {
    "gelu": F.gelu,  # exact erf form
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


def default_hidden(dim):
    """Llama MLP width when --hidden is 0: 8/3*dim rounded up to a multiple of 16."""
    return 16 * ((8 * dim + 47) // 48)


@dataclass
class Config:
    family: str = "gpt"  # "gpt" or "llama"
    vocab: int = 32
    dim: int = 128
    layers: int = 4
    heads: int = 4
    kv_heads: int = 4  # llama only (GQA); gpt always uses heads
    hidden: int = 0  # llama MLP width; 0 means default_hidden(dim)
    act: str = "gelu"  # gpt MLP activation: "gelu" (exact erf), "gelu_new" (tanh) or "relu"
    tie: bool = False  # llama only: LM head shares the token embedding
    max_pos: int = 64  # positions the model can address
    # llama only, the Hugging Face variants (Qwen2, Qwen3, Llama 3.x):
    head_size: int = 0  # width of one head (HF head_dim); 0 means dim // heads
    qk_norm: bool = False  # Qwen3: RMSNorm over each query and key head before RoPE
    qkv_bias: bool = False  # biases on q, k and v (Qwen2; Llama's attention_bias)
    o_bias: bool = False  # bias on o (Llama's and Qwen3's attention_bias)
    norm_eps: float = NORM_EPS  # RMSNorm epsilon
    rope_theta: float = ROPE_THETA
    rope_scaling: dict = None  # None, or HF's {"rope_type": "llama3", "factor", ...}

    def validate(self):
        """Raise ValueError naming the first inconsistent field."""
        if self.family not in ("gpt", "llama"):
            raise ValueError(f"family: want gpt or llama, got {self.family!r}")
        for name in ("vocab", "dim", "layers", "heads", "kv_heads", "max_pos"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: want >= 1, got {getattr(self, name)}")
        if self.head_size == 0 and self.dim % self.heads:
            raise ValueError(f"dim: {self.dim} is not a multiple of heads={self.heads}")
        if self.family == "llama":
            if self.heads % self.kv_heads:
                raise ValueError(f"kv_heads: heads={self.heads} is not a multiple of kv_heads={self.kv_heads}")
            if self.head_dim % 2:
                raise ValueError(f"head_size: head size {self.head_dim} must be even for rotary embeddings")
            scaling = self.rope_scaling
            if scaling is not None and scaling.get("rope_type", scaling.get("type")) not in ("llama3", "default"):
                raise ValueError(f"rope_scaling: rope_type {scaling!r} is not supported")
        elif self.head_size or self.qk_norm or self.qkv_bias or self.o_bias or self.rope_scaling:
            raise ValueError("head_size, qk_norm, qkv_bias, o_bias and rope_scaling are llama options")
        if self.hidden < 0:
            raise ValueError(f"hidden: want >= 0, got {self.hidden}")
        if self.act not in ACTIVATIONS:
            raise ValueError(f"act: want one of {', '.join(ACTIVATIONS)}, got {self.act!r}")

    @property
    def head_dim(self):
        return self.head_size or self.dim // self.heads

    @property
    def cache_heads(self):
        """Number of key/value heads the KV cache stores per layer."""
        return self.kv_heads if self.family == "llama" else self.heads

    @property
    def mlp_hidden(self):
        if self.family == "gpt":
            return 4 * self.dim
        return self.hidden or default_hidden(self.dim)


def expected_params(cfg):
    """Closed-form parameter count of build(cfg), for cross-checking engines."""
    d, v, L = cfg.dim, cfg.vocab, cfg.layers
    if cfg.family == "gpt":
        block = 2 * (2 * d) + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
        return v * d + cfg.max_pos * d + L * block + 2 * d + d * v
    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    block = 2 * d + 2 * d * q + 2 * d * kv + 3 * d * cfg.mlp_hidden
    block += (q + 2 * kv if cfg.qkv_bias else 0) + (d if cfg.o_bias else 0) + (2 * cfg.head_dim if cfg.qk_norm else 0)
    return v * d + L * block + d + (0 if cfg.tie else d * v)


class KVCache:
    """Preallocated keys and values, one [N, kv_heads, Tmax, head_dim] pair per layer."""

    def __init__(self, cfg, n, tmax):
        shape = (n, cfg.cache_heads, tmax, cfg.head_dim)
        self.k = [torch.zeros(shape) for _ in range(cfg.layers)]
        self.v = [torch.zeros(shape) for _ in range(cfg.layers)]

    def update(self, layer, pos, k, v):
        """Write k, v ([N, kv_heads, t, head_dim]) at pos and return the valid prefix."""
        t = k.shape[2]
        self.k[layer][:, :, pos : pos + t] = k
        self.v[layer][:, :, pos : pos + t] = v
        return self.k[layer][:, :, : pos + t], self.v[layer][:, :, : pos + t]


def causal_bias(t, pos):
    """Additive mask [t, pos+t] for queries at pos..pos+t-1: 0 where visible, -inf after."""
    return torch.full((t, pos + t), float("-inf")).triu(diagonal=pos + 1)


def attend(q, k, v, bias):
    """Scaled dot-product attention with grouped keys/values.

    q is [B, H, T, dh]; k, v are [B, KVH, S, dh] with H a multiple of KVH.
    Query head h reads key/value head h // (H/KVH), as HF's repeat_kv does.
    bias is None or an additive [T, S] mask. Returns [B, H, T, dh].
    """
    b, h, t, dh = q.shape
    kvh = k.shape[1]
    rep = h // kvh
    q = q * (1.0 / math.sqrt(dh))
    if rep > 1:
        q = q.reshape(b, kvh, rep * t, dh)
        if bias is not None:
            bias = bias.repeat(rep, 1)
    scores = q @ k.transpose(-1, -2)
    if bias is not None:
        scores = scores + bias
    out = scores.softmax(dim=-1) @ v
    return out.view(b, h, t, dh) if rep > 1 else out


def split_heads(x, n):
    b, t, _ = x.shape
    return x.view(b, t, n, -1).transpose(1, 2)


def merge_heads(x):
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


class GPTBlock(nn.Module):
    def __init__(self, cfg, index):
        super().__init__()
        d = cfg.dim
        self.index = index
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(d, eps=NORM_EPS)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d, eps=NORM_EPS)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.act = ACTIVATIONS[cfg.act]

    def forward(self, x, bias, cache, pos):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (split_heads(z, self.heads) for z in (q, k, v))
        if cache is not None:
            k, v = cache.update(self.index, pos, k, v)
        x = x + self.proj(merge_heads(attend(q, k, v, bias)))
        return x + self.out(self.act(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Pre-LN GPT: learned positions, fused qkv with bias, 4x MLP, untied LM head."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.dim)
        self.pos = nn.Embedding(cfg.max_pos, cfg.dim)
        self.blocks = nn.ModuleList(GPTBlock(cfg, i) for i in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.dim, eps=NORM_EPS)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)

    def forward(self, tokens, cache=None, pos=0):
        """Logits [B, T, V] for tokens [B, T] placed at positions pos..pos+T-1."""
        t = tokens.shape[1]
        x = self.tok(tokens) + self.pos.weight[pos : pos + t]
        bias = causal_bias(t, pos) if t > 1 else None
        for block in self.blocks:
            x = block(x, bias, cache, pos)
        return self.head(self.ln_f(x))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=NORM_EPS):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def llama3_inv_freq(inv_freq, scaling):
    """Llama 3.1's rescaled frequencies (HF rope_type "llama3"), in float32.

    With wavelength w = 2*pi/f and L the original context: w < L/high_freq_factor
    keeps f, w > L/low_freq_factor gives f/factor, and in between
    s = (L/w - low)/(high - low) gives (1-s)*f/factor + s*f.
    """
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    wave = 2 * math.pi / inv_freq
    long_wave = wave > old / low
    short_wave = wave < old / high
    s = (old / wave - low) / (high - low)
    between = (1 - s) * inv_freq / factor + s * inv_freq
    return torch.where(short_wave, inv_freq, torch.where(long_wave, inv_freq / factor, between))


def rope_tables(max_pos, head_dim, theta=ROPE_THETA, scaling=None):
    """cos and sin tables [max_pos, head_dim] in HF's concatenated-halves layout."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    if scaling is not None and scaling.get("rope_type", scaling.get("type")) == "llama3":
        inv_freq = llama3_inv_freq(inv_freq, scaling)
    freqs = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


class LlamaBlock(nn.Module):
    def __init__(self, cfg, index):
        super().__init__()
        d, q, kv = cfg.dim, cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        self.index = index
        self.heads, self.kv_heads = cfg.heads, cfg.kv_heads
        self.attn_norm = RMSNorm(d, cfg.norm_eps)
        self.q = nn.Linear(d, q, bias=cfg.qkv_bias)
        self.k = nn.Linear(d, kv, bias=cfg.qkv_bias)
        self.v = nn.Linear(d, kv, bias=cfg.qkv_bias)
        self.o = nn.Linear(q, d, bias=cfg.o_bias)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(cfg.head_dim, cfg.norm_eps) if cfg.qk_norm else None
        self.mlp_norm = RMSNorm(d, cfg.norm_eps)
        self.gate = nn.Linear(d, cfg.mlp_hidden, bias=False)
        self.up = nn.Linear(d, cfg.mlp_hidden, bias=False)
        self.down = nn.Linear(cfg.mlp_hidden, d, bias=False)

    def forward(self, x, bias, cos, sin, cache, pos):
        h = self.attn_norm(x)
        q = split_heads(self.q(h), self.heads)
        k = split_heads(self.k(h), self.kv_heads)
        v = split_heads(self.v(h), self.kv_heads)
        if self.q_norm is not None:  # per head, before the rotation
            q, k = self.q_norm(q), self.k_norm(k)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:
            k, v = cache.update(self.index, pos, k, v)
        x = x + self.o(merge_heads(attend(q, k, v, bias)))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    """Pre-RMSNorm Llama: RoPE on q and k, GQA, SwiGLU MLP, optional tied LM head."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = nn.ModuleList(LlamaBlock(cfg, i) for i in range(cfg.layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.head = None if cfg.tie else nn.Linear(cfg.dim, cfg.vocab, bias=False)
        cos, sin = rope_tables(cfg.max_pos, cfg.head_dim, cfg.rope_theta, cfg.rope_scaling)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens, cache=None, pos=0):
        """Logits [B, T, V] for tokens [B, T] placed at positions pos..pos+T-1."""
        t = tokens.shape[1]
        x = self.tok(tokens)
        cos, sin = self.cos[pos : pos + t], self.sin[pos : pos + t]
        bias = causal_bias(t, pos) if t > 1 else None
        for block in self.blocks:
            x = block(x, bias, cos, sin, cache, pos)
        x = self.norm(x)
        return F.linear(x, self.tok.weight) if self.head is None else self.head(x)


# Output projections of the residual branches get GPT-2's scaled init.
RESIDUAL_PROJECTIONS = ("proj", "out", "o", "down")


def build(cfg, seed):
    """A freshly initialised model for cfg, deterministic by seed.

    Matrices and embeddings are normal(0, 0.02), residual output projections
    normal(0, 0.02/sqrt(2*layers)), biases 0 and norm gains 1, as in the Go engine.
    """
    cfg.validate()
    torch.manual_seed(seed)
    model = GPT(cfg) if cfg.family == "gpt" else Llama(cfg)
    resid_std = INIT_STD / math.sqrt(2 * cfg.layers)
    for name, m in model.named_modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            residual = name.rsplit(".", 1)[-1] in RESIDUAL_PROJECTIONS
            nn.init.normal_(m.weight, std=resid_std if residual else INIT_STD)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)
    return model


# LoRA (Hu et al., 2021) as PEFT's LoraConfig applies it, written out here
# because the reference runs without peft. The Hugging Face name of each
# Linear of a block (hacrl's --lora-targets name the modules so) and the
# blocks' prefix, per family.
HF_MODULES = {
    "llama": {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
              "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"},
    "gpt": {"qkv": "attn.c_attn", "proj": "attn.c_proj", "fc": "mlp.c_fc", "out": "mlp.c_proj"},
}
HF_BLOCKS = {"llama": "model.layers", "gpt": "transformer.h"}
ALL_LINEAR = "all-linear"


class LoRALinear(nn.Module):
    """A frozen Linear plus PEFT's low-rank update: y = base(x) + (alpha/rank)·(x·Aᵀ)·Bᵀ.

    A [rank, in] starts uniform on ±1/√in (PEFT's kaiming_uniform_ with a = √5),
    B [out, rank] at zero, so that the adapted layer starts as its base exactly.
    """

    def __init__(self, base, rank, alpha, generator):
        super().__init__()
        self.base = base
        bound = 1 / math.sqrt(base.in_features)
        a = torch.rand(rank, base.in_features, generator=generator) * (2 * bound) - bound
        self.lora_A = nn.Parameter(a)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + self.scale * F.linear(F.linear(x, self.lora_A), self.lora_B)


def lora_targeted(path, targets):
    """Whether the module at HF path is adapted: PEFT's target_modules list match."""
    return ALL_LINEAR in targets or any(path == t or path.endswith("." + t) for t in targets)


def add_lora(model, rank, alpha, targets, seed):
    """Freeze model and wrap each targeted block Linear in a LoRALinear (not the LM head).

    targets are HF module names (q_proj, self_attn.v_proj, c_attn, …) or
    "all-linear". The A matrices are drawn in block order from a generator
    seeded with seed. Returns the HF paths of the adapted modules; raises
    ValueError when the arguments are out of range or no module matches.
    """
    if rank < 1 or not alpha > 0 or not targets:
        raise ValueError(f"LoRA rank {rank}, alpha {alpha}, targets {targets}: want rank >= 1, alpha > 0, targets")
    family = model.cfg.family
    for p in model.parameters():
        p.requires_grad_(False)
    gen = torch.Generator().manual_seed(seed)
    adapted = []
    for i, block in enumerate(model.blocks):
        for attr, name in HF_MODULES[family].items():
            path = f"{HF_BLOCKS[family]}.{i}.{name}"
            if lora_targeted(path, targets):
                setattr(block, attr, LoRALinear(getattr(block, attr), rank, alpha, gen))
                adapted.append(path)
    if not adapted:
        names = ", ".join(n.rsplit(".", 1)[-1] for n in HF_MODULES[family].values())
        raise ValueError(f"LoRA target modules {targets} match no linear layer of this {family} model (its blocks have {names})")
    return adapted


def expected_lora_params(cfg, rank, targets):
    """Closed form of add_lora's trainable parameters: rank·(in+out) per adapted module."""
    d, h = cfg.dim, cfg.mlp_hidden
    if cfg.family == "gpt":
        shapes = {"attn.c_attn": (d, 3 * d), "attn.c_proj": (d, d), "mlp.c_fc": (d, h), "mlp.c_proj": (h, d)}
    else:
        q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        shapes = {"self_attn.q_proj": (d, q), "self_attn.k_proj": (d, kv), "self_attn.v_proj": (d, kv),
                  "self_attn.o_proj": (q, d), "mlp.gate_proj": (d, h), "mlp.up_proj": (d, h), "mlp.down_proj": (h, d)}
    per_block = sum(rank * (i + o) for name, (i, o) in shapes.items() if lora_targeted("x." + name, targets))
    return cfg.layers * per_block


def base_params(model):
    """Parameters of the model without its LoRA adapters (hacrl's params)."""
    return sum(p.numel() for name, p in model.named_parameters() if ".lora_" not in name)


def trainable(model):
    """The parameters the optimizer updates: all, or the adapters after add_lora."""
    return [p for p in model.parameters() if p.requires_grad]


def next_token_loss(model, tokens):
    """Mean cross-entropy of predicting tokens[:, 1:] from tokens[:, :-1], in float32
    (bfloat16 logits under autocast are widened first, as transformers' loss does)."""
    logits = model(tokens).float()
    v = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, v), tokens[:, 1:].reshape(-1))


def new_optimizer(model):
    """AdamW(lr 1e-3, betas 0.9/0.999, eps 1e-8) over the trainable parameters, decaying matrices and embeddings by 0.01.

    Biases and norm gains (the 1-D parameters) are not decayed, as in the Go
    engine; after add_lora the trainable parameters are the A and B matrices.
    """
    decay = [p for p in trainable(model) if p.dim() >= 2]
    rest = [p for p in trainable(model) if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.999), eps=1e-8)


def train_step(model, opt, tokens, bf16=False):
    """Forward, backward, global grad-norm clip 1.0, AdamW step, zero_grad. Returns the loss tensor.

    With bf16 the forward pass runs under torch.autocast(cpu, bfloat16): products in
    bfloat16, the float32 weights, gradients and AdamW state as they are (mixed precision).
    The backward pass runs outside it, in the dtypes autocast chose, as PyTorch advises.
    """
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = next_token_loss(model, tokens)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainable(model), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


@torch.inference_mode()
def sample(model, prompt, new_tokens, generator, record_logits=False, bf16=False):
    """Sample new_tokens tokens after prompt [N, P] with a KV cache, temperature 1.

    With bf16 each forward pass runs under torch.autocast(cpu, bfloat16) and the
    softmax in float32.

    One forward per generated token: the prompt is prefilled once and every
    sampled token except the last is fed back at its position. Returns the
    tokens [N, new_tokens] and, if record_logits, the logits [N, new_tokens, V]
    each token was drawn from.
    """
    n, p = prompt.shape
    cache = KVCache(model.cfg, n, p + new_tokens)
    out = torch.empty(n, new_tokens, dtype=torch.long)
    logits_seen = [] if record_logits else None
    inp, pos = prompt, 0
    for i in range(new_tokens):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(inp, cache, pos)[:, -1].float()
        if record_logits:
            logits_seen.append(logits.clone())
        inp = torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)
        out[:, i] = inp[:, 0]
        pos += 1 if i else p
    return out, (torch.stack(logits_seen, dim=1) if record_logits else None)
