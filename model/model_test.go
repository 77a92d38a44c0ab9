package model

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/safetensors"
)

func testBackend(t testing.TB) compute.Backend {
	t.Helper()
	b, err := backend.New(backend.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tinyConfigs covers both families, grouped-query attention, Qwen2-style q/k/v
// biases, Llama-style o_proj bias, every gpt activation, tied and untied
// heads, and Qwen3 and Llama 3.x: heads wider than Dim/Heads, query/key
// norms, and llama3 rotary scaling whose small original context moves all
// but the highest frequency (wavelengths 6.3 kept, 87 interpolated, 1197
// and up divided by the factor).
var tinyConfigs = map[string]Config{
	"qwen3-gqa": {Family: "llama", ModelType: "qwen3", Vocab: 16, Dim: 16, Layers: 2, Heads: 4, KVHeads: 2, HeadSize: 6,
		Hidden: 24, MaxSeq: 40, RopeTheta: 1e6, TieEmbeddings: true, QKNorm: true, BOS: -1, EOS: 3},
	"llama3-rope": {Family: "llama", Vocab: 16, Dim: 16, Layers: 2, Heads: 2, KVHeads: 1, HeadSize: 10, Hidden: 24,
		MaxSeq: 40, RopeTheta: 5e5, NormEps: 1e-5, BOS: 0, EOS: -1,
		RopeScaling: &RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 16, OriginalMaxPos: 128}},
	"gpt-gelu":   {Family: "gpt", Vocab: 16, Dim: 16, Layers: 2, Heads: 2, MaxSeq: 40, BOS: -1, EOS: -1},
	"gpt-tanh":   {Family: "gpt", Vocab: 16, Dim: 16, Layers: 1, Heads: 4, Activation: "gelu_new", MaxSeq: 40, TieEmbeddings: true, BOS: -1, EOS: 15},
	"gpt-relu":   {Family: "gpt", Vocab: 16, Dim: 32, Layers: 1, Heads: 2, Hidden: 48, Activation: "relu", MaxSeq: 40, BOS: 0, EOS: -1},
	"llama-gqa":  {Family: "llama", Vocab: 16, Dim: 16, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 24, MaxSeq: 40, BOS: -1, EOS: -1},
	"qwen2-tied": {Family: "llama", ModelType: "qwen2", Vocab: 16, Dim: 16, Layers: 1, Heads: 2, KVHeads: 1, Hidden: 32, MaxSeq: 40, TieEmbeddings: true, AttentionBias: true, RopeTheta: 1e6, BOS: 1, EOS: 2},
	"llama-bias": {Family: "llama", Vocab: 16, Dim: 16, Layers: 1, Heads: 2, Hidden: 24, MaxSeq: 40, AttentionBias: true, BOS: -1, EOS: -1},
}

func newTiny(t testing.TB, name string, seed int64) *Model {
	t.Helper()
	return newTinyOn(t, testBackend(t), name, seed)
}

// newTinyOn is newTiny on backend b.
func newTinyOn(t testing.TB, b compute.Backend, name string, seed int64) *Model {
	t.Helper()
	m, err := New(b, tinyConfigs[name], seed)
	if err != nil {
		t.Fatal(err)
	}
	// Fresh weights have zero biases and unit gains; perturb them so that the
	// tests exercise every parameter.
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	for i, s := range m.specs {
		if s.std == 0 {
			v := m.paramValues(i)
			for j := range v {
				v[j] += 0.1 * rng.NormFloat64()
			}
			m.setParamValues(i, v)
		}
	}
	return m
}

func randomTokens(rng *rand.Rand, n, vocab int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = rng.IntN(vocab)
	}
	return out
}

func TestConfigValidate(t *testing.T) {
	good := tinyConfigs["llama-gqa"]
	tests := []struct {
		field  string
		mutate func(*Config)
	}{
		{"Family", func(c *Config) { c.Family = "rnn" }},
		{"Vocab", func(c *Config) { c.Vocab = 0 }},
		{"Heads", func(c *Config) { c.Heads = 3 }},
		{"KVHeads", func(c *Config) { c.KVHeads = 3 }},
		{"MaxSeq", func(c *Config) { c.MaxSeq = -1 }},
		{"Activation", func(c *Config) { c.Activation = "gelu" }},
		{"ModelType", func(c *Config) { c.ModelType = "gpt2" }},
		{"EOS", func(c *Config) { c.EOS = 16 }},
		{"BOS", func(c *Config) { c.BOS = -2 }},
		{"NormEps", func(c *Config) { c.NormEps = -1 }},
		{"QKNorm", func(c *Config) { c.QKNorm = true }},
		{"HeadSize", func(c *Config) { c.HeadSize = 5 }},
		{"HeadSize", func(c *Config) { c.HeadSize = -2 }},
		{"RopeScaling.Type", func(c *Config) { c.RopeScaling = &RopeScaling{Type: "yarn"} }},
		{"RopeScaling.HighFreqFactor", func(c *Config) {
			c.RopeScaling = &RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 4, HighFreqFactor: 4, OriginalMaxPos: 64}
		}},
		{"RopeScaling.OriginalMaxPos", func(c *Config) {
			c.RopeScaling = &RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4}
		}},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tt := range tests {
		c := good
		tt.mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "field "+tt.field) {
			t.Errorf("mutating %s: error %v, want one naming the field", tt.field, err)
		}
	}
	for _, name := range []string{"qwen3-gqa", "llama3-rope"} {
		if err := tinyConfigs[name].Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	gpt := tinyConfigs["gpt-gelu"]
	gpt.KVHeads = 1
	if err := gpt.Validate(); err == nil || !strings.Contains(err.Error(), "KVHeads") {
		t.Errorf("gpt with grouped-query attention: %v", err)
	}
}

func TestConfigJSONRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for name, cfg := range tinyConfigs {
		path := filepath.Join(dir, name+".json")
		if err := cfg.WriteJSON(path); err != nil {
			t.Fatal(err)
		}
		got, err := ReadConfig(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, cfg.Normalized()) {
			t.Errorf("%s: read back %+v, want %+v", name, got, cfg.Normalized())
		}
	}
}

// The config.json of a real Qwen2 model (Qwen2.5-0.5B-Instruct's fields).
const qwenConfig = `{
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936}`

func TestReadHFConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), ConfigFile)
	if err := os.WriteFile(path, []byte(qwenConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Family: "llama", ModelType: "qwen2", Vocab: 151936, Dim: 896, Layers: 24, Heads: 14, KVHeads: 2,
		Hidden: 4864, MaxSeq: 32768, Activation: "silu", NormEps: 1e-6, RopeTheta: 1e6, TieEmbeddings: true,
		AttentionBias: true, BOS: 151643, EOS: 151645, DType: "bfloat16"}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// Qwen2.5-0.5B has 494,032,768 parameters (counted without allocating them).
	if n := blankModel(testBackend(t), got, dtypes.Float32).NumParams(); n != 494032768 {
		t.Errorf("NumParams = %d, want 494032768", n)
	}
}

