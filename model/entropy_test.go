package model

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"

	"github.com/hacrl/hacrl/internal/pyenv"
)

// entropySeqs are loraSeqs with an entropy weight per response token, one
// of them zero.
func entropySeqs() ([]Sequence, [][]float32, [][]float32) {
	seqs, w := loraSeqs()
	e := [][]float32{{0.8, -0.6, 0, 1.1}, {-0.9, 0.7}, {0.5, 1.3, -0.4}}
	return seqs, w, e
}

// zeroRows is rows with every value zero.
func zeroRows(rows [][]float32) [][]float32 {
	out := make([][]float32, len(rows))
	for i, r := range rows {
		out[i] = make([]float32, len(r))
	}
	return out
}

// entropySurrogate64 is Σ w·lp + Σ e·H under m, scored in float64 when m
// is a float64 model.
func entropySurrogate64(t *testing.T, m *Model, seqs []Sequence, w, e [][]float32) float64 {
	t.Helper()
	lp, ent, err := m.score(context.Background(), seqs, true)
	if err != nil {
		t.Fatal(err)
	}
	s := 0.0
	for i := range lp {
		for j := range lp[i] {
			s += float64(w[i][j])*lp[i][j] + float64(e[i][j])*ent[i][j]
		}
	}
	return s
}

// twinModels returns tiny model name as a float64 model (graph engine) and
// a float32 one (native engine) with the same weights: New's, moved by
// N(0, 0.3²) so that the distributions are far from uniform, rounded to
// float32.
func twinModels(t *testing.T, name string, seed uint64) (m64, m32 *Model) {
	t.Helper()
	m64, err := newModel(testBackend(t), tinyConfigs[name], int64(seed), dtypes.Float64)
	if err != nil {
		t.Fatal(err)
	}
	m32 = newTiny(t, name, int64(seed))
	m32.SetEngine(EngineNative)
	rng := rand.New(rand.NewPCG(seed, 13))
	for i := range m64.specs {
		v := m64.paramValues(i)
		for j := range v {
			v[j] = float64(float32(v[j] + 0.3*rng.NormFloat64()))
		}
		m64.setParamValues(i, v)
		m32.setParamValues(i, v)
	}
	return m64, m32
}

// AccumulateEntropy's gradient matches central finite differences of the
// surrogate Σ w·lp + Σ e·H, with the weights w zero (the entropy term's
// gradient alone) and not: on the graphs in float64, and on the native
// engine (float32) against differences taken in float64 on the same
// weights. (On the graphs autodiff of H's formula would give zero: its
// gradient is written by hand, as on the native engine.)
func TestEntropyGradientFiniteDifferences(t *testing.T) {
	ctx := context.Background()
	seqs, w, e := entropySeqs()
	for _, name := range []string{"gpt-gelu", "llama3-rope", "qwen3-gqa", "qwen2-tied"} {
		m64, m32 := twinModels(t, name, 19)
		for _, c := range []struct {
			label string
			w     [][]float32
		}{{"entropy only", zeroRows(w)}, {"weights and entropy", w}} {
			var grads [2][][]float64 // graph (float64), native (float32)
			for k, m := range []*Model{m64, m32} {
				tr, err := NewTrainer(m, OptimizerConfig{})
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := tr.AccumulateEntropy(ctx, seqs, c.w, e); err != nil {
					t.Fatal(err)
				}
				grads[k] = tr.accumulated()
			}
			rng := rand.New(rand.NewPCG(19, 19))
			for i, s := range m64.specs {
				orig := m64.paramValues(i)
				for range 3 {
					j := rng.IntN(len(orig))
					const h = 1e-5
					v := slices.Clone(orig)
					v[j] = orig[j] + h
					m64.setParamValues(i, v)
					up := entropySurrogate64(t, m64, seqs, c.w, e)
					v[j] = orig[j] - h
					m64.setParamValues(i, v)
					down := entropySurrogate64(t, m64, seqs, c.w, e)
					m64.setParamValues(i, orig)
					fd := (up - down) / (2 * h)
					if g := grads[0][i][j]; math.Abs(fd-g) > 1e-6+1e-5*math.Abs(fd) {
						t.Errorf("%s, %s: graph d/d %s[%d]: %.9g, finite difference %.9g", name, c.label, s.name, j, g, fd)
					}
					if g := grads[1][i][j]; math.Abs(fd-g) > 2e-5+1e-3*math.Abs(fd) {
						t.Errorf("%s, %s: native d/d %s[%d]: %.7g, finite difference %.9g", name, c.label, s.name, j, g, fd)
					}
				}
			}
		}
	}
}

