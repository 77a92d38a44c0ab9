// Package model is hacrl's policy engine: decoder-only transformers on GoMLX
// that sample, score, learn and save. It knows nothing of reinforcement
// learning; the training loop hands it per-token weights.
//
//   - New / Load / Save / Clone: a Model is a Config plus float32 parameters
//     named as in Hugging Face checkpoints.
//   - Generate: batched sampling with a key/value cache; host-side
//     temperature, top-k, top-p or greedy choice with a seeded *rand.Rand.
//   - Score: per-token log-probs (and entropies) of prompt+response sequences.
//   - Trainer: Accumulate adds ∇θ Σ w·log p over micro-batches; Apply takes an
//     AdamW step with global-norm clipping; SaveState/LoadState resume it.
//
// # Architectures
//
// Both families are pre-norm decoders over token ids x₀…x_{T−1} with
// positions p_t (0 at a sequence's first real token), d = Dim, H = Heads,
// Dh = d/H, and causal attention softmax(q·kᵀ/√Dh + mask)·v per head.
//
// gpt (GPT-2; config.json model_type "gpt2"):
//
//	h = wte[x] + wpe[p]
//	for each layer N:
//	    a = LayerNorm(h; h.N.ln_1)                          LayerNorm(x) = (x−μ)/√(σ²+eps)·w + b
//	    q|k|v = a·h.N.attn.c_attn.weight + bias             weight [d,3d], columns q | k | v, heads contiguous
//	    h = h + Attention(q,k,v)·h.N.attn.c_proj.weight + bias
//	    a = LayerNorm(h; h.N.ln_2)
//	    h = h + act(a·h.N.mlp.c_fc.weight + b)·h.N.mlp.c_proj.weight + b      weights [in,out] (Conv1D)
//	logits = LayerNorm(h; ln_f)·Wᵀ,  W = lm_head.weight [V,d], or wte.weight if tied
//
// act is "gelu" (exact, x·Φ(x)), "gelu_new" (tanh approximation) or "relu";
// the MLP width n_inner defaults to 4d; every linear layer has a bias.
//
// llama (Llama and Qwen2; model_type "llama" or "qwen2"):
//
//	h = model.embed_tokens.weight[x]
//	for each layer N (prefix model.layers.N.):
//	    a = RMSNorm(h; input_layernorm)                     RMSNorm(x) = x/√(mean(x²)+eps)·w
//	    q = RoPE(a·q_projᵀ), k = RoPE(a·k_projᵀ), v = a·v_projᵀ     weights [out,in]; q has H heads, k and v KVHeads
//	    h = h + Attention(q,k,v)·o_projᵀ                   query head i reads key/value head i/(H/KVHeads)
//	    a = RMSNorm(h; post_attention_layernorm)
//	    h = h + (silu(a·gate_projᵀ) ⊙ (a·up_projᵀ))·down_projᵀ
//	logits = RMSNorm(h; model.norm)·Wᵀ,  W = lm_head.weight, or model.embed_tokens.weight if tied
//
// RoPE is Hugging Face's default ("rotate_half"): with inv_freq_i =
// θ^(−2i/Dh) for i < Dh/2 and angles a = p·inv_freq (computed in float32)
// repeated for both halves, RoPE(x) = x·cos a + (−x₂, x₁)·sin a, where x₁, x₂
// are the halves of each head. AttentionBias adds biases to q, k and v
// (Qwen2) and also to o_proj (Llama's attention_bias).
//
// # Initialization
//
// New draws matrices and embeddings from normal(0, 0.02), the residual output
// projections (c_proj, o_proj, down_proj) from normal(0, 0.02/√(2·Layers)),
// sets biases to 0 and norm gains to 1, from a PCG generator seeded by the
// seed, in a fixed parameter order: same config and seed, same weights.
//
// # Shapes and buckets
//
// GoMLX compiles one graph per input shape, so lengths are padded to buckets
// (8, 16, 24, 32, 48, 64, 96, …) and batch rows to powers of two, and large
// requests are split into passes of at most 8192 tokens (see bucket.go).
// Scoring and training right-pad sequences; generation left-pads prompts and
// gives each row its own positions, masking the padding out of attention.
//
// # Checkpoints
//
// A checkpoint directory holds config.json (Hugging Face field names),
// model.safetensors (float32, Hugging Face tensor names) and, for resuming,
// optimizer.safetensors ("exp_avg.<name>", "exp_avg_sq.<name>" and the step
// count in the metadata). tokenizer.json, written by package tokenizer, may
// sit beside them. Each file is written atomically; Load reports the file and
// the tensor or field at fault.
//
// # Speed
//
// On GoMLX's Go backend (compute v0.1.3, GOEXPERIMENT=simd) the element-wise
// Exp and Logistic ops run about 60× slower (≈1.6 µs instead of ≈20 ns per
// element) when they follow a "small" matrix product (< 4M multiply-adds),
// apparently a SIMD/scalar state-transition penalty left by that kernel. The
// engine therefore avoids those ops where it can: attention softmax, the
// log-sum-exp of the log-probs and SiLU use the fused softmax forward and a
// hand-written backward pass. Matrix products are laid out for the backend's
// fast path (one batch axis, rhs contracted on its first non-batch axis):
// Llama's nn.Linear weights are held transposed in memory ([in,out];
// checkpoints keep [out,in]), attention keys are kept transposed
// ([B,KVH,Dh,S]), and the KV cache is written by adding an outer product
// (slot one-hot ⊗ new key), not a broadcast select.
//
// Two backward passes are written out by hand for speed, each checked against
// finite differences in the tests: attention (autodiff would contract two of
// its four gradient products on the backend's dot-product-per-element small
// kernel; by hand all four are broadcast-kernel products, 1.4× faster steps)
// and exact GELU (its derivative Φ + x·φ takes Φ from the forward value
// instead of a second scalar float64 Erf). What remains of a step is mostly
// the large matrix kernel and the backend's single-threaded generic
// transposes (heads-first layouts and the transposes it inserts before
// weight-gradient products).
//
// # Concurrency
//
// Score and Generate may run concurrently with each other; a Trainer is used
// from one goroutine, and Apply installs new parameters atomically between
// passes.
package model
