package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/internal/kernel"
	"github.com/hacrl/hacrl/model"
	"github.com/spf13/cobra"
)

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Benchmarks (see bench/compare.sh for the PyTorch comparison)"}
	cmd.AddCommand(benchEngineCmd(), benchServeCmd(), benchCPUCmd())
	return cmd
}

// benchEngineCmd takes the same flags as bench/torch/bench.py and prints the
// same JSON fields, so both can be compared in one run.
func benchEngineCmd() *cobra.Command {
	var (
		family, act, cfgPath, backendCfg, engine, cpuProfile          string
		computeDType                                                  computeDTypeFlag
		vocab, dim, layers, heads, kvHeads, hidden, seq, batch        int
		steps, warmup, sampleBatch, sampleTokens, sampleRuns, threads int
		samplePrompt, memReadMB, loraRank                             int
		weightsDType                                                  string
		loraAlpha                                                     float64
		loraTargets                                                   string
		seed                                                          int64
		tie                                                           bool
	)
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "Measure training tokens/s (forward+backward+AdamW) and KV-cache sampling tokens/s",
		Long: `Measure the engine on one architecture: training throughput (next-token
cross-entropy over B×T tokens, backward, global-norm clip, AdamW) and sampling
throughput (N sequences from a --sample-prompt-token prompt, KV cache,
temperature 1). With --config the model is a Hugging Face config.json's
(bench/configs has Qwen2.5-0.5B, Qwen3-0.6B, Qwen3-1.7B and
Llama-3.2-1B); --layers then overrides only its depth. Besides the speeds
it reports the peak resident memory, the float32 weight bytes a decoding
step reads and the rate it read them at, and this machine's memory read
bandwidth measured in the same process. With --lora-rank N the model gets LoRA adapters (PEFT's init: A
uniform on ±1/√in, B zero, scale alpha/rank) on --lora-targets before the
trainer is made, so that training updates the adapters only (AdamW over
them); lora_rank, lora_alpha, lora_targets and trainable_params are
reported beside params (the base model's). --weights-dtype bfloat16 holds
the weights the products read in bfloat16 (rounded to nearest even, widened
in the products): with --lora-rank, the frozen base (training and sampling;
model.SetFrozenDType), else a copy the sampler reads, made again after each
update (model.SetSampleDType, made before the timed runs: sample_copy_ms), so
that decode_weight_gb_per_s counts 2 bytes per such weight
(decode_weight_bytes) and batch-1 decoding can be set against
mem_read_gb_per_s.
Prints one JSON line.
bench/torch/bench.py takes the same flags and prints the same fields;
bench/compare.sh runs both.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if threads > 0 {
				runtime.GOMAXPROCS(threads)
			}
			var cfg model.Config
			if cfgPath != "" {
				c, err := model.ReadConfig(cfgPath)
				if err != nil {
					return err
				}
				cfg = c
				if cmd.Flags().Changed("layers") {
					if layers < 1 {
						return usage("--layers %d: want ≥ 1", layers)
					}
					cfg.Layers = layers // the depth only: width, heads and vocabulary stay the config's
				}
				seq = min(seq, cfg.MaxSeq)
			} else {
				if family == "llama" && hidden == 0 {
					hidden = config.LlamaHidden(dim)
				}
				a := act
				if family == "llama" {
					a = "silu"
				}
				cfg = model.Config{Family: family, Vocab: vocab, Dim: dim, Layers: layers, Heads: heads, KVHeads: kvHeads,
					Hidden: hidden, MaxSeq: seq, Activation: a, TieEmbeddings: tie, BOS: -1, EOS: -1}
				if family == "llama" {
					cfg.NormEps = 1e-5
				}
			}
			if sampleBatch == 0 {
				sampleBatch = batch
			}
			if sampleTokens == 0 {
				sampleTokens = seq - 1
			}
			b, err := backend.New(backend.Choose(backendCfg))
			if err != nil {
				return err
			}
			eng, err := model.ParseEngine(engine)
			if err != nil {
				return usage("--engine: %v", err)
			}
			if sampleRuns < 1 {
				return usage("--sample-runs %d: want ≥ 1", sampleRuns)
			}
			if cfgPath == "" {
				// As on the PyTorch side: positions for the training
				// sequences and for the longest sampled one.
				cfg.MaxSeq = max(seq, samplePrompt+sampleTokens)
			}
			if samplePrompt < 1 || samplePrompt+sampleTokens > cfg.MaxSeq {
				return usage("--sample-prompt %d: want ≥ 1 and, with %d new tokens, at most the model's %d positions", samplePrompt, sampleTokens, cfg.MaxSeq)
			}
			if memReadMB < 0 {
				return usage("--mem-read-mb %d: want ≥ 0 (0: skip)", memReadMB)
			}
			lora, err := benchLoRA(loraRank, loraAlpha, loraTargets, cmd.Flags().Changed("lora-alpha"))
			if err != nil {
				return err
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			dt, err := computeDType.dtype()
			if err != nil {
				return err
			}
			if weightsDType != model.WeightsFloat32 && weightsDType != model.WeightsBFloat16 {
				return usage("--weights-dtype %q: want float32 or bfloat16", weightsDType)
			}
			res, err := benchEngine(cmd.Context(), b, cfg, eng, dt, weightsDType, lora, seq, batch, steps, warmup, sampleBatch, samplePrompt, sampleTokens, sampleRuns, seed)
			if err != nil {
				return err
			}
			res["threads"] = runtime.GOMAXPROCS(0)
			res["backend"] = backend.Choose(backendCfg)
			res["compute_dtype"] = strings.ToLower(dt.String()) // "float32" or "bfloat16", whichever name was given
			// The peak before the bandwidth test's buffer is allocated.
			res["peak_rss_mb"] = math.Round(peakRSSMB())
			if memReadMB > 0 {
				res["mem_read_gb_per_s"] = round(memReadGBPerS(memReadMB<<20, runtime.GOMAXPROCS(0)), 2)
			}
			res["kernel_path"] = kernel.Path()
			if peak := bestPeak(runtime.GOMAXPROCS(0)); peak > 0 {
				res["fma_peak_gflops"] = round(peak, 1)
				if g, ok := res["train_weight_gflops"].(float64); ok {
					res["train_peak_fraction"] = round(g/peak, 3)
				}
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&family, "family", "gpt", "gpt or llama")
	f.IntVar(&vocab, "vocab", 32, "vocabulary size")
	f.IntVar(&dim, "dim", 128, "model width")
	f.IntVar(&layers, "layers", 4, "blocks (with --config: overrides the config's depth)")
	f.IntVar(&heads, "heads", 4, "attention heads")
	f.IntVar(&kvHeads, "kv-heads", 4, "llama key/value heads (GQA)")
	f.IntVar(&hidden, "hidden", 0, "MLP width; 0: 4·dim (gpt), 8/3·dim rounded up to 16 (llama)")
	f.BoolVar(&tie, "tie", false, "tie the LM head to the token embedding")
	f.IntVar(&seq, "seq", 64, "training sequence length T")
	f.IntVar(&batch, "batch", 32, "training batch B")
	f.StringVar(&act, "act", "gelu", "gpt MLP activation: gelu, gelu_new or relu")
	f.IntVar(&steps, "steps", 20, "timed training steps")
	f.IntVar(&warmup, "warmup", 3, "untimed training steps (and one untimed sampling run if > 0)")
	f.IntVar(&sampleBatch, "sample-batch", 0, "sequences sampled at once; 0: --batch")
	f.IntVar(&sampleTokens, "sample-tokens", 0, "new tokens per sequence; 0: --seq − 1")
	f.IntVar(&sampleRuns, "sample-runs", 3, "timed sampling runs")
	f.IntVar(&samplePrompt, "sample-prompt", 1, "prompt tokens per sampled sequence (prefilled in one forward pass)")
	f.IntVar(&memReadMB, "mem-read-mb", 512, "MiB summed to measure the memory read bandwidth (mem_read_gb_per_s); 0: skip")
	computeDType.register(f, "the matrix products' dtype: float32, or bfloat16 (mixed precision with float32 weights; the graph engine on the XLA backend)")
	f.StringVar(&engine, "engine", "auto", "auto, native (host CPU kernels) or graph (the backend's compiled graphs)")
	f.IntVar(&threads, "threads", 2, "GOMAXPROCS")
	f.Int64Var(&seed, "seed", 0, "seed")
	f.StringVar(&cfgPath, "config", "", "a model config.json (Hugging Face field names) instead of the size flags")
	f.StringVar(&backendCfg, "backend", "", "GoMLX backend config (default go:parallelism=-1)")
	f.IntVar(&loraRank, "lora-rank", 0, "train LoRA adapters of this rank on a frozen base; 0: full fine-tuning")
	f.Float64Var(&loraAlpha, "lora-alpha", 0, "LoRA alpha (the adapters' output is scaled by alpha/rank); default 2·rank")
	f.StringVar(&loraTargets, "lora-targets", model.AllLinear, "comma-separated modules given adapters (q_proj,v_proj,…, c_attn for gpt) or all-linear")
	f.StringVar(&weightsDType, "weights-dtype", model.WeightsFloat32, "float32, or bfloat16: the product weights held in bfloat16 (with --lora-rank the frozen base, else a copy for sampling)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole measurement to this file (go tool pprof)")
	return cmd
}

// benchEngine times the training step and the sampler of a fresh model.
// With lora (nil: full fine-tuning) the model gets adapters before the
// trainer is made, so that the trainer updates them only.
func benchEngine(ctx context.Context, b compute.Backend, cfg model.Config, engine model.Engine, computeDType dtypes.DType, weightsDType string, lora *model.LoRA, seq, batch, steps, warmup, sampleBatch, samplePrompt, sampleTokens, sampleRuns int, seed int64) (map[string]any, error) {
	m, err := model.New(b, cfg, seed)
	if err != nil {
		return nil, err
	}
	m.SetEngine(engine)
	if err := m.SetComputeDType(computeDType); err != nil {
		return nil, usage("--compute-dtype: %v", err)
	}
	if lora != nil {
		if err := m.AddLoRA(*lora, seed); err != nil {
			return nil, usage("--lora-targets %q: %v", strings.Join(lora.Targets, ","), err)
		}
	}
	if weightsDType == model.WeightsBFloat16 {
		set, flag := m.SetSampleDType, "--weights-dtype bfloat16"
		if lora != nil {
			set = m.SetFrozenDType
		}
		if err := set(weightsDType); err != nil {
			return nil, usage("%s: %v", flag, err)
		}
	}
	tr, err := model.NewTrainer(m, model.OptimizerConfig{LearningRate: 1e-3, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, MaxGradNorm: 1})
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	V := m.Config().Vocab
	// Next-token cross-entropy over all B×T tokens: the first token is the
	// prompt, the other T−1 the response, each weighted −1/N.
	seqs := make([]model.Sequence, batch)
	weights := make([][]float32, batch)
	n := batch * (seq - 1)
	for i := range seqs {
		toks := make([]int, seq)
		for j := range toks {
			toks[j] = rng.IntN(V)
		}
		seqs[i] = model.Sequence{Prompt: toks[:1], Response: toks[1:]}
		weights[i] = make([]float32, seq-1)
		for j := range weights[i] {
			weights[i][j] = -1 / float32(n)
		}
	}
	trainStep := func() (float64, error) {
		lp, err := tr.Accumulate(ctx, seqs, weights)
		if err != nil {
			return 0, err
		}
		if _, err := tr.Apply(ctx, 1e-3); err != nil {
			return 0, err
		}
		var nll float64
		for _, row := range lp {
			for _, v := range row {
				nll -= float64(v)
			}
		}
		return nll / float64(n), nil
	}
	for range warmup {
		if _, err := trainStep(); err != nil {
			return nil, err
		}
	}
	var loss float64
	t0 := time.Now()
	for range steps {
		if loss, err = trainStep(); err != nil {
			return nil, err
		}
	}
	trainS := time.Since(t0).Seconds()

	prompts := make([][]int, sampleBatch)
	for i := range prompts {
		prompts[i] = make([]int, samplePrompt)
		for j := range prompts[i] {
			prompts[i][j] = rng.IntN(V)
		}
	}
	opt := model.SampleOptions{MaxNewTokens: sampleTokens, Temperature: 1, TopP: 1}
	// With bfloat16 weights for sampling, the copy is made before the timed
	// runs (once per update in training): DecodeWeightBytes makes it.
	sampleRead, copyS := decodeWeightBytes(m.Config(), m.NumParams()), 0.0
	if weightsDType == model.WeightsBFloat16 {
		t := time.Now()
		if sampleRead, err = m.DecodeWeightBytes(); err != nil {
			return nil, err
		}
		copyS = time.Since(t).Seconds()
	}
	if warmup > 0 {
		if _, err := m.Generate(ctx, prompts, opt, rng); err != nil {
			return nil, err
		}
	}
	t0 = time.Now()
	generated, forwards := 0, 0
	for range sampleRuns {
		out, err := m.Generate(ctx, prompts, opt, rng)
		if err != nil {
			return nil, err
		}
		longest := 0
		for _, s := range out {
			generated += len(s.Tokens)
			longest = max(longest, len(s.Tokens))
		}
		forwards += longest // one forward pass (the prompt's prefill, then one per token) per new token
	}
	sampleS := time.Since(t0).Seconds()
	c := m.Config()
	read := decodeWeightBytes(c, m.NumParams())
	res := map[string]any{
		"engine": "hacrl-" + m.EngineName(), "family": c.Family, "params": m.NumParams(), "dim": c.Dim, "layers": c.Layers,
		"heads": c.Heads, "kv_heads": c.KVHeads, "hidden": c.Hidden, "vocab": c.Vocab, "seq": seq, "batch": batch,
		"train_step_ms":      round(1000*trainS/float64(steps), 3),
		"train_tokens_per_s": round(float64(batch*seq*steps)/trainS, 1),
		"final_loss":         round(loss, 6),
		"sample_batch":       sampleBatch, "sample_tokens": sampleTokens, "sample_runs": sampleRuns,
		"sample_ms":           round(1000*sampleS/float64(sampleRuns), 3),
		"sample_tokens_per_s": round(float64(generated)/sampleS, 1),
		"sample_prompt":       samplePrompt,
		"weights_mb":          round(float64(4*m.NumParams())/(1<<20), 1),
		// Each forward pass of the sampler reads every weight it uses once.
		"decode_weight_gb_per_s": round(float64(sampleRead)*float64(forwards)/sampleS/1e9, 2),
		"decode_weight_bytes":    sampleRead,
		"weights_dtype":          weightsDType,
		"sample_copy_ms":         round(1000*copyS, 1),
		"trainable_params":       m.NumTrainable(),
		"lora_rank":              0,
	}
	// The weight products' rate: per token, 2 operations per weight forward,
	// 2 for the input gradient and 2 for the weight gradient backward (a
	// frozen LoRA base gets no weight gradient). Attention's scores, the
	// norms and the adapters are left out.
	perToken := 6.0
	if lora != nil {
		perToken = 4
	}
	res["train_weight_gflops"] = round(perToken*float64(read/4)*float64(batch*seq*steps)/trainS/1e9, 2)
	if lora != nil {
		res["lora_rank"], res["lora_alpha"], res["lora_targets"] = lora.Rank, lora.Alpha, lora.Targets
	}
	if steps == 0 {
		// Sampling only (bench/llamacpp): no training was timed, and a
		// rate over zero seconds is no number JSON can carry.
		for _, k := range []string{"train_step_ms", "train_tokens_per_s", "final_loss", "train_weight_gflops"} {
			delete(res, k)
		}
	}
	return res, nil
}

// benchLoRA is the adapters of the --lora-* flags, nil for rank 0 (full
// fine-tuning), or a usage error. alphaSet says whether --lora-alpha was
// given (its default is 2·rank).
func benchLoRA(rank int, alpha float64, targets string, alphaSet bool) (*model.LoRA, error) {
	switch {
	case rank < 0:
		return nil, usage("--lora-rank %d: want ≥ 0 (0: full fine-tuning)", rank)
	case rank == 0 && alphaSet:
		return nil, usage("--lora-alpha needs --lora-rank > 0")
	case rank == 0:
		return nil, nil
	}
	if !alphaSet {
		alpha = float64(2 * rank)
	}
	l := &model.LoRA{Rank: rank, Alpha: alpha}
	for t := range strings.SplitSeq(targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			l.Targets = append(l.Targets, t)
		}
	}
	if err := l.Validate(); err != nil {
		return nil, usage("--lora-rank %d --lora-alpha %v --lora-targets %q: %v", rank, alpha, targets, err)
	}
	return l, nil
}

// decodeWeightBytes is the float32 weight bytes one decoding step reads: all
// numParams parameters but the tables it only gathers rows of (the token
// embedding unless the LM head is tied to it, gpt's learned positions).
func decodeWeightBytes(c model.Config, numParams int64) int64 {
	n := numParams
	if !c.TieEmbeddings {
		n -= int64(c.Vocab) * int64(c.Dim)
	}
	if c.Family == "gpt" {
		n -= int64(c.MaxSeq) * int64(c.Dim)
	}
	return 4 * n
}

// memReadGBPerS is this machine's memory read bandwidth in GB/s (10⁹ bytes
// per second): the best of three passes of `workers` goroutines summing
// disjoint parts of a freshly written buffer of the given bytes, read as
// 64-bit words with four independent sums so that the loop is bound by
// memory, not by the additions.
func memReadGBPerS(bytes, workers int) float64 {
	buf := make([]uint64, bytes/8)
	for i := range buf { // written, so that every page is really backed
		buf[i] = uint64(i)
	}
	workers = max(1, workers)
	sums := make([]uint64, workers)
	best := 0.0
	for range 3 {
		var wg sync.WaitGroup
		t0 := time.Now()
		for w := range workers {
			part := buf[w*len(buf)/workers : (w+1)*len(buf)/workers]
			wg.Go(func() { sums[w] = sumWords(part) })
		}
		wg.Wait()
		best = max(best, float64(len(buf)*8)/time.Since(t0).Seconds()/1e9)
	}
	runtime.KeepAlive(sums)
	return best
}

// sumWords adds the words of x, four independent sums at a time.
func sumWords(x []uint64) uint64 {
	var s0, s1, s2, s3 uint64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i]
		s1 += x[i+1]
		s2 += x[i+2]
		s3 += x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i]
	}
	return s0 + s1 + s2 + s3
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// startCPUProfile starts a CPU profile written to path; stop ends it and
// closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