// The native engine's adapter gradients of Σ w·lp + Σ e·H match central
// finite differences taken in float64 on the merged model.
func TestEntropyLoRAGradientsFiniteDifferences(t *testing.T) {
	ctx := context.Background()
	seqs, w, e := entropySeqs()
	for _, c := range []struct {
		model   string
		targets []string
	}{{"qwen3-gqa", []string{AllLinear}}, {"gpt-tanh", []string{"c_attn", "c_fc"}}} {
		m := newTiny(t, c.model, 5)
		m.SetEngine(EngineNative)
		if err := m.AddLoRA(LoRA{Rank: 3, Alpha: 6, Targets: c.targets}, 2); err != nil {
			t.Fatal(err)
		}
		randomizeB(m, 9)
		tr, err := NewTrainer(m, OptimizerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := tr.AccumulateEntropy(ctx, seqs, zeroRows(w), e); err != nil {
			t.Fatal(err)
		}
		grads := flatViews(m.lora.specs, tr.hostAcc)
		rng := rand.New(rand.NewPCG(5, 5))
		for i, s := range m.lora.specs {
			v := flatViews(m.lora.specs, m.lora.host)[i]
			for range 2 {
				j := rng.IntN(len(v))
				orig := v[j]
				const h = 1e-3
				v[j] = orig + h
				up := entropySurrogate64(t, mergedFloat64(t, m), seqs, zeroRows(w), e)
				v[j] = orig - h
				down := entropySurrogate64(t, mergedFloat64(t, m), seqs, zeroRows(w), e)
				v[j] = orig
				fd := (up - down) / (float64(orig+h) - float64(orig-h)) // the float32 values' actual distance
				if got := float64(grads[i][j]); math.Abs(fd-got) > 2e-4+2e-3*math.Abs(fd) {
					t.Errorf("%s %v: d/d %s[%d]: native %.7g, finite difference %.7g", c.model, c.targets, s.name, j, got, fd)
				}
			}
		}
	}
}

// accumulateEntropyOnEngines is accumulateOnEngines for AccumulateEntropy:
// each engine's gradient, log-probs and entropies, accumulated in two
// calls.
func accumulateEntropyOnEngines(t *testing.T, m *Model, seqs []Sequence, w, e [][]float32, split int) (acc [2][][]float64, lps, ents [2][][]float32) {
	t.Helper()
	ctx := context.Background()
	for i, eng := range engines {
		m.SetEngine(eng)
		tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 1e-3})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range [][2]int{{0, split}, {split, len(seqs)}} {
			lp, h, err := tr.AccumulateEntropy(ctx, seqs[r[0]:r[1]], w[r[0]:r[1]], e[r[0]:r[1]])
			if err != nil {
				t.Fatal(err)
			}
			lps[i], ents[i] = append(lps[i], lp...), append(ents[i], h...)
		}
		acc[i] = tr.accumulated()
	}
	return acc, lps, ents
}

// The native engine and the graphs give the same gradient of Σ w·lp + Σ e·H
// (within 1e-4 of its norm, per parameter), log-probs and entropies (1e-4),
// for every tiny config and every adapter case, and the entropies they
// return are Score's. With every entropy weight zero the native gradient
// is Accumulate's, bit for bit.
func TestEntropyGradientsMatchGraph(t *testing.T) {
	for name := range tinyConfigs {
		checkEntropyGradients(t, newTiny(t, name, 23), name, nil, 1e-4)
	}
	for _, c := range loraCases {
		checkEntropyGradients(t, newTiny(t, c.model, 21), c.model, c.targets, 1e-4)
	}
}

