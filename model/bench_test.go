package model

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hacrl/hacrl/backend"
)

// benchConfig is the engine benchmark's model: gpt d=128, 4 layers, 4 heads,
// vocabulary 32, sequences of 64 tokens in batches of 32.
var benchConfig = Config{Family: "gpt", Vocab: 32, Dim: 128, Layers: 4, Heads: 4, MaxSeq: 64, BOS: -1, EOS: -1}

const benchBatch, benchPrompt = 32, 4

// benchLlama is the same size in the llama family, with grouped-query
// attention (2 key/value heads) and a SwiGLU width of 8/3·d.
var benchLlama = Config{Family: "llama", Vocab: 32, Dim: 128, Layers: 4, Heads: 4, KVHeads: 2, Hidden: 344, MaxSeq: 64, BOS: -1, EOS: -1}

func benchModel(b *testing.B, cfg Config) *Model {
	m, err := New(backend.Must(backend.Config(backend.Default)), cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkTrainStep measures Accumulate + Apply on 32 sequences of 64 tokens.
func BenchmarkTrainStep(b *testing.B)      { benchTrainStep(b, benchConfig) }
func BenchmarkTrainStepLlama(b *testing.B) { benchTrainStep(b, benchLlama) }
func BenchmarkTrainStep256(b *testing.B)   { benchTrainStep(b, bench256()) }

// bench256 is benchConfig at width 256.
func bench256() Config {
	c := benchConfig
	c.Dim = 256
	return c
}

func benchTrainStep(b *testing.B, cfg Config) {
	ctx := context.Background()
	m := benchModel(b, cfg)
	tr, _ := NewTrainer(m, OptimizerConfig{LearningRate: 1e-3, MaxGradNorm: 1})
	rng := rand.New(rand.NewPCG(1, 1))
	var seqs []Sequence
	var w [][]float32
	for range benchBatch {
		seqs = append(seqs, Sequence{Prompt: randomTokens(rng, 1, 32), Response: randomTokens(rng, benchConfig.MaxSeq-1, 32)})
		w = append(w, slices.Repeat([]float32{-1.0 / 2016}, benchConfig.MaxSeq-1))
	}
	step := func() {
		if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
			b.Fatal(err)
		}
		if _, err := tr.Apply(ctx, 0); err != nil {
			b.Fatal(err)
		}
	}
	step() // compile
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	b.ReportMetric(float64(b.N*benchBatch*benchConfig.MaxSeq)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkSample measures generating 60 tokens after 4-token prompts for 32
// sequences with the KV cache.
func BenchmarkSample(b *testing.B)      { benchSample(b, benchConfig) }
func BenchmarkSampleLlama(b *testing.B) { benchSample(b, benchLlama) }
func BenchmarkSample256(b *testing.B)   { benchSample(b, bench256()) }

func benchSample(b *testing.B, cfg Config) {
	ctx := context.Background()
	m := benchModel(b, cfg)
	rng := rand.New(rand.NewPCG(1, 1))
	var prompts [][]int
	for range benchBatch {
		prompts = append(prompts, randomTokens(rng, benchPrompt, 32))
	}
	opt := SampleOptions{MaxNewTokens: benchConfig.MaxSeq - benchPrompt, Temperature: 1}
	if _, err := m.Generate(ctx, prompts, opt, rng); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := m.Generate(ctx, prompts, opt, rng); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchBatch*opt.MaxNewTokens)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkScore measures scoring 32 sequences of 64 tokens.
func BenchmarkScore(b *testing.B) {
	ctx := context.Background()
	m := benchModel(b, benchConfig)
	rng := rand.New(rand.NewPCG(1, 1))
	var seqs []Sequence
	for range benchBatch {
		seqs = append(seqs, Sequence{Prompt: randomTokens(rng, 1, 32), Response: randomTokens(rng, benchConfig.MaxSeq-1, 32)})
	}
	if _, err := m.Score(ctx, seqs, false); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := m.Score(ctx, seqs, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchBatch*benchConfig.MaxSeq)/b.Elapsed().Seconds(), "tokens/s")
}
