package main

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/model"
	"github.com/spf13/cobra"
)

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Benchmarks (see bench/compare.sh for the PyTorch comparison)"}
	cmd.AddCommand(benchEngineCmd())
	return cmd
}

// benchEngineCmd takes the same flags as bench/torch/bench.py and prints the
// same JSON fields, so both can be compared in one run.
func benchEngineCmd() *cobra.Command {
	var (
		family, act, cfgPath, backendCfg, engine                      string
		vocab, dim, layers, heads, kvHeads, hidden, seq, batch        int
		steps, warmup, sampleBatch, sampleTokens, sampleRuns, threads int
		seed                                                          int64
		tie                                                           bool
	)
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "Measure training tokens/s (forward+backward+AdamW) and KV-cache sampling tokens/s",
		Long: `Measure the engine on one architecture: training throughput (next-token
cross-entropy over B×T tokens, backward, global-norm clip, AdamW) and sampling
throughput (N sequences from a 1-token prompt, KV cache, temperature 1).
Prints one JSON line. bench/torch/bench.py takes the same flags and prints the
same fields; bench/compare.sh runs both.`,
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
			res, err := benchEngine(cmd.Context(), b, cfg, eng, seq, batch, steps, warmup, sampleBatch, sampleTokens, sampleRuns, seed)
			if err != nil {
				return err
			}
			res["threads"] = runtime.GOMAXPROCS(0)
			res["backend"] = backend.Choose(backendCfg)
			res["peak_rss_mb"] = math.Round(peakRSSMB())
			return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&family, "family", "gpt", "gpt or llama")
	f.IntVar(&vocab, "vocab", 32, "vocabulary size")
	f.IntVar(&dim, "dim", 128, "model width")
	f.IntVar(&layers, "layers", 4, "blocks")
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
	f.StringVar(&engine, "engine", "auto", "auto, native (host CPU kernels) or graph (the backend's compiled graphs)")
	f.IntVar(&threads, "threads", 2, "GOMAXPROCS")
	f.Int64Var(&seed, "seed", 0, "seed")
	f.StringVar(&cfgPath, "config", "", "a model config.json (Hugging Face field names) instead of the size flags")
	f.StringVar(&backendCfg, "backend", "", "GoMLX backend config (default go:parallelism=-1)")
	return cmd
}

// benchEngine times the training step and the sampler of a fresh model.
func benchEngine(ctx context.Context, b compute.Backend, cfg model.Config, engine model.Engine, seq, batch, steps, warmup, sampleBatch, sampleTokens, sampleRuns int, seed int64) (map[string]any, error) {
	m, err := model.New(b, cfg, seed)
	if err != nil {
		return nil, err
	}
	m.SetEngine(engine)
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
		prompts[i] = []int{rng.IntN(V)}
	}
	opt := model.SampleOptions{MaxNewTokens: sampleTokens, Temperature: 1, TopP: 1}
	if warmup > 0 {
		if _, err := m.Generate(ctx, prompts, opt, rng); err != nil {
			return nil, err
		}
	}
	t0 = time.Now()
	generated := 0
	for range sampleRuns {
		out, err := m.Generate(ctx, prompts, opt, rng)
		if err != nil {
			return nil, err
		}
		for _, s := range out {
			generated += len(s.Tokens)
		}
	}
	sampleS := time.Since(t0).Seconds()
	c := m.Config()
	return map[string]any{
		"engine": "hacrl-" + m.EngineName(), "family": c.Family, "params": m.NumParams(), "dim": c.Dim, "layers": c.Layers,
		"heads": c.Heads, "kv_heads": c.KVHeads, "hidden": c.Hidden, "vocab": c.Vocab, "seq": seq, "batch": batch,
		"train_step_ms":      round(1000*trainS/float64(steps), 3),
		"train_tokens_per_s": round(float64(batch*seq*steps)/trainS, 1),
		"final_loss":         round(loss, 6),
		"sample_batch":       sampleBatch, "sample_tokens": sampleTokens, "sample_runs": sampleRuns,
		"sample_ms":           round(1000*sampleS/float64(sampleRuns), 3),
		"sample_tokens_per_s": round(float64(generated)/sampleS, 1),
	}, nil
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