// checkEntropyGradients is TestEntropyGradientsMatchGraph's check of tiny
// model name m, given LoRA adapters on targets unless nil, with log-probs
// and entropies within lpTol.
func checkEntropyGradients(t *testing.T, m *Model, name string, targets []string, lpTol float64) {
	t.Helper()
	ctx := context.Background()
	trained := m.specs
	if targets != nil {
		if err := m.AddLoRA(LoRA{Rank: 3, Alpha: 5, Targets: targets}, 6); err != nil {
			t.Fatal(err)
		}
		randomizeB(m, 22)
		trained = m.lora.specs
		name = fmt.Sprintf("%s LoRA %v", name, targets)
	}
	rng := rand.New(rand.NewPCG(23, 1))
	seqs, w := raggedSeqs(rng, 5, 1, 3, 2, 5)
	_, e := raggedSeqs(rng, 5, 1, 3, 2, 5)
	w[1] = make([]float32, len(w[1])) // a row with the entropy term alone
	e[2] = make([]float32, len(e[2])) // and one without it
	acc, lps, ents := accumulateEntropyOnEngines(t, m, seqs, w, e, 2)
	checkLogProbsWithin(t, name, lps, lpTol)
	checkLogProbsWithin(t, name+" (entropies)", ents, lpTol)
	for i, s := range trained {
		diff, norm := gradientGap(acc[0][i], acc[1][i])
		if norm == 0 {
			t.Errorf("%s: %s: zero gradient", name, s.name)
		}
		if diff > 1e-4*norm+1e-6 {
			t.Errorf("%s: %s: native gradient differs from the graph's by %.3g (norm %.3g)", name, s.name, diff, norm)
		}
	}
	m.SetEngine(EngineNative)
	sc, err := m.Score(ctx, seqs, true)
	if err != nil {
		t.Fatal(err)
	}
	for r := range sc.Entropy {
		for j, h := range sc.Entropy[r] {
			if d := math.Abs(float64(h - ents[0][r][j])); d > 1e-5 {
				t.Errorf("%s: sequence %d token %d: AccumulateEntropy's H %v, Score's %v", name, r, j, ents[0][r][j], h)
			}
		}
	}
	var plain [2][][]float64
	for k := range plain {
		tr, err := NewTrainer(m, OptimizerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			_, err = tr.Accumulate(ctx, seqs, w)
		} else {
			_, _, err = tr.AccumulateEntropy(ctx, seqs, w, zeroRows(e))
		}
		if err != nil {
			t.Fatal(err)
		}
		plain[k] = tr.accumulated()
	}
	for i, s := range trained {
		if !slices.Equal(plain[0][i], plain[1][i]) {
			t.Errorf("%s: %s: with zero entropy weights the native gradient is not Accumulate's", name, s.name)
		}
	}
}

