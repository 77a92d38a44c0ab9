// Package model is hacrl's policy engine: decoder-only transformers that
// sample, score, learn and save, on two engines behind one API (see
// "Engines"). It knows nothing of reinforcement learning; the training loop
// hands it per-token weights.
//
//   - New / Load / Save / Clone: a Model is a Config plus float32 parameters
//     named as in Hugging Face checkpoints (see "Checkpoints"). Load refuses a NaN or infinite
//     weight (and LoadState a NaN or infinite optimizer moment), naming the
//     file, the tensor and the element.
//   - Generate: batched sampling with a key/value cache; host-side
//     temperature, top-k, top-p or greedy choice with a seeded *rand.Rand.
//     Temperature 0 means greedy (the limit of T → 0), on both engines.
//     A draw works on the row's float32 logits with the vector code of
//     internal/kernel (maximum, exponentials, ids near the best logit) and
//     sorts only those candidates: a draw from a 152K vocabulary takes
//     about 0.1 ms greedy or at T=1 (0.2 ms top-k, 0.5 ms top-p on a flat
//     row), where a float64 pass and a wide sort took 4–60 ms.
//     SampleOptions.Vocab gives a padded vocabulary its meaning: a model
//     whose embedding has more rows than its tokenizer has tokens (Qwen2.5
//     and Qwen3: 151936 rows for about 151665 tokens) never samples the
//     extra ids; their rows stay in the softmax, so log-probs are those of
//     the whole vocabulary, as Score computes them.
//   - Score: per-token log-probs (and entropies) of prompt+response sequences.
//   - Trainer: Accumulate adds ∇θ Σ w·log p over micro-batches; Apply takes an
//     AdamW step with global-norm clipping; SaveState/LoadState resume it.
//     AccumulateEntropy adds ∇θ (Σ w·log p + Σ e·H), H = −Σ_v p_v log p_v
//     the entropy of the next-token distribution at each response position,
//     for an entropy bonus (verl's entropy_coeff c: e = −c times the loss's
//     aggregation weights). The gradient at the logits z is
//     w·(onehot − p) − e·p ⊙ (log p + H), written out on both engines (on
//     the graphs, autodiff of H's formula with p held constant would give
//     zero); with e = 0 it is Accumulate's, bit for bit on the native
//     engine, and with e = nil it is Accumulate, with no extra pass or
//     allocation. Tests hold it to finite differences, to PyTorch's
//     autograd through transformers and PEFT (testdata/entropy_grad.py),
//     and the engines to each other.
//
// # Architectures
//
// Both families are pre-norm decoders over token ids x₀…x_{T−1} with
// positions p_t (0 at a sequence's first real token), d = Dim, H = Heads,
// Dh = HeadDim() (HeadSize, or d/H), and causal attention
// softmax(q·kᵀ/√Dh + mask)·v per head.
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
// llama (Llama 2/3.x, Qwen2/2.5 and Qwen3; model_type "llama", "qwen2" or
// "qwen3"):
//
//	h = model.embed_tokens.weight[x]
//	for each layer N (prefix model.layers.N.):
//	    a = RMSNorm(h; input_layernorm)                     RMSNorm(x) = x/√(mean(x²)+eps)·w
//	    q = a·q_projᵀ, k = a·k_projᵀ, v = a·v_projᵀ         weights [out,in]: q_proj [H·Dh,d], k_proj and v_proj [KVHeads·Dh,d]
//	    qwen3: q, k = RMSNorm(q; self_attn.q_norm), RMSNorm(k; self_attn.k_norm)   per head, gains [Dh]
//	    q, k = RoPE(q), RoPE(k)
//	    h = h + Attention(q,k,v)·o_projᵀ                   o_proj [d,H·Dh]; query head i reads key/value head i/(H/KVHeads)
//	    a = RMSNorm(h; post_attention_layernorm)
//	    h = h + (silu(a·gate_projᵀ) ⊙ (a·up_projᵀ))·down_projᵀ
//	logits = RMSNorm(h; model.norm)·Wᵀ,  W = lm_head.weight, or model.embed_tokens.weight if tied
//
// RoPE is Hugging Face's "rotate_half" form: with inv_freq_i =
// θ^(−2i/Dh) for i < Dh/2 (θ = rope_theta) and angles a = p·inv_freq
// (computed in float32) repeated for both halves, RoPE(x) = x·cos a + (−x₂,
// x₁)·sin a, where x₁, x₂ are the halves of each head. rope_scaling of
// rope_type "llama3" (Llama 3.1/3.2) rescales inv_freq first (see
// RopeScaling). AttentionBias adds biases to q, k and v (Qwen2 always) and
// also to o_proj (the attention_bias of Llama and Qwen3).
//
// config.json is read with Hugging Face's meaning and defaults (head_dim
// absent: d/H, or 128 for qwen3; tie_word_embeddings absent: untied;
// rope_theta 10000; rms_norm_eps 1e-6); rope_scaling (null, "default" or
// "llama3", also in transformers 5's rope_parameters), head_dim and
// attention_bias are honoured. A value that would change the computation
// in a way hacrl does not implement is refused with the file and the
// field: another rope_type, a partial_rotary_factor other than 1,
// sliding-window attention reaching a layer (use_sliding_window true),
// hidden_act other than silu, mlp_bias true, a non-zero
// attention_dropout, another model_type. Fields that do not change the
// computation (architectures, torch_dtype, transformers_version,
// pretraining_tp, …) are ignored. A tensor whose shape disagrees with the
// config (a wrong head_dim, say) is refused naming the tensor, both shapes
// and the config fields the expected one comes from.
//
// # Initialization
//
// New draws matrices and embeddings from normal(0, 0.02), the residual output
// projections (c_proj, o_proj, down_proj) from normal(0, 0.02/√(2·Layers)),
// sets biases to 0 and norm gains (q_norm and k_norm included) to 1, from a PCG generator seeded by the
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
// A checkpoint directory is laid out as Hugging Face publishes models, so
// that transformers' from_pretrained and vLLM load what Save writes:
//
//   - config.json: Hugging Face field names; torch_dtype (or dtype, as newer
//     transformers write it) is Config.DType, the weights' dtype.
//   - model.safetensors, or shards model-00001-of-0000K.safetensors, … with
//     model.safetensors.index.json ({"metadata": {"total_size": bytes},
//     "weight_map": {tensor: shard}}), which Save writes for a single file
//     too (vLLM loads every *.safetensors file of a directory that has no
//     index, and optimizer.safetensors may sit beside); Load takes the
//     single file when it exists, as transformers does. Tensors have Hugging Face names and
//     shapes (torch.nn.Linear weights [out,in]), each file's metadata is
//     {"format": "pt"}, and a tied LM head is not stored.
//   - generation_config.json, when the checkpoint has one: its end tokens
//     (eos_token_id, one id or a list) and sampling suggestions
//     (GenerationConfig, LoadGenerationConfig); Save writes it back.
//   - optimizer.safetensors, for resuming: "exp_avg.<name>",
//     "exp_avg_sq.<name>" (float32, one file) and the step count in the
//     metadata.
//   - tokenizer.json, written by package tokenizer, may sit beside them.
//
// Load accepts F32, BF16, F16 and F64 tensors and converts them to float32
// (BF16 and F16 exactly) while it reads them, one tensor at a time straight
// into the parameters, so the load's peak memory stays near the float32
// parameters' size (BenchmarkLoadPeakMemory: 545 MB at peak for 533 MB of
// parameters from a 270 MB BF16 checkpoint). Save writes the weights in
// Config.DType — a BF16 checkpoint is saved as BF16, rounded to nearest,
// ties to even, as PyTorch's .to(torch.bfloat16) does, so BF16 → float32 →
// BF16 gives the same bytes — and SaveWith chooses another dtype or shard
// size (5 GB by default, transformers' max_shard_size). Each file is written
// atomically; Load reports the file and the tensor or field at fault.
//
// # Engines
//
// Model.SetEngine chooses how Generate, Score, Trainer.Accumulate and
// Trainer.Apply run:
//
//   - native (native.go, native_train.go): the forward and backward passes
//     written out over the host parameters with the kernels of
//     internal/kernel (AVX2 products on an assembly micro-kernel,
//     attention, norms, activations and their gradients, AdamW). Batches are
//     not padded: all sequences' tokens form one [N,d] matrix and attention
//     runs per sequence and head; decoding keeps a KV cache per row and
//     drops rows as they stop. The default on the Go (CPU) backend.
//   - graph: GoMLX graphs compiled by the backend, with the lengths bucketed
//     and padded (see "Shapes and buckets"). The path for GPUs (the XLA
//     backend), for float64 models (the finite-difference gradient checks),
//     and the reference the native engine is tested against: the tests hold
//     the two to the same sampled tokens, log-probs (1e-4), gradients (1e-4
//     relative) and weights after training steps.
//
// # Mixed precision
//
// SetComputeDType(dtypes.BFloat16) runs the graphs' matrix products in
// bfloat16 with float32 master weights, the split of PyTorch's autocast and
// verl's FSDP mixed precision: every product — the linear layers, LoRA's,
// q·kᵀ and P·v, the LM head, and the products of their gradients — casts
// its operands to bfloat16 and its result (rounded to bfloat16; the backend
// accumulates in float32) back to float32; a bias is added after, in
// float32 (autocast's addmm adds it in bfloat16). The parameters, the gradient
// accumulator, the AdamW moments and update, the embeddings, norms, rotary
// tables, softmax, log-probs, entropies and the loss stay float32: the
// products are where bfloat16 saves time and memory traffic, while sums of
// many terms and exponentials lose too much in 8 significant bits, and the
// optimizer's small updates would vanish against bfloat16 weights. On
// xla:cpu bf16 log-probs are within 4e-4 to 8e-4 of float32's on the tiny
// test models (scoring, training and decoding), gradients within 0.3%
// (0.7% for LoRA adapters), and three AdamW steps gain what float32's do
// within 0.4% (bf16_xla_test.go). The native engine computes in float32
// only, so a bf16 model runs on the graphs, with EngineAuto too; GoMLX's Go
// backend computes some bfloat16 products wrongly (TestGoBackendBF16Products),
// so bf16 is refused there: it is for the XLA backend, GPUs first.
//
// Where the backend offers fused attention (GoMLX's
// FusedScaledDotProductAttention: cuDNN's flash attention on XLA's CUDA
// plugin, forward and backward) and it computes what the decomposed
// attention does — a bf16 pass without a KV cache whose mask is causal
// (scoring and training, rows right-padded), heads a multiple of 8 wide —
// the graphs use it; decoding and left-padded prefills keep the decomposed
// attention. HACRL_FUSED_ATTENTION=0 turns it off. No CPU backend offers it:
// its numerics are checked only by a GPU run (scripts/device-check.sh).
//
// # LoRA
//
// AddLoRA gives a float32 model low-rank adapters (lora.go): each targeted
// linear layer y = x·Wᵀ computes y + scale·(x·Aᵀ)·Bᵀ, with PEFT's modules,
// tensor names and initialization (B = 0, so a fresh adapter leaves the
// model its base, bit for bit). Both engines run and train an adapted
// model and are held to the same tolerances as without adapters. The
// native engine adds each product's adapters in two products over the
// product's input (native_lora.go); the graphs take the adapters as inputs
// after the base parameters, A as [in,r] and B as [r,out], differentiate
// with respect to them only, and keep their Execs apart from those of the
// model without adapters (net_lora.go). The base is frozen: a Trainer
// accumulates, clips and updates the adapters only, and its gradient
// accumulator and moments are the adapters' size. The adapters move
// between host and tensors with the base parameters, one copy at a time.
//
// SaveAdapters and LoadAdapters (adapter_files.go) write and read PEFT's
// adapter directories. PEFT's PeftModel.from_pretrained scores hacrl's
// adapters, and hacrl PEFT's, within 1e-4 in float32 (a few 1e-7 on tiny
// models, a few 1e-6 on full-vocabulary stand-ins), and hacrl merge equals
// PEFT's merge_and_unload within a few float32 roundings (peft_test.go,
// cmd/hacrl/peft_test.go). LoadAdapters honours target_modules and
// exclude_modules (names or a regular expression), layers_to_transform,
// layers_pattern and use_rslora, and refuses what plain LoRA on the
// blocks' linear layers cannot compute (DoRA, bias training,
// modules_to_save, LM head or embedding adapters, per-module ranks, PEFT's
// other variants, initializations that rewrite the base) by the file and
// the field.
//
// # Memory
//
// A float32 model holds one copy of its parameters (host.go): on the host,
// one flat buffer in the checkpoint layout (torch.nn.Linear weights
// [out,in]) with llama's q, k, v and gate, up projections adjacent, so that
// each group is one matrix for the products and the decoder is a set of
// views over it; or, once a graph runs, as backend tensors — the first pass
// of either engine moves them, never copies. Load and New write straight
// into the flat buffer. (A small model, at most 32 MB of weights, also keeps
// them packed for the products, rebuilt after each update: its decoding is
// bound by per-product overheads that a second copy of a few megabytes
// removes.) The native engine adds what training needs and no
// more: a gradient accumulator and the two AdamW moments of the same
// layout (Apply updates the parameters in place, holding the model's lock
// against running passes), so full fine-tuning holds 16 bytes per parameter
// plus activations. The activations of a training pass are bounded
// (passActivationBytes, 1 GiB: the pass takes as many whole sequences as
// fit; norm outputs and the MLP activation are recomputed in the backward
// pass rather than kept); a scoring pass keeps one layer's at a time; the
// LM head computes logits, log-probs, entropies and, in training, the
// gradient dlogits = w·(onehot − softmax) (− e·p ⊙ (log p + H) with an
// entropy term) a chunk of rows at a time
// (headChunkFloats), so no [tokens × vocabulary] matrix exists; a decoding
// prefill runs at most passTokenBudget prompt tokens at once, and the KV
// cache holds SampleOptions.MaxBatch rows (by default as many as fit 2 GiB,
// at least 16) of the slots the longest prompt and the new tokens need, and
// is freed when Generate returns: a Batch decodes that many sequences at
// once and starts the next prompt in the row of each that ends (continuous
// batching), and since every row samples from its own random stream
// (RowSeeds, SeedStream) and a native row's logits never depend on its
// neighbours, the rows per batch change memory and speed, never tokens (the passes' other buffers are kept between
// calls, in arenas, until Model.Trim drops them; Trainer.Release drops the
// gradient accumulator between steps). Several models in one process —
// HACPO's agents take turns — so need the working memory of the one at
// work, not the sum: the train package trims and releases an agent whose
// turn has ended and returns the memory to the system at once. The
// hacrl command also bounds the garbage collector's headroom (package
// internal/gcpace).
//
// Two per-model options hold weights in bfloat16 where that does not change
// what is trained (the native engine; the products widen the bfloat16 bits
// exactly as they read them, kernel.MatMulBTBF16). SetFrozenDType("bfloat16")
// keeps a LoRA model's frozen base matrix weights (every layer's
// projections and an untied LM head) as bfloat16 only, rounded once to
// nearest even: half their bytes, and the model computes bit for bit what
// a float32 model whose base was rounded first computes (embeddings, norms,
// biases, the adapters and their optimizer state stay float32).
// SetSampleDType("bfloat16") makes Generate read a bfloat16 copy of every
// product weight, made again after each update (2 more bytes a weight),
// while Score and training keep the float32 weights.
//
// # Speed
//
// On this project's 2-core CPU the native engine trains 1.4–2.5× as fast as
// PyTorch with OpenBLAS and samples 2.3–3.9× as fast on small models, and
// 1.8–1.9× and 2.0–2.1× at the Qwen2.5-0.5B and Qwen3-0.6B shapes in less
// memory (README, `bash bench/compare.sh [--real]`); the graph engine on the Go backend reaches about a
// quarter of PyTorch (`hacrl bench engine --engine graph`). Decoding a
// small model splits a batch's rows between the cores for a whole step;
// a large one (over 32 MB of weights) splits each product's columns, so
// every weight is read from memory once per step. Products with the
// weights in file layout (x·Wᵀ) transpose each block of W into cache-sized
// panels as they go (kernel.MatMulBT). Most of a native training step is
// matrix products at about 160–185 GFLOP/s (`go test ./internal/kernel
// -bench TrainingShapes`): tall products copy each 256-deep block of
// weight panels (and, for xᵀ·y, strips of x) into contiguous memory so
// power-of-two strides do not collide in cache sets, and the micro-kernel
// keeps a 6×16 output tile in registers. Every element still gets the same multiply-adds
// in the same order on every path, so results do not depend on core counts.
// Weight gradients are accumulated by xᵀ·y without transposing x; exact GELU
// keeps Φ from the forward pass for its derivative.
//
// On the graph engine, GoMLX's Go backend (compute v0.1.3) runs Exp and
// Logistic ≈60× slower after a small matrix product (an AVX/SSE transition
// penalty), so attention's softmax, the log-sum-exp of the log-probs and
// SiLU use its fused softmax with hand-written gradients; matrix products
// are laid out for its fast path (keys kept transposed, Llama's weights held
// [in,out], the KV cache written by adding an outer product); and attention
// and exact GELU have hand-written backward passes, checked against finite
// differences.
//
// # Concurrency
//
// Score and Generate may run concurrently with each other; a Trainer is used
// from one goroutine, and Apply changes the parameters between passes: it
// waits for the passes running (a Generate call is one pass) and the next
// ones wait for it. A goroutine must not call Apply from inside a pass of
// the same model (an rng callback, say).
package model