func TestSamplerMatchesScorer(t *testing.T) {
	ctx := context.Background()
	opts := []SampleOptions{
		{MaxNewTokens: 12, Temperature: 1},
		{MaxNewTokens: 9, Temperature: 0.7, TopK: 5, Stop: []int{3}},
		{MaxNewTokens: 30, Temperature: 1.3, TopP: 0.8},
		{MaxNewTokens: 7, Greedy: true},
	}
	for name := range tinyConfigs {
		for _, engine := range []Engine{EngineNative, EngineGraph} {
			m := newTiny(t, name, 3)
			m.SetEngine(engine)
			rng := rand.New(rand.NewPCG(5, 6))
			for _, opt := range opts {
				prompts := [][]int{randomTokens(rng, 1, 16), randomTokens(rng, 6, 16), randomTokens(rng, 13, 16)}
				samples, err := m.Generate(ctx, prompts, opt, rng)
				if err != nil {
					t.Fatal(err)
				}
				seqs := make([]Sequence, len(prompts))
				for i, s := range samples {
					if len(s.Tokens) != len(s.LogProbs) || len(s.Tokens) == 0 || len(s.Tokens) > opt.MaxNewTokens {
						t.Fatalf("%s: sample %d has %d tokens and %d log-probs", name, i, len(s.Tokens), len(s.LogProbs))
					}
					stopAt := slices.IndexFunc(s.Tokens, func(t int) bool { return slices.Contains(opt.Stop, t) })
					if s.Stopped != (stopAt == len(s.Tokens)-1) || (stopAt >= 0 && stopAt != len(s.Tokens)-1) {
						t.Errorf("%s: sample %d Stopped=%v with tokens %v", name, i, s.Stopped, s.Tokens)
					}
					if !s.Stopped && len(s.Tokens) != min(opt.MaxNewTokens, m.cfg.MaxSeq-len(prompts[i])) {
						t.Errorf("%s: sample %d ended after %d tokens without a stop token", name, i, len(s.Tokens))
					}
					seqs[i] = Sequence{Prompt: prompts[i], Response: s.Tokens}
				}
				scores, err := m.Score(ctx, seqs, false)
				if err != nil {
					t.Fatal(err)
				}
				for i, s := range samples {
					for j := range s.LogProbs {
						if d := math.Abs(float64(s.LogProbs[j] - scores.LogProbs[i][j])); d > 1e-4 {
							t.Errorf("%s %+v: sample %d token %d: sampler log-prob %v, scorer %v", name, opt, i, j, s.LogProbs[j], scores.LogProbs[i][j])
						}
					}
				}
			}
		}
	}
}

// The native decoder and the backend's decoding graphs sample the same
// tokens with the same log-probs from the same generator state, with ragged
// prompts, rows stopping at different steps and rows reaching MaxSeq.
func TestEnginesAgree(t *testing.T) {
	for name := range tinyConfigs {
		checkEnginesAgree(t, newTiny(t, name, 13), name, 1e-4)
	}
}

// checkEnginesAgree is TestEnginesAgree's check of tiny model name m (made
// with seed 13), with log-probs within tol.
func checkEnginesAgree(t *testing.T, m *Model, name string, tol float64) {
	t.Helper()
	ctx := context.Background()
	cfg := tinyConfigs[name]
	prompts := [][]int{{1}, {2, 3, 4, 5, 6, 7, 8}, {9, 10, 11}, randomTokens(rand.New(rand.NewPCG(1, 1)), cfg.MaxSeq-3, 16), {12, 13}}
	opt := SampleOptions{MaxNewTokens: 20, Temperature: 0.9, Stop: []int{5}}
	var got [2][]Sample
	for i, e := range []Engine{EngineNative, EngineGraph} {
		m.SetEngine(e)
		s, err := m.Generate(ctx, prompts, opt, rand.New(rand.NewPCG(4, 2)))
		if err != nil {
			t.Fatal(err)
		}
		got[i] = s
	}
	lengths := map[int]bool{}
	for r := range prompts {
		n, g := got[0][r], got[1][r]
		lengths[len(n.Tokens)] = true
		if !slices.Equal(n.Tokens, g.Tokens) || n.Stopped != g.Stopped {
			t.Fatalf("%s row %d: native %v (stopped %v), graph %v (stopped %v)", name, r, n.Tokens, n.Stopped, g.Tokens, g.Stopped)
		}
		for j := range n.LogProbs {
			if d := math.Abs(float64(n.LogProbs[j] - g.LogProbs[j])); d > tol {
				t.Errorf("%s row %d token %d: native log-prob %v, graph %v", name, r, j, n.LogProbs[j], g.LogProbs[j])
			}
		}
	}
	if len(lengths) < 2 {
		t.Errorf("%s: every row generated the same number of tokens; the test wants rows ending at different steps", name)
	}
}

// The engine choice: the native decoder for float32 models on the Go
// backend, the graphs for float64 models even when asked for native.
func TestEngineChoice(t *testing.T) {
	m := newTiny(t, "gpt-relu", 1)
	for _, tc := range []struct {
		e    Engine
		want bool
	}{{EngineAuto, true}, {EngineNative, true}, {EngineGraph, false}} {
		if m.SetEngine(tc.e); m.native() != tc.want {
			t.Errorf("float32 on the Go backend, engine %q: native = %v", tc.e, !tc.want)
		}
	}
	m64, err := newModel(testBackend(t), tinyConfigs["gpt-relu"], 1, dtypes.Float64)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Engine{EngineAuto, EngineNative} {
		if m64.SetEngine(e); m64.native() {
			t.Errorf("a float64 model runs on the native decoder with engine %q", e)
		}
	}
	if _, err := m64.Generate(context.Background(), [][]int{{1, 2}}, SampleOptions{MaxNewTokens: 3, Greedy: true}, nil); err != nil {
		t.Fatal(err)
	}
}