// AccumulateEntropy's gradient of Σ w·lp + Σ e·H is PyTorch's: the tiny
// models, with weights well off their initial values, saved in the Hugging
// Face layout, loaded by transformers (and their adapters by PEFT, only
// they trained) in float64, differentiated by torch.autograd
// (testdata/entropy_grad.py). Per parameter, both engines' gradients are
// within 1e-4 of its norm (plus 1e-6), and the log-probs and entropies
// within 1e-4.
func TestEntropyGradientMatchesPyTorch(t *testing.T) {
	pyenv.Python(t)
	ctx := context.Background()
	tmp := t.TempDir()
	seqs, w, e := entropySeqs()
	var pseqs []map[string][]int
	for _, s := range seqs {
		pseqs = append(pseqs, map[string][]int{"prompt": s.Prompt, "response": s.Response})
	}
	cases := []struct {
		model   string
		targets []string // LoRA adapters on these, or none
	}{{"qwen3-gqa", nil}, {"llama3-rope", nil}, {"gpt-gelu", nil}, {"qwen2-tied", nil},
		{"qwen3-gqa", []string{AllLinear}}, {"gpt-tanh", []string{"c_attn", "c_fc"}}}
	var models []*Model
	var specs []map[string]any
	for k, c := range cases {
		m := newTiny(t, c.model, 29)
		rng := rand.New(rand.NewPCG(29, uint64(k)))
		for i := range m.specs {
			v := m.paramValues(i)
			for j := range v {
				v[j] += 0.25 * rng.NormFloat64()
			}
			m.setParamValues(i, v)
		}
		dir := filepath.Join(tmp, fmt.Sprint(k))
		if err := m.Save(dir); err != nil {
			t.Fatal(err)
		}
		spec := map[string]any{"dir": dir, "seqs": pseqs, "weights": w, "entropy": e}
		if c.targets != nil {
			if err := m.AddLoRA(LoRA{Rank: 3, Alpha: 6, Targets: c.targets}, 4); err != nil {
				t.Fatal(err)
			}
			randomizeB(m, 31)
			if err := m.SaveAdapters(filepath.Join(dir, "adapter"), dir); err != nil {
				t.Fatal(err)
			}
			spec["adapter"] = filepath.Join(dir, "adapter")
		}
		models, specs = append(models, m), append(specs, spec)
	}
	var res struct {
		Results []struct {
			Grads    map[string][]float64
			LogProbs [][]float64
			Entropy  [][]float64
		}
	}
	pyenv.Run(t, "testdata/entropy_grad.py", map[string]any{"models": specs}, &res)
	if len(res.Results) != len(cases) {
		t.Fatalf("entropy_grad.py: %d results for %d models", len(res.Results), len(cases))
	}
	worst := map[Engine]float64{}
	for k, c := range cases {
		m, ref := models[k], res.Results[k]
		trained := m.specs
		if m.lora != nil {
			trained = m.lora.specs
		}
		if len(ref.Grads) != len(trained) {
			t.Errorf("%s %v: PyTorch trains %d tensors, hacrl %d", c.model, c.targets, len(ref.Grads), len(trained))
		}
		for _, eng := range engines {
			label := fmt.Sprintf("%s %v %s", c.model, c.targets, eng)
			m.SetEngine(eng)
			tr, err := NewTrainer(m, OptimizerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			lp, h, err := tr.AccumulateEntropy(ctx, seqs, w, e)
			if err != nil {
				t.Fatal(err)
			}
			checkLogProbsWithin(t, label, [2][][]float32{lp, to32(ref.LogProbs)}, 1e-4)
			checkLogProbsWithin(t, label+" (entropies)", [2][][]float32{h, to32(ref.Entropy)}, 1e-4)
			acc := tr.accumulated()
			for i, s := range trained {
				want, ok := ref.Grads[s.name]
				if !ok {
					want, ok = ref.Grads["transformer."+s.name] // GPT-2's module prefix
				}
				if !ok || len(want) != s.size() {
					t.Errorf("%s: PyTorch has no gradient of %s's %d values", label, s.name, s.size())
					continue
				}
				inGraphLayout := make([]float64, len(want))
				for j := range inGraphLayout {
					inGraphLayout[j] = want[s.fileIndex(j)]
				}
				diff, norm := gradientGap(acc[i], inGraphLayout)
				if norm == 0 || diff > 1e-4*norm+1e-6 {
					t.Errorf("%s: %s: gradient differs from PyTorch's by %.3g (norm %.3g)", label, s.name, diff, norm)
				}
				worst[eng] = max(worst[eng], diff/norm)
			}
		}
	}
	t.Logf("largest gap to PyTorch's gradient, relative to its norm: native %.2g, graph %.2g", worst[EngineNative], worst[EngineGraph])
}

// AccumulateEntropy refuses entropy weights that do not fit the sequences,
// naming the sequence, as Accumulate does weights.
func TestAccumulateEntropyBadInput(t *testing.T) {
	ctx := context.Background()
	seqs, w, e := entropySeqs()
	for _, c := range []struct {
		name    string
		w, e    [][]float32
		problem string
	}{
		{"short entropy row", w, [][]float32{e[0], e[1][:1], e[2]}, "AccumulateEntropy: sequence 1 has 2 response tokens but 1 entropy weights"},
		{"long entropy row", w, [][]float32{e[0], e[1], append(slices.Clone(e[2]), 1)}, "sequence 2 has 3 response tokens but 4 entropy weights"},
		{"missing entropy row", w, e[:2], "AccumulateEntropy: 2 entropy weight rows for 3 sequences"},
		{"short weight row", [][]float32{w[0][:3], w[1], w[2]}, e, "AccumulateEntropy: sequence 0 has 4 response tokens but 3 weights"},
	} {
		for _, eng := range engines {
			m := newTiny(t, "llama-gqa", 3)
			m.SetEngine(eng)
			tr, err := NewTrainer(m, OptimizerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = tr.AccumulateEntropy(ctx, seqs, c.w, c.e)
			if err == nil || !strings.Contains(err.Error(), c.problem) {
				t.Errorf("%s on %s: error %v, want one saying %q", c.name, eng, err, c.problem)
			}
			if tr.pending || tr.acc != nil {
				t.Errorf("%s on %s: a refused call accumulated a gradient", c.name, eng)
			}
		}
	}
}

// BenchmarkAccumulateEntropy measures a native Accumulate and an
// AccumulateEntropy over the same 8 sequences of 64 tokens at Qwen3's
// vocabulary (151936) on a narrow model (d = 64, 1 layer), where the LM
// head is most of the work: the entropy term's cost.
func BenchmarkAccumulateEntropy(b *testing.B) {
	cfg := Config{Family: "llama", Vocab: 151936, Dim: 64, Layers: 1, Heads: 4, KVHeads: 2, Hidden: 128, MaxSeq: 64, BOS: -1, EOS: -1}
	ctx := context.Background()
	m := benchModel(b, cfg)
	rng := rand.New(rand.NewPCG(1, 1))
	var seqs []Sequence
	var w, e [][]float32
	for range 8 {
		seqs = append(seqs, Sequence{Prompt: randomTokens(rng, 1, cfg.Vocab), Response: randomTokens(rng, cfg.MaxSeq-1, cfg.Vocab)})
		w, e = append(w, slices.Repeat([]float32{-1.0 / 504}, cfg.MaxSeq-1)), append(e, slices.Repeat([]float32{-0.01 / 504}, cfg.MaxSeq-1))
	}
	for _, c := range []struct {
		name    string
		entropy [][]float32
	}{{"Accumulate", nil}, {"AccumulateEntropy", e}} {
		b.Run(c.name, func(b *testing.B) {
			tr, err := NewTrainer(m, OptimizerConfig{})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, _, err := tr.AccumulateEntropy(ctx, seqs, w, c.entropy); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