// Greedy decoding must pick, at every step, the token that Score rates most
// likely after the same prefix.
func TestGreedyIsArgmax(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"gpt-gelu", "llama-gqa"} {
		m := newTiny(t, name, 11)
		prompt := []int{4, 9, 1}
		s, err := m.Generate(ctx, [][]int{prompt, {2}}, SampleOptions{MaxNewTokens: 6, Greedy: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j, tok := range s[0].Tokens {
			var seqs []Sequence
			for c := range m.cfg.Vocab {
				seqs = append(seqs, Sequence{Prompt: prompt, Response: append(slices.Clone(s[0].Tokens[:j]), c)})
			}
			sc, err := m.Score(ctx, seqs, false)
			if err != nil {
				t.Fatal(err)
			}
			best := 0
			for c := range seqs {
				if sc.LogProbs[c][j] > sc.LogProbs[best][j] {
					best = c
				}
			}
			if best != tok {
				t.Errorf("%s step %d: greedy took %d, Score's argmax is %d", name, j, tok, best)
			}
		}
	}
}

// Temperature 0 is greedy decoding on both engines, whatever the top-k and
// top-p settings: the same tokens and log-probs as Greedy, with or without
// a generator (none is needed).
func TestTemperatureZeroIsGreedy(t *testing.T) {
	ctx := context.Background()
	prompts := [][]int{{4, 9, 1}, {2}, {7, 7, 3, 12, 5}}
	for _, name := range []string{"gpt-gelu", "llama-gqa", "qwen2-tied"} {
		for _, engine := range []Engine{EngineNative, EngineGraph} {
			m := newTiny(t, name, 11)
			m.SetEngine(engine)
			want, err := m.Generate(ctx, prompts, SampleOptions{MaxNewTokens: 8, Greedy: true, Stop: []int{3}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				opt SampleOptions
				rng *rand.Rand
			}{
				{SampleOptions{MaxNewTokens: 8, Stop: []int{3}}, nil},
				{SampleOptions{MaxNewTokens: 8, Stop: []int{3}}, rand.New(rand.NewPCG(1, 2))},
				{SampleOptions{MaxNewTokens: 8, Stop: []int{3}, TopK: 3, TopP: 0.5}, rand.New(rand.NewPCG(3, 4))},
			} {
				got, err := m.Generate(ctx, prompts, tc.opt, tc.rng)
				if err != nil {
					t.Fatalf("%s/%s %+v: %v", name, engine, tc.opt, err)
				}
				for i := range want {
					if !slices.Equal(got[i].Tokens, want[i].Tokens) || !slices.Equal(got[i].LogProbs, want[i].LogProbs) || got[i].Stopped != want[i].Stopped {
						t.Errorf("%s/%s %+v row %d: temperature 0 gave %v, greedy %v", name, engine, tc.opt, i, got[i].Tokens, want[i].Tokens)
					}
				}
			}
			// Sampling at temperature 1 from the same model does differ
			// somewhere: the check above can fail.
			s, err := m.Generate(ctx, slices.Repeat(prompts, 4), SampleOptions{MaxNewTokens: 8, Temperature: 1, Stop: []int{3}}, rand.New(rand.NewPCG(5, 6)))
			if err != nil {
				t.Fatal(err)
			}
			differs := false
			for i, x := range s {
				differs = differs || !slices.Equal(x.Tokens, want[i%len(prompts)].Tokens)
			}
			if !differs {
				t.Errorf("%s/%s: 12 samples at temperature 1 all equal the greedy decoding", name, engine)
			}
		}
	}
}

// With SampleOptions.Vocab below the model's vocabulary (a padded
// embedding), ids at or above it are never sampled on either engine, at any
// temperature and greedily, while the log-probs stay the full vocabulary's
// (as Score computes them).
func TestPaddedVocabNeverSampled(t *testing.T) {
	ctx := context.Background()
	const vocab = 9 // ids 9…15 of the tiny models' 16 are padding
	for _, name := range []string{"gpt-gelu", "llama-gqa"} {
		for _, engine := range []Engine{EngineNative, EngineGraph} {
			m := newTiny(t, name, 21)
			m.SetEngine(engine)
			rng := rand.New(rand.NewPCG(8, 9))
			prompts := make([][]int, 12)
			for i := range prompts {
				prompts[i] = randomTokens(rng, 1+i%4, vocab)
			}
			padded := 0
			for _, opt := range []SampleOptions{
				{MaxNewTokens: 10, Temperature: 4},
				{MaxNewTokens: 10, Temperature: 1, TopK: 12},
				{MaxNewTokens: 10, Temperature: 2, TopP: 0.99},
				{MaxNewTokens: 10},
			} {
				for _, v := range []int{0, vocab} {
					opt.Vocab = v
					s, err := m.Generate(ctx, prompts, opt, rand.New(rand.NewPCG(uint64(v), 3)))
					if err != nil {
						t.Fatal(err)
					}
					seqs := make([]Sequence, len(s))
					for i, x := range s {
						for _, tok := range x.Tokens {
							if tok >= vocab {
								if v == vocab {
									t.Fatalf("%s/%s %+v: sampled padding id %d", name, engine, opt, tok)
								}
								padded++
							}
						}
						seqs[i] = Sequence{Prompt: prompts[i], Response: x.Tokens}
					}
					sc, err := m.Score(ctx, seqs, false)
					if err != nil {
						t.Fatal(err)
					}
					for i, x := range s {
						for j := range x.LogProbs {
							if d := math.Abs(float64(x.LogProbs[j] - sc.LogProbs[i][j])); d > 1e-4 {
								t.Errorf("%s/%s %+v: sample %d token %d: log-prob %v, Score %v", name, engine, opt, i, j, x.LogProbs[j], sc.LogProbs[i][j])
							}
						}
					}
				}
			}
			if padded == 0 {
				t.Errorf("%s/%s: without the limit no id ≥ %d was sampled either; the test proves nothing", name, engine, vocab)
			}
		}
	}
	m := newTiny(t, "gpt-gelu", 1)
	if _, err := m.Generate(ctx, [][]int{{1}}, SampleOptions{MaxNewTokens: 1, Vocab: 17}, nil); err == nil || !strings.Contains(err.Error(), "Vocab is 17") {
		t.Errorf("Vocab beyond the model's: %v", err)
	}
}

func TestScoreEntropy(t *testing.T) {
	ctx := context.Background()
	m := newTiny(t, "qwen2-tied", 2)
	prompt := []int{5, 6}
	var seqs []Sequence
	for c := range m.cfg.Vocab {
		seqs = append(seqs, Sequence{Prompt: prompt, Response: []int{c}})
	}
	sc, err := m.Score(ctx, seqs, true)
	if err != nil {
		t.Fatal(err)
	}
	var mass, ent float64
	for c := range seqs {
		p := math.Exp(float64(sc.LogProbs[c][0]))
		mass += p
		ent -= p * float64(sc.LogProbs[c][0])
	}
	if math.Abs(mass-1) > 1e-5 {
		t.Errorf("probabilities sum to %v", mass)
	}
	if got := float64(sc.Entropy[0][0]); math.Abs(got-ent) > 1e-5 {
		t.Errorf("entropy %v, want −Σp·log p = %v", got, ent)
	}
}

// A grouped-query model equals the multi-head model whose key/value heads are
// the grouped heads repeated (Hugging Face's repeat_kv).
func TestGroupedQueryAttention(t *testing.T) {
	ctx := context.Background()
	gqa := newTiny(t, "llama-gqa", 4)
	cfg := gqa.cfg
	cfg.KVHeads = cfg.Heads
	mha, err := New(testBackend(t), cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	group, dh := cfg.Heads/gqa.cfg.KVHeads, cfg.HeadDim()
	src := map[string][]float64{}
	for i, s := range gqa.specs {
		src[s.name] = gqa.paramValues(i)
	}
	for i, s := range mha.specs {
		v := src[s.name]
		if strings.HasSuffix(s.name, "k_proj.weight") || strings.HasSuffix(s.name, "v_proj.weight") {
			// Held as [in, KVH·Dh]; query head h reads key/value head h/group.
			kvCols := gqa.cfg.KVHeads * dh
			v = nil
			for r := range cfg.Dim {
				for h := range cfg.Heads {
					kv := h / group
					v = append(v, src[s.name][r*kvCols+kv*dh:r*kvCols+(kv+1)*dh]...)
				}
			}
		}
		mha.setParamValues(i, v)
	}
	seqs := []Sequence{{Prompt: []int{1, 2, 3}, Response: []int{4, 5, 6, 7}}, {Prompt: []int{9}, Response: []int{8, 8}}}
	a, err := gqa.Score(ctx, seqs, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := mha.Score(ctx, seqs, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range seqs {
		for j := range a.LogProbs[i] {
			if d := math.Abs(float64(a.LogProbs[i][j] - b.LogProbs[i][j])); d > 1e-5 {
				t.Errorf("seq %d token %d: GQA %v, repeated-KV MHA %v", i, j, a.LogProbs[i][j], b.LogProbs[i][j])
			}
		}
	}
}

// A tied head has no lm_head tensor and equals an untied head holding a copy
// of the embedding matrix.
func TestTiedEmbeddings(t *testing.T) {
	ctx := context.Background()
	tied := newTiny(t, "gpt-tanh", 8)
	cfg := tied.cfg
	cfg.TieEmbeddings = false
	untied, err := New(testBackend(t), cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := untied.NumParams() - tied.NumParams(); d != int64(cfg.Vocab*cfg.Dim) {
		t.Errorf("untied model has %d more parameters, want %d", d, cfg.Vocab*cfg.Dim)
	}
	for i, s := range untied.specs {
		name := s.name
		if name == "lm_head.weight" {
			name = "wte.weight"
		}
		j := slices.IndexFunc(tied.specs, func(p paramSpec) bool { return p.name == name })
		untied.setParamValues(i, tied.paramValues(j))
	}
	seqs := []Sequence{{Prompt: []int{3, 1}, Response: []int{4, 1, 5, 9}}}
	a, _ := tied.Score(ctx, seqs, false)
	b, _ := untied.Score(ctx, seqs, false)
	if !slices.Equal(a.LogProbs[0], b.LogProbs[0]) {
		t.Errorf("tied %v, untied copy %v", a.LogProbs[0], b.LogProbs[0])
	}
	dir := t.TempDir()
	if err := tied.Save(dir); err != nil {
		t.Fatal(err)
	}
	ts, _, err := safetensors.Read(filepath.Join(dir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ts["lm_head.weight"]; ok {
		t.Error("tied model saved an lm_head.weight tensor")
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 1))
	seqs := []Sequence{{Prompt: []int{1, 2}, Response: []int{3, 4, 5}}, {Prompt: []int{7, 7, 7, 7}, Response: []int{0}}}
	weights := [][]float32{{-0.2, 0.1, -0.3}, {0.5}}
	for name := range tinyConfigs {
		m := newTiny(t, name, 21)
		tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 1e-2, WeightDecay: 0.1, MaxGradNorm: 1})
		if err != nil {
			t.Fatal(err)
		}
		step := func(tr *Trainer) {
			t.Helper()
			if _, err := tr.Accumulate(ctx, seqs, weights); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Apply(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
		step(tr)
		step(tr)
		dir := t.TempDir()
		if err := m.Save(dir); err != nil {
			t.Fatal(err)
		}
		if err := tr.SaveState(dir); err != nil {
			t.Fatal(err)
		}
		loaded, err := Load(testBackend(t), dir)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(loaded.Config(), m.Config()) {
			t.Errorf("%s: loaded config %+v, want %+v", name, loaded.Config(), m.Config())
		}
		probe := []Sequence{{Prompt: randomTokens(rng, 5, 16), Response: randomTokens(rng, 9, 16)}}
		a, _ := m.Score(ctx, probe, true)
		b, _ := loaded.Score(ctx, probe, true)
		if !slices.Equal(a.LogProbs[0], b.LogProbs[0]) || !slices.Equal(a.Entropy[0], b.Entropy[0]) {
			t.Errorf("%s: reloaded model scores differ:\n%v\n%v", name, a.LogProbs[0], b.LogProbs[0])
		}
		// The resumed trainer takes exactly the step the original takes.
		tr2, err := NewTrainer(loaded, OptimizerConfig{LearningRate: 1e-2, WeightDecay: 0.1, MaxGradNorm: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr2.LoadState(dir); err != nil {
			t.Fatal(err)
		}
		if tr2.Step() != 2 {
			t.Errorf("%s: resumed at step %d, want 2", name, tr2.Step())
		}
		step(tr)
		step(tr2)
		a, _ = m.Score(ctx, probe, false)
		b, _ = loaded.Score(ctx, probe, false)
		if !slices.Equal(a.LogProbs[0], b.LogProbs[0]) {
			t.Errorf("%s: resumed training diverged:\n%v\n%v", name, a.LogProbs[0], b.LogProbs[0])
		}
	}
}

func TestCorruptCheckpoint(t *testing.T) {
	m := newTiny(t, "llama-gqa", 1)
	good := t.TempDir()
	if err := m.Save(good); err != nil {
		t.Fatal(err)
	}
	weights := filepath.Join(good, WeightsFile)
	raw, err := os.ReadFile(weights)
	if err != nil {
		t.Fatal(err)
	}
	tensorsOf := func() map[string]safetensors.Tensor {
		ts, _, err := safetensors.Read(weights)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	const victim = "model.layers.1.self_attn.k_proj.weight"
	tests := []struct {
		name   string
		break_ func(dir string) error
		want   []string
	}{
		{"truncated weights", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, WeightsFile), raw[:len(raw)-10], 0o644)
		}, []string{WeightsFile}},
		{"missing tensor", func(dir string) error {
			ts := tensorsOf()
			delete(ts, victim)
			return safetensors.Write(filepath.Join(dir, WeightsFile), ts, nil)
		}, []string{WeightsFile, victim, "missing"}},
		{"wrong shape", func(dir string) error {
			ts := tensorsOf()
			x := ts[victim]
			x.Shape = []int{x.Shape[1], x.Shape[0]}
			ts[victim] = x
			return safetensors.Write(filepath.Join(dir, WeightsFile), ts, nil)
		}, []string{WeightsFile, victim, "shape"}},
		{"wrong dtype", func(dir string) error {
			ts := tensorsOf()
			x := ts[victim]
			x.DType = "I32"
			ts[victim] = x
			return safetensors.Write(filepath.Join(dir, WeightsFile), ts, nil)
		}, []string{WeightsFile, victim, "I32"}},
		{"NaN weight", func(dir string) error {
			ts := tensorsOf()
			ts[victim] = withElement(t, ts[victim], 5, float32(math.NaN()))
			return safetensors.Write(filepath.Join(dir, WeightsFile), ts, nil)
		}, []string{WeightsFile, victim, "element 5 is NaN"}},
		{"infinite weight", func(dir string) error {
			ts := tensorsOf()
			ts[victim] = withElement(t, ts[victim], 0, float32(math.Inf(-1)))
			return safetensors.Write(filepath.Join(dir, WeightsFile), ts, nil)
		}, []string{WeightsFile, victim, "element 0 is -Inf"}},
		{"F64 weight beyond float32", func(dir string) error {
			ts := tensorsOf()
			v, err := ts[victim].Float32s()
			if err != nil {
				return err
			}
			x, err := safetensors.FromFloat32As("F64", ts[victim].Shape, v)
			if err != nil {
				return err
			}
			binary.LittleEndian.PutUint64(x.Data[8*3:], math.Float64bits(1e300))
			ts[victim] = x
			return safetensors.Write(filepath.Join(dir, WeightsFile), ts, nil)
		}, []string{WeightsFile, victim, "element 3 is +Inf"}},
		{"bad config field", func(dir string) error {
			cfg, err := os.ReadFile(filepath.Join(dir, ConfigFile))
			if err != nil {
				return err
			}
			cfg = []byte(strings.Replace(string(cfg), `"num_key_value_heads": 2`, `"num_key_value_heads": 3`, 1))
			return os.WriteFile(filepath.Join(dir, ConfigFile), cfg, 0o644)
		}, []string{ConfigFile, "KVHeads"}},
		{"missing config field", func(dir string) error {
			cfg, err := os.ReadFile(filepath.Join(dir, ConfigFile))
			if err != nil {
				return err
			}
			cfg = []byte(strings.Replace(string(cfg), `"hidden_size"`, `"hidden_sz"`, 1))
			return os.WriteFile(filepath.Join(dir, ConfigFile), cfg, 0o644)
		}, []string{ConfigFile, "hidden_size"}},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		for _, f := range []string{ConfigFile, WeightsFile} {
			data, err := os.ReadFile(filepath.Join(good, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := tt.break_(dir); err != nil {
			t.Fatal(err)
		}
		_, err := Load(testBackend(t), dir)
		if err == nil {
			t.Errorf("%s: Load succeeded", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tt.name, err, w)
			}
		}
	}
	tr, _ := NewTrainer(m, OptimizerConfig{})
	if err := tr.LoadState(good); err == nil || !strings.Contains(err.Error(), OptimizerFile) {
		t.Errorf("LoadState without optimizer file: %v", err)
	}
	// A NaN in the optimizer's moments is refused like one in the weights.
	if err := tr.SaveState(good); err != nil {
		t.Fatal(err)
	}
	if err := tr.LoadState(good); err != nil {
		t.Fatalf("LoadState of a good state: %v", err)
	}
	opt := filepath.Join(good, OptimizerFile)
	ts, meta, err := safetensors.Read(opt)
	if err != nil {
		t.Fatal(err)
	}
	name := velocityPrefix + victim
	ts[name] = withElement(t, ts[name], 2, float32(math.NaN()))
	if err := safetensors.Write(opt, ts, meta); err != nil {
		t.Fatal(err)
	}
	if err := tr.LoadState(good); err == nil || !strings.Contains(err.Error(), OptimizerFile) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("LoadState with a NaN moment: %v, want an error naming %s and %s", err, OptimizerFile, name)
	}
}

// withElement returns a copy of the F32 tensor x with element i set to v.
func withElement(t *testing.T, x safetensors.Tensor, i int, v float32) safetensors.Tensor {
	t.Helper()
	vals, err := x.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	vals = slices.Clone(vals)
	vals[i] = v
	return safetensors.FromFloat32(x.Shape, vals)
}

// A shipped checkpoint with one NaN weight is refused at load, naming the
// file and the tensor; the untouched copy loads.
func TestShippedCheckpointWithNaNRefused(t *testing.T) {
	src := filepath.Join("..", "examples", "agents", "gpt-char")
	dir := t.TempDir()
	for _, f := range []string{ConfigFile, WeightsFile} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Load(testBackend(t), dir); err != nil {
		t.Fatalf("the shipped checkpoint does not load: %v", err)
	}
	path := filepath.Join(dir, WeightsFile)
	ts, meta, err := safetensors.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	const name = "h.0.mlp.c_fc.weight"
	x, ok := ts[name]
	if !ok {
		t.Fatalf("no tensor %s in %s", name, src)
	}
	ts[name] = withElement(t, x, 17, float32(math.NaN()))
	if err := safetensors.Write(path, ts, meta); err != nil {
		t.Fatal(err)
	}
	_, err = Load(testBackend(t), dir)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "element 17 is NaN") {
		t.Fatalf("Load: %v, want an error naming %s, %s and the NaN", err, path, name)
	}
}

func TestDeterminism(t *testing.T) {
	ctx := context.Background()
	run := func() ([]Sample, [][]float32) {
		m, err := New(testBackend(t), tinyConfigs["llama-gqa"], 42)
		if err != nil {
			t.Fatal(err)
		}
		tr, _ := NewTrainer(m, OptimizerConfig{LearningRate: 3e-3, MaxGradNorm: 1})
		rng := rand.New(rand.NewPCG(42, 0))
		for range 3 {
			s, err := m.Generate(ctx, [][]int{{1, 2}, {3}, {4, 5, 6}}, SampleOptions{MaxNewTokens: 6, Temperature: 1}, rng)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []Sequence
			var w [][]float32
			for i, x := range s {
				seqs = append(seqs, Sequence{Prompt: []int{i + 1}, Response: x.Tokens})
				w = append(w, slices.Repeat([]float32{-0.1}, len(x.Tokens)))
			}
			if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Apply(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
		s, _ := m.Generate(ctx, [][]int{{7, 7}}, SampleOptions{MaxNewTokens: 10, Temperature: 1}, rng)
		sc, _ := m.Score(ctx, []Sequence{{Prompt: []int{1}, Response: []int{2, 3, 4, 5}}}, false)
		return s, sc.LogProbs
	}
	s1, lp1 := run()
	s2, lp2 := run()
	if !slices.Equal(s1[0].Tokens, s2[0].Tokens) || !slices.Equal(s1[0].LogProbs, s2[0].LogProbs) {
		t.Errorf("samples differ: %v vs %v", s1[0], s2[0])
	}
	if !slices.Equal(lp1[0], lp2[0]) {
		t.Errorf("trained models differ: %v vs %v", lp1[0], lp2[0])
	}
	a, _ := New(testBackend(t), tinyConfigs["gpt-gelu"], 1)
	b, _ := New(testBackend(t), tinyConfigs["gpt-gelu"], 2)
	if slices.Equal(a.paramValues(0), b.paramValues(0)) {
		t.Error("different seeds gave the same weights")
	}
}

// Accumulating two micro-batches gives the step of one batch holding both.
func TestAccumulateMicroBatches(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 3))
	var seqs []Sequence
	var w [][]float32
	for i := range 6 {
		s := Sequence{Prompt: randomTokens(rng, 1+i, 16), Response: randomTokens(rng, 2+2*i, 16)}
		seqs = append(seqs, s)
		row := make([]float32, len(s.Response))
		for j := range row {
			row[j] = float32(rng.NormFloat64())
		}
		w = append(w, row)
	}
	for _, name := range []string{"gpt-gelu", "qwen2-tied"} {
		one, two := newTiny(t, name, 5), newTiny(t, name, 5)
		opt := OptimizerConfig{LearningRate: 1e-2, WeightDecay: 0.01, MaxGradNorm: 0.5}
		t1, _ := NewTrainer(one, opt)
		t2, _ := NewTrainer(two, opt)
		lpAll, err := t1.Accumulate(ctx, seqs, w)
		if err != nil {
			t.Fatal(err)
		}
		lpA, _ := t2.Accumulate(ctx, seqs[:2], w[:2])
		lpB, err := t2.Accumulate(ctx, seqs[2:], w[2:])
		if err != nil {
			t.Fatal(err)
		}
		for i, row := range append(lpA, lpB...) {
			for j := range row {
				if math.Abs(float64(row[j]-lpAll[i][j])) > 1e-5 {
					t.Fatalf("%s: micro-batch log-prob [%d][%d] = %v, batch %v", name, i, j, row[j], lpAll[i][j])
				}
			}
		}
		for i := range one.specs {
			a, b := t1.accumulated()[i], t2.accumulated()[i]
			for j := range a {
				if math.Abs(a[j]-b[j]) > 1e-6+1e-4*math.Abs(a[j]) {
					t.Fatalf("%s: gradient of %s[%d] = %v in one batch, %v in two", name, one.specs[i].name, j, a[j], b[j])
				}
			}
		}
		n1, _ := t1.Apply(ctx, 0)
		n2, _ := t2.Apply(ctx, 0)
		if math.Abs(n1-n2) > 1e-5*n1 {
			t.Errorf("%s: gradient norm %v in one batch, %v in two", name, n1, n2)
		}
		for i := range one.specs {
			a, b := one.paramValues(i), two.paramValues(i)
			for j := range a {
				if math.Abs(a[j]-b[j]) > 1e-3*opt.LearningRate { // Adam magnifies float noise in near-zero gradients
					t.Fatalf("%s: %s[%d] = %v after one batch, %v after two", name, one.specs[i].name, j, a[j], b[j])
				}
			}
		}
	}
}

func TestNonFiniteGradient(t *testing.T) {
	for _, e := range []Engine{EngineNative, EngineGraph} {
		t.Run(string(e), func(t *testing.T) { testNonFiniteGradient(t, e) })
	}
}

func testNonFiniteGradient(t *testing.T, e Engine) {
	ctx := context.Background()
	m := newTiny(t, "gpt-relu", 9)
	m.SetEngine(e)
	tr, _ := NewTrainer(m, OptimizerConfig{LearningRate: 0.1})
	before := m.allParams()
	seqs := []Sequence{{Prompt: []int{1}, Response: []int{2, 3}}}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		if _, err := tr.Accumulate(ctx, seqs, [][]float32{{0.5, bad}}); err != nil {
			t.Fatal(err)
		}
		_, err := tr.Apply(ctx, 0)
		if !errors.Is(err, ErrNonFinite) {
			t.Fatalf("weight %v: Apply error %v, want ErrNonFinite", bad, err)
		}
		after := m.allParams()
		for i := range before {
			if !slices.Equal(before[i], after[i]) {
				t.Fatalf("weight %v: parameter %s changed", bad, m.specs[i].name)
			}
		}
		if tr.Step() != 0 {
			t.Errorf("step count %d after a rejected step", tr.Step())
		}
	}
	// The accumulator was cleared: a good step now works.
	if _, err := tr.Accumulate(ctx, seqs, [][]float32{{0.5, -0.5}}); err != nil {
		t.Fatal(err)
	}
	if n, err := tr.Apply(ctx, 0); err != nil || !(n > 0) {
		t.Errorf("good step after rejected ones: norm %v, error %v", n, err)
	}
	if _, err := tr.Apply(ctx, 0); err == nil {
		t.Error("Apply with nothing accumulated succeeded")
	}
}

// The accumulated gradient matches central finite differences of the
// surrogate Σ w·lp, in float64.
func TestGradientFiniteDifferences(t *testing.T) {
	ctx := context.Background()
	seqs := []Sequence{{Prompt: []int{3, 1, 4}, Response: []int{1, 5, 9, 2}}, {Prompt: []int{6}, Response: []int{5, 3}}}
	w := [][]float32{{0.3, -1, 0.5, 0.25}, {-0.7, 1}}
	for _, name := range []string{"gpt-gelu", "gpt-tanh", "llama-gqa", "llama-bias", "qwen3-gqa", "llama3-rope"} {
		m, err := newModel(testBackend(t), tinyConfigs[name], 13, dtypes.Float64)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(13, 13))
		for i := range m.specs {
			v := m.paramValues(i)
			for j := range v {
				v[j] += 0.3 * rng.NormFloat64() // a less uniform model: larger, more varied gradients
			}
			m.setParamValues(i, v)
		}
		tr, _ := NewTrainer(m, OptimizerConfig{})
		if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
			t.Fatal(err)
		}
		surrogate := func() float64 {
			lp, _, err := m.score(ctx, seqs, false)
			if err != nil {
				t.Fatal(err)
			}
			s := 0.0
			for i := range lp {
				for j := range lp[i] {
					s += float64(w[i][j]) * lp[i][j]
				}
			}
			return s
		}
		for i, s := range m.specs {
			grad := float64s(tr.acc[i])
			orig := m.paramValues(i)
			for range 2 {
				j := rng.IntN(len(orig))
				const h = 1e-5
				v := slices.Clone(orig)
				v[j] = orig[j] + h
				m.setParamValues(i, v)
				up := surrogate()
				v[j] = orig[j] - h
				m.setParamValues(i, v)
				down := surrogate()
				m.setParamValues(i, orig)
				fd := (up - down) / (2 * h)
				if math.Abs(fd-grad[j]) > 1e-6+1e-5*math.Abs(fd) {
					t.Errorf("%s: d/d %s[%d]: autodiff %.9g, finite difference %.9g", name, s.name, j, grad[j], fd)
				}
			}
		}
	}
}

// Both families learn to copy: prompt "abc|" → response "abc" + EOS.
func TestLearnsCopyTask(t *testing.T) {
	ctx := context.Background()
	const vocab, sep, eos, rows, steps = 12, 10, 11, 16, 80
	for _, cfg := range []Config{
		{Family: "gpt", Vocab: vocab, Dim: 32, Layers: 2, Heads: 4, Activation: "relu", MaxSeq: 16, BOS: -1, EOS: eos},
		{Family: "llama", Vocab: vocab, Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 64, MaxSeq: 16, BOS: -1, EOS: eos},
	} {
		m, err := New(testBackend(t), cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		tr, _ := NewTrainer(m, OptimizerConfig{LearningRate: 1e-2, MaxGradNorm: 1})
		rng := rand.New(rand.NewPCG(1, 2))
		batch := func() ([]Sequence, [][]float32) {
			var seqs []Sequence
			var w [][]float32
			for range rows {
				abc := randomTokens(rng, 3, 10)
				seqs = append(seqs, Sequence{Prompt: append(slices.Clone(abc), sep), Response: append(abc, eos)})
				w = append(w, slices.Repeat([]float32{-1.0 / (rows * 4)}, 4))
			}
			return seqs, w
		}
		loss := func(lp [][]float32) float64 {
			s := 0.0
			for _, row := range lp {
				for _, x := range row {
					s -= float64(x) / (rows * 4)
				}
			}
			return s
		}
		var first, last float64
		for step := range steps {
			seqs, w := batch()
			lp, err := tr.Accumulate(ctx, seqs, w)
			if err != nil {
				t.Fatal(err)
			}
			if step == 0 {
				first = loss(lp)
			}
			last = loss(lp)
			if _, err := tr.Apply(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
		if !(last < 0.25*first) || !(last < 0.5) {
			t.Errorf("%s: loss %.3f → %.3f, want a clear drop", cfg.Family, first, last)
		}
		// Greedy decoding now copies most prompts.
		seqs, _ := batch()
		var prompts [][]int
		for _, s := range seqs {
			prompts = append(prompts, s.Prompt)
		}
		out, err := m.Generate(ctx, prompts, SampleOptions{MaxNewTokens: 6, Greedy: true, Stop: []int{eos}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		right := 0
		for i, s := range out {
			if slices.Equal(s.Tokens, seqs[i].Response) {
				right++
			}
		}
		if right < rows*3/4 {
			t.Errorf("%s: greedy decoding copied %d of %d prompts (loss %.3f → %.3f)", cfg.Family, right, rows, first, last)
		}
		t.Logf("%s: loss %.3f → %.3f, copies %d/%d", cfg.Family, first, last, right, rows)
	}
}

// Many random lengths and batch sizes compile only a few shapes: with the
// Exec's cache capped at GoMLX's default of 32, nothing fails.
func TestBucketsBoundCompiledShapes(t *testing.T) {
	ctx := context.Background()
	m := newTiny(t, "gpt-relu", 1)
	m.SetEngine(EngineGraph) // the native decoder compiles nothing
	if _, err := m.Score(ctx, []Sequence{{Prompt: []int{1}, Response: []int{2}}}, false); err != nil {
		t.Fatal(err)
	}
	m.execs["score"].SetMaxCache(32)
	rng := rand.New(rand.NewPCG(8, 8))
	for range 60 {
		var seqs []Sequence
		for range 1 + rng.IntN(40) {
			p := 1 + rng.IntN(20)
			seqs = append(seqs, Sequence{Prompt: randomTokens(rng, p, 16), Response: randomTokens(rng, rng.IntN(m.cfg.MaxSeq-p+1), 16)})
		}
		if _, err := m.Score(ctx, seqs, false); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int]bool{}
	for n := 1; n <= 4096; n++ {
		b := lengthBucket(n)
		if b < n || b > n*3/2+8 {
			t.Fatalf("lengthBucket(%d) = %d", n, b)
		}
		seen[b] = true
	}
	if len(seen) > 20 {
		t.Errorf("%d length buckets up to 4096", len(seen))
	}
}

// A clone keeps the weights it was made with while the original trains.
func TestCloneIsIndependent(t *testing.T) {
	ctx := context.Background()
	m := newTiny(t, "llama-gqa", 17)
	tr, _ := NewTrainer(m, OptimizerConfig{LearningRate: 1e-2})
	seqs := []Sequence{{Prompt: []int{1, 2}, Response: []int{3, 4, 5}}}
	w := [][]float32{{-1, -1, -1}}
	step := func() {
		if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Apply(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	step() // the clone is taken from parameters the backend produced
	before, _ := m.Score(ctx, seqs, false)
	ref, err := m.Clone()
	if err != nil {
		t.Fatal(err)
	}
	step()
	after, _ := m.Score(ctx, seqs, false)
	frozen, _ := ref.Score(ctx, seqs, false)
	if !slices.Equal(frozen.LogProbs[0], before.LogProbs[0]) {
		t.Errorf("clone scores %v, original before training %v", frozen.LogProbs[0], before.LogProbs[0])
	}
	if slices.Equal(after.LogProbs[0], before.LogProbs[0]) {
		t.Error("training did not change the original")
	}
	if ref.NumParams() != m.NumParams() || !reflect.DeepEqual(ref.Config(), m.Config()) {
		t.Error("clone differs in shape")
	}
}

// The native backward pass gives the graph's gradients (which the finite-
// difference test checks) and log-probs, for every tiny config, with
// sequences of different lengths and zero-weight tokens.
func TestNativeGradientsMatchGraph(t *testing.T) {
	for name := range tinyConfigs {
		checkGradientsMatch(t, newTiny(t, name, 17), name, 1e-4)
	}
}

// raggedSeqs returns n sequences of tokens below 16, the i-th with a prompt
// of p0+dp·i tokens and a response of r0+dr·i, and standard normal weights
// for the response tokens.
func raggedSeqs(rng *rand.Rand, n, p0, dp, r0, dr int) ([]Sequence, [][]float32) {
	var seqs []Sequence
	var w [][]float32
	for i := range n {
		s := Sequence{Prompt: randomTokens(rng, p0+dp*i, 16), Response: randomTokens(rng, r0+dr*i, 16)}
		ws := make([]float32, len(s.Response))
		for j := range ws {
			ws[j] = float32(rng.NormFloat64())
		}
		seqs, w = append(seqs, s), append(w, ws)
	}
	return seqs, w
}

// checkGradientsMatch is TestNativeGradientsMatchGraph's check of tiny model
// name m, with log-probs within lpTol.
func checkGradientsMatch(t *testing.T, m *Model, name string, lpTol float64) {
	t.Helper()
	seqs, w := raggedSeqs(rand.New(rand.NewPCG(17, 1)), 5, 1, 3, 2, 5)
	for _, ws := range w {
		ws[0] = 0
	}
	acc, lps := accumulateOnEngines(context.Background(), t, m, seqs, w, 2)
	checkLogProbsWithin(t, name, lps, lpTol)
	for i, s := range m.specs {
		if diff, norm := gradientGap(acc[0][i], acc[1][i]); diff > 1e-4*norm+1e-6 {
			t.Errorf("%s: %s: native gradient differs from the graph's by %.3g (norm %.3g)", name, s.name, diff, norm)
		}
	}
}

// accumulateOnEngines accumulates seqs weighted by w into a fresh trainer
// of m on the native engine and on the graphs, in two calls (the first
// split sequences, then the rest: the second adds to the first's gradient),
// and returns each engine's accumulated gradient and log-probs.
func accumulateOnEngines(ctx context.Context, t *testing.T, m *Model, seqs []Sequence, w [][]float32, split int) (acc [2][][]float64, lps [2][][]float32) {
	t.Helper()
	for i, e := range []Engine{EngineNative, EngineGraph} {
		m.SetEngine(e)
		tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 1e-3})
		if err != nil {
			t.Fatal(err)
		}
		if lps[i], err = tr.Accumulate(ctx, seqs[:split], w[:split]); err != nil {
			t.Fatal(err)
		}
		lp, err := tr.Accumulate(ctx, seqs[split:], w[split:])
		if err != nil {
			t.Fatal(err)
		}
		lps[i] = append(lps[i], lp...)
		acc[i] = tr.accumulated()
	}
	return acc, lps
}

// checkLogProbsAgree fails when the native engine's log-probs (lps[0]) and
// the graphs' (lps[1]) differ by more than 1e-4 anywhere.
func checkLogProbsAgree(t *testing.T, label string, lps [2][][]float32) {
	t.Helper()
	checkLogProbsWithin(t, label, lps, 1e-4)
}

// checkLogProbsWithin is checkLogProbsAgree with the tolerance tol.
func checkLogProbsWithin(t *testing.T, label string, lps [2][][]float32, tol float64) {
	t.Helper()
	for r := range lps[0] {
		for j := range lps[0][r] {
			if d := math.Abs(float64(lps[0][r][j] - lps[1][r][j])); d > tol {
				t.Errorf("%s: sequence %d token %d: native lp %v, graph %v", label, r, j, lps[0][r][j], lps[1][r][j])
			}
		}
	}
}

// gradientGap is the Euclidean distance between the gradients nat and gr
// and gr's norm.
func gradientGap(nat, gr []float64) (diff, norm float64) {
	for j := range gr {
		diff += (nat[j] - gr[j]) * (nat[j] - gr[j])
		norm += gr[j] * gr[j]
	}
	return math.Sqrt(diff), math.Sqrt(norm)
}

// Training steps (accumulation over two calls, clipping, weight decay) on
// the native engine and on the graphs end at the same weights.
func TestEnginesTrainAlike(t *testing.T) {
	for _, name := range []string{"gpt-gelu", "llama-gqa", "qwen2-tied", "qwen3-gqa"} {
		checkTrainAlike(t, testBackend(t), name)
	}
}

// checkTrainAlike is TestEnginesTrainAlike's check of tiny model name on
// backend b.
func checkTrainAlike(t *testing.T, b compute.Backend, name string) {
	t.Helper()
	ctx := context.Background()
	var final [2][][]float64
	for i, e := range []Engine{EngineNative, EngineGraph} {
		m := newTinyOn(t, b, name, 23)
		m.SetEngine(e)
		tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 3e-3, WeightDecay: 0.1, MaxGradNorm: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(23, 5))
		for range 3 {
			for range 2 {
				seqs := []Sequence{{Prompt: randomTokens(rng, 3, 16), Response: randomTokens(rng, 9, 16)}, {Prompt: randomTokens(rng, 5, 16), Response: randomTokens(rng, 4, 16)}}
				w := [][]float32{slices.Repeat([]float32{-0.2}, 9), slices.Repeat([]float32{0.3}, 4)}
				if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tr.Apply(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
		final[i] = m.allParams()
	}
	for j, s := range newTinyOn(t, b, name, 23).specs {
		for k := range final[0][j] {
			if d := math.Abs(final[0][j][k] - final[1][j][k]); d > 1e-5 {
				t.Fatalf("%s: %s[%d]: native %v, graph %v", name, s.name, k, final[0][j][k], final[1][j][k])
			}
		}
	}
}

// On the native engine a sequence's scores do not depend on its batch: the
// same bits alone as among many sequences split over several passes.
func TestNativeScoresIndependentOfBatch(t *testing.T) {
	ctx := context.Background()
	m := newTiny(t, "llama-gqa", 29)
	m.SetEngine(EngineNative)
	rng := rand.New(rand.NewPCG(29, 1))
	var seqs []Sequence
	total := 0
	for total <= 2*passTokenBudget {
		s := Sequence{Prompt: randomTokens(rng, 1+rng.IntN(10), 16), Response: randomTokens(rng, 1+rng.IntN(25), 16)}
		seqs = append(seqs, s)
		total += len(s.Prompt) + len(s.Response) - 1
	}
	if n := len(passes(seqs, passTokenBudget)); n < 3 {
		t.Fatalf("%d tokens in %d passes; the test wants at least 3", total, n)
	}
	all, err := m.Score(ctx, seqs, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, len(seqs) / 2, len(seqs) - 1} {
		one, err := m.Score(ctx, seqs[i:i+1], true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(one.LogProbs[0], all.LogProbs[i]) || !slices.Equal(one.Entropy[0], all.Entropy[i]) {
			t.Errorf("sequence %d: alone %v / %v, in the batch %v / %v", i, one.LogProbs[0], one.Entropy[0], all.LogProbs[i], all.Entropy[i])
		}
	}
}

// Greedy decoding on the native engine gives a prompt the same tokens and
// log-probs, bit for bit, alone or in a batch split between cores.
func TestNativeGreedyIndependentOfBatch(t *testing.T) {
	ctx := context.Background()
	m := newTiny(t, "gpt-gelu", 31)
	m.SetEngine(EngineNative)
	rng := rand.New(rand.NewPCG(31, 1))
	var prompts [][]int
	for range 37 {
		prompts = append(prompts, randomTokens(rng, 1+rng.IntN(9), 16))
	}
	opt := SampleOptions{MaxNewTokens: 12, Greedy: true, Stop: []int{3}}
	all, err := m.Generate(ctx, prompts, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 17, 36} {
		one, err := m.Generate(ctx, prompts[i:i+1], opt, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(one[0].Tokens, all[i].Tokens) || !slices.Equal(one[0].LogProbs, all[i].LogProbs) {
			t.Errorf("prompt %d: alone %v %v, in the batch %v %v", i, one[0].Tokens, one[0].LogProbs, all[i].Tokens, all[i].LogProbs)
		}
	}
}

// accumulated is the trainer's accumulated gradient, on either engine.
func (t *Trainer) accumulated() [][]float64 {
	var out [][]float64
	for _, a := range t.acc {
		out = append(out, float64s(a))
	}
	if t.pending {
		for _, g := range tensorsFromFlat(t.specs(), t.hostAcc) {
			out = append(out, float64s(g))
		}
	}
	return out
}

// Switching engines between micro-batches keeps the accumulated gradient.
func TestEngineSwitchKeepsAccumulation(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(37, 1))
	var parts [3][]Sequence
	var ws [3][][]float32
	for i := range parts {
		parts[i] = []Sequence{{Prompt: randomTokens(rng, 2, 16), Response: randomTokens(rng, 5, 16)}}
		ws[i] = [][]float32{{0.3, -0.2, 0.5, 0.1, -0.4}}
	}
	grads := func(engines ...Engine) [][]float64 {
		m := newTiny(t, "llama-gqa", 37)
		tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 1e-3})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range engines {
			m.SetEngine(e)
			if _, err := tr.Accumulate(ctx, parts[i], ws[i]); err != nil {
				t.Fatal(err)
			}
		}
		return tr.accumulated()
	}
	want := grads(EngineNative, EngineNative, EngineNative)
	got := grads(EngineNative, EngineGraph, EngineNative)
	for i := range want {
		for j := range want[i] {
			if math.Abs(got[i][j]-want[i][j]) > 1e-5+1e-4*math.Abs(want[i][j]) {
				t.Fatalf("parameter %d [%d]: %v after switching engines, %v without", i, j, got[i][j], want[i][j])
			}
		}
	}
}

// pickReference is the distribution pick draws from, exactly, in float64
// and with the whole vocabulary sorted: the probability of each candidate
// id (0 for the rest) and the log-prob of each id under the unfiltered
// temperature-1 distribution over the whole row. Greedy puts all the mass
// on the largest logit, the lowest id among ties.
func pickReference(logits32 []float32, opt SampleOptions) (probs, logProbs []float64) {
	full := make([]float64, len(logits32))
	for i, x := range logits32 {
		full[i] = float64(x)
	}
	lse := logSumExp(full)
	logProbs = make([]float64, len(full))
	for i, x := range full {
		logProbs[i] = x - lse
	}
	logits := full
	if opt.Vocab > 0 {
		logits = logits[:opt.Vocab]
	}
	probs = make([]float64, len(full))
	if opt.Greedy || opt.Temperature == 0 {
		probs[slices.Index(logits, slices.Max(logits))] = 1
		return probs, logProbs
	}
	cand := make([]int, len(logits))
	for i := range cand {
		cand[i] = i
	}
	slices.SortStableFunc(cand, func(a, b int) int { return cmp.Compare(logits[b], logits[a]) })
	if opt.TopK > 0 && opt.TopK < len(cand) {
		cand = cand[:opt.TopK]
	}
	top := logits[cand[0]]
	w := make([]float64, len(cand))
	total := 0.0
	for i, c := range cand {
		w[i] = math.Exp((logits[c] - top) / opt.Temperature)
		total += w[i]
	}
	if opt.TopP > 0 && opt.TopP < 1 {
		mass := 0.0
		for i := range w {
			mass += w[i]
			if mass >= opt.TopP*total {
				cand, w, total = cand[:i+1], w[:i+1], mass
				break
			}
		}
	}
	for i, c := range cand {
		probs[c] = w[i] / total
	}
	return probs, logProbs
}

// pick draws only ids the exact distribution gives mass (allowing top-p
// a boundary of 1e-4, for float32 weights), takes exactly the greedy id,
// and reports the float64 log-softmax's log-prob within 1e-5, over random
// rows flat and peaked, with ties, with and without padding ids.
func TestPickStaysInSupport(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 1))
	opts := []SampleOptions{
		{}, {Greedy: true, Temperature: 1}, {Temperature: 1}, {Temperature: 0.7}, {TopK: 1, Temperature: 1}, {TopK: 5, Temperature: 1},
		{TopK: 40, Temperature: 1.3}, {TopP: 0.9, Temperature: 1}, {TopP: 0.5, Temperature: 0.6}, {TopP: 0.99, Temperature: 2},
		{TopK: 20, TopP: 0.8, Temperature: 1}, {TopK: 5}, {TopP: 0.5},
	}
	var smp sampler
	for _, V := range []int{16, 300, 5000} {
		draws := 200
		if V > 1000 {
			draws = 30
		}
		for draw := range draws {
			logits := make([]float32, V)
			scale := []float64{0.5, 3, 12}[draw%3] // flat to peaked
			for i := range logits {
				logits[i] = float32(scale * rng.NormFloat64())
			}
			logits[rng.IntN(V)] = logits[rng.IntN(V)] // a tie now and then
			for _, opt := range opts {
				for _, vocab := range []int{0, V - V/4} { // all ids; the last quarter padding
					opt.Vocab = vocab
					c, lp := smp.pick(logits, opt, rand.New(rand.NewPCG(uint64(draw*100+V), 2)))
					probs, lps := pickReference(logits, opt)
					if opt.TopP > 0 && probs[c] == 0 {
						opt.TopP += 1e-4
						probs, _ = pickReference(logits, opt)
					}
					if probs[c] == 0 || (opt.greedy() && probs[c] != 1) {
						t.Fatalf("V=%d draw %d %+v: picked %d, outside the distribution", V, draw, opt, c)
					}
					if math.Abs(lp-lps[c]) > 1e-5 {
						t.Fatalf("V=%d draw %d %+v: log-prob of %d is %v, want %v", V, draw, opt, c, lp, lps[c])
					}
				}
			}
		}
	}
}

// Rows with NaN or infinite logits: a NaN row gives its greedy token among
// the logits that are not NaN (0 if none is) and a NaN log-prob, whatever
// the options; a −Inf logit is never drawn.
func TestPickEdgeRows(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	opts := []SampleOptions{{}, {Temperature: 1}, {Temperature: 0.5, TopK: 3}, {Temperature: 2, TopP: 0.9}}
	for _, tc := range []struct {
		name   string
		logits []float32
		want   int // -1: any id but the −Inf ones
		nanLP  bool
	}{
		{"all NaN", []float32{nan, nan, nan, nan}, 0, true},
		{"NaN first", []float32{nan, 1, 3, 3, 2}, 2, true},
		{"NaN last", []float32{1, 3, 2, nan}, 1, true},
		{"+Inf", []float32{1, inf, 2, inf}, 1, true},
		{"one finite", []float32{-inf, -inf, 0.5, -inf}, 2, false},
		{"some −Inf", []float32{-inf, 0, -inf, 1, -inf, 0.5, -inf, -inf, 2, -inf}, -1, false},
	} {
		var smp sampler
		rng := rand.New(rand.NewPCG(1, 2))
		for _, opt := range opts {
			for range 200 {
				c, lp := smp.pick(tc.logits, opt, rng)
				if tc.want >= 0 && c != tc.want || math.IsInf(float64(tc.logits[c]), -1) {
					t.Fatalf("%s %+v: picked %d, want %d", tc.name, opt, c, tc.want)
				}
				if math.IsNaN(lp) != tc.nanLP || (!tc.nanLP && tc.want >= 0 && lp != 0) {
					t.Fatalf("%s %+v: log-prob %v", tc.name, opt, lp)
				}
			}
		}
	}
}

// pick's tokens follow the exact distribution: a chi-square test of many
// draws (ids expected fewer than 5 times pooled) with a fixed seed, and no
// id off the distribution's support, at temperatures 1 and 0.7, with top-k
// and top-p, with and without padding ids, on a row within one block of
// the sampler's sums and on one across several.
func TestPickDistribution(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rows := map[string][]float32{}
	for _, V := range []int{64, 3000} {
		row := make([]float32, V)
		for i := range row {
			row[i] = float32(2 * rng.NormFloat64())
		}
		row[V/2] = row[V/3] // a tie
		rows[fmt.Sprint("V=", V)] = row
	}
	for _, tc := range []struct {
		name string
		opt  SampleOptions
	}{
		{"T=1", SampleOptions{Temperature: 1}},
		{"T=0.7", SampleOptions{Temperature: 0.7}},
		{"T=1.5,top-k=10", SampleOptions{Temperature: 1.5, TopK: 10}},
		{"T=1,top-p=0.8", SampleOptions{Temperature: 1, TopP: 0.8}},
		{"T=0.7,top-k=20,top-p=0.9", SampleOptions{Temperature: 0.7, TopK: 20, TopP: 0.9}},
	} {
		for name, row := range rows {
			for _, vocab := range []int{0, len(row) * 3 / 4} {
				opt := tc.opt
				opt.Vocab = vocab
				t.Run(fmt.Sprintf("%s/%s/vocab=%d", tc.name, name, vocab), func(t *testing.T) {
					const draws = 60000
					probs, lps := pickReference(row, opt)
					count := make([]int, len(row))
					var smp sampler
					r := rand.New(rand.NewPCG(11, uint64(vocab)))
					for range draws {
						c, lp := smp.pick(row, opt, r)
						if probs[c] == 0 {
							t.Fatalf("drew %d, outside the distribution", c)
						}
						if math.Abs(lp-lps[c]) > 1e-5 {
							t.Fatalf("log-prob of %d is %v, want %v", c, lp, lps[c])
						}
						count[c]++
					}
					chi, df := 0.0, -1
					pooledP, pooledN := 0.0, 0
					for c, p := range probs {
						if p == 0 {
							continue
						}
						if p*draws < 5 {
							pooledP, pooledN = pooledP+p, pooledN+count[c]
							continue
						}
						d := float64(count[c]) - p*draws
						chi += d * d / (p * draws)
						df++
					}
					if pooledP*draws >= 5 {
						d := float64(pooledN) - pooledP*draws
						chi += d * d / (pooledP * draws)
						df++
					}
					// The chi-square of df degrees has mean df and standard
					// deviation √(2df): 6 of them is a failure by chance
					// well below one in a million.
					if limit := float64(df) + 6*math.Sqrt(2*float64(max(df, 1))); chi > limit {
						t.Errorf("chi-square %.1f over %d degrees of freedom, want at most %.1f", chi, df, limit)
					}
				})
			}
		}
	}
}

// BenchmarkPick draws from a Qwen2-sized vocabulary (flat logits: the
// nucleus is wide) with the sampler's scratch kept as Generate keeps it.
func BenchmarkPick(b *testing.B) {
	rng := rand.New(rand.NewPCG(43, 1))
	logits := make([]float32, 151936)
	for i := range logits {
		logits[i] = float32(3 * rng.NormFloat64())
	}
	for _, c := range []struct {
		name string
		opt  SampleOptions
	}{
		{"T=1", SampleOptions{Temperature: 1}},
		{"T=1,top-p=0.95", SampleOptions{Temperature: 1, TopP: 0.95}},
		{"T=0.7,top-k=50", SampleOptions{Temperature: 0.7, TopK: 50}},
		{"greedy", SampleOptions{Greedy: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var smp sampler
			for b.Loop() {
				smp.pick(logits, c.opt, rng)
			}
		})
	}
}

func TestParseEngine(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Engine
		ok   bool
	}{{"", EngineAuto, true}, {"auto", EngineAuto, true}, {"native", EngineNative, true}, {"graph", EngineGraph, true}, {"gpu", "", false}} {
		got, err := ParseEngine(tc.name)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseEngine(%q) = %q, %v", tc.name, got, err)
		}
	}
}
