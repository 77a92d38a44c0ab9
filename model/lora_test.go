package model

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"

	"github.com/hacrl/hacrl/safetensors"
)

// loraCases are tiny models with the adapters that cover their products:
// all of them, a part of a fused product, and GPT-2's fused attention.
var loraCases = []struct {
	model   string
	targets []string
}{
	{"llama-gqa", []string{AllLinear}},
	{"llama-gqa", []string{"q_proj", "v_proj", "up_proj"}},
	{"qwen3-gqa", []string{AllLinear}},
	{"qwen2-tied", []string{"k_proj", "o_proj", "gate_proj", "down_proj"}},
	{"llama3-rope", []string{"self_attn.v_proj", "mlp.down_proj"}},
	{"gpt-gelu", []string{AllLinear}},
	{"gpt-tanh", []string{"c_attn", "c_fc"}},
}

// randomizeB gives m's B matrices random values, so that the adapters
// change what the model computes (fresh ones are zero).
func randomizeB(m *Model, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 5))
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, v := range flatViews(m.lora.specs, m.lora.onHost()) {
		if strings.HasSuffix(m.lora.specs[i].name, loraBSuffix) {
			for j := range v {
				v[j] = float32(0.3 * rng.NormFloat64())
			}
		}
	}
	m.dec = nil
}

func loraSeqs() ([]Sequence, [][]float32) {
	seqs := []Sequence{{Prompt: []int{3, 1, 4}, Response: []int{1, 5, 9, 2}}, {Prompt: []int{6}, Response: []int{5, 3}},
		{Prompt: []int{2, 7, 1, 8, 2}, Response: []int{8, 1, 8}}}
	w := [][]float32{{0.3, -1, 0.5, 0.25}, {-0.7, 1}, {0.2, 0.4, -0.6}}
	return seqs, w
}

// adapterValues copies m's adapters, in the file layout, wherever m holds
// them, without moving them.
func adapterValues(m *Model) []float32 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.lora.params != nil {
		return flatFromTensors(m.lora.specs, m.lora.params)
	}
	return slices.Clone(m.lora.host)
}

var engines = []Engine{EngineNative, EngineGraph}

// Fresh adapters (B = 0) leave the model's scores and samples exactly its
// base's, as PEFT's initialization does, on either engine.
func TestLoRAStartsAtBase(t *testing.T) {
	for _, e := range engines {
		t.Run(string(e), func(t *testing.T) { testLoRAStartsAtBase(t, e) })
	}
}

func testLoRAStartsAtBase(t *testing.T, e Engine) {
	ctx := context.Background()
	seqs, _ := loraSeqs()
	for _, c := range loraCases {
		base := newTiny(t, c.model, 3)
		base.SetEngine(e)
		m := newTiny(t, c.model, 3)
		m.SetEngine(e)
		if err := m.AddLoRA(LoRA{Rank: 4, Alpha: 8, Targets: c.targets}, 1); err != nil {
			t.Fatal(err)
		}
		if m.EngineName() != string(e) {
			t.Fatalf("%s %v: the adapted model runs on %s, want %s", c.model, c.targets, m.EngineName(), e)
		}
		want, err := base.Score(ctx, seqs, true)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Score(ctx, seqs, true)
		if err != nil {
			t.Fatal(err)
		}
		for i := range seqs {
			if !slices.Equal(got.LogProbs[i], want.LogProbs[i]) || !slices.Equal(got.Entropy[i], want.Entropy[i]) {
				t.Fatalf("%s %v: sequence %d scores %v with fresh adapters, %v without", c.model, c.targets, i, got.LogProbs[i], want.LogProbs[i])
			}
		}
		prompts := [][]int{{1, 2}, {3}, {4, 5, 6}}
		opt := SampleOptions{MaxNewTokens: 6, Temperature: 1}
		ws, err := base.Generate(ctx, prompts, opt, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		gs, err := m.Generate(ctx, prompts, opt, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		for i := range ws {
			if !slices.Equal(gs[i].Tokens, ws[i].Tokens) || !slices.Equal(gs[i].LogProbs, ws[i].LogProbs) {
				t.Fatalf("%s %v: sample %d is %v with fresh adapters, %v without", c.model, c.targets, i, gs[i].Tokens, ws[i].Tokens)
			}
		}
	}
}

// mergedFloat64 returns a float64 copy of m's base with the adapters
// merged in float64: the function the adapted float32 model computes,
// evaluated precisely (on the graph engine).
func mergedFloat64(t *testing.T, m *Model) *Model {
	t.Helper()
	m64, err := newModel(testBackend(t), m.cfg, 0, dtypes.Float64)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.specs {
		m64.setParamValues(i, m.paramValues(i))
	}
	ad := m.lora
	av := map[string][]float32{}
	for i, v := range flatViews(ad.specs, adapterValues(m)) {
		av[ad.specs[i].name] = v
	}
	index := map[string]int{}
	for i, s := range m.specs {
		index[s.name] = i
	}
	r, scale := ad.cfg.Rank, ad.cfg.scale()
	for _, mod := range ad.mods {
		a, b := av[peftPrefix+mod.path+loraASuffix], av[peftPrefix+mod.path+loraBSuffix]
		i := index[strings.TrimPrefix(mod.path, "transformer.")+".weight"]
		v := m64.paramValues(i) // the graph layout: [in,out]
		out := m.specs[i].shape[1]
		for j := range mod.out() {
			for c := range mod.in {
				s := 0.0
				for k := range r {
					s += float64(b[j*r+k]) * float64(a[k*mod.in+c])
				}
				v[c*out+j] += scale * s
			}
		}
		m64.setParamValues(i, v)
	}
	return m64
}

func surrogate64(t *testing.T, m *Model, seqs []Sequence, w [][]float32) float64 {
	t.Helper()
	lp, _, err := m.score(context.Background(), seqs, false)
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

// The native engine's adapter gradients match central finite differences of
// the surrogate Σ w·lp, taken in float64 on the merged model.
func TestLoRAGradientsFiniteDifferences(t *testing.T) {
	ctx := context.Background()
	seqs, w := loraSeqs()
	for _, c := range loraCases {
		m := newTiny(t, c.model, 5)
		if err := m.AddLoRA(LoRA{Rank: 3, Alpha: 6, Targets: c.targets}, 2); err != nil {
			t.Fatal(err)
		}
		randomizeB(m, 9)
		tr, err := NewTrainer(m, OptimizerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
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
				up := surrogate64(t, mergedFloat64(t, m), seqs, w)
				v[j] = orig - h
				down := surrogate64(t, mergedFloat64(t, m), seqs, w)
				v[j] = orig
				// The perturbed values are float32: divide by their actual distance.
				fd := (up - down) / (float64(orig+h) - float64(orig-h))
				if got := float64(grads[i][j]); math.Abs(fd-got) > 2e-4+2e-3*math.Abs(fd) {
					t.Errorf("%s %v: d/d %s[%d]: native %.7g, finite difference %.7g", c.model, c.targets, s.name, j, got, fd)
				}
			}
		}
	}
}

// A trainer of a model with adapters updates the adapters only, on either
// engine: the base weights, and Base's scores, stay what they were, and
// both engines end at the same adapters.
func TestLoRATrainsAdaptersOnly(t *testing.T) {
	var final [2][][]float32
	for i, e := range engines {
		t.Run(string(e), func(t *testing.T) { final[i] = testLoRATrainsAdaptersOnly(t, e) })
	}
	if final[0] == nil || final[1] == nil {
		return // reported above
	}
	worst := 0.0
	for k, c := range loraCases {
		for j, x := range final[0][k] {
			d := math.Abs(float64(x - final[1][k][j]))
			worst = max(worst, d)
			if d > 1e-5 {
				t.Fatalf("%s %v: adapter value %d after training: native %v, graph %v", c.model, c.targets, j, x, final[1][k][j])
			}
		}
	}
	t.Logf("largest difference of the adapters trained on the two engines: %.3g", worst)
}

// testLoRATrainsAdaptersOnly trains each case's adapters on engine e and
// returns them.
func testLoRATrainsAdaptersOnly(t *testing.T, e Engine) [][]float32 {
	ctx := context.Background()
	seqs, w := loraSeqs()
	var final [][]float32
	for _, c := range loraCases {
		m := newTiny(t, c.model, 7)
		m.SetEngine(e)
		before := m.allParams()
		if err := m.AddLoRA(LoRA{Rank: 2, Alpha: 4, Targets: c.targets}, 3); err != nil {
			t.Fatal(err)
		}
		base := m.Base()
		want, err := base.Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 5e-3, WeightDecay: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		first, err := m.Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Apply(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
		after, err := m.Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(after.LogProbs[0], first.LogProbs[0]) {
			t.Errorf("%s %v: three steps left the adapted model's scores unchanged", c.model, c.targets)
		}
		for i, p := range m.allParams() {
			if !slices.Equal(p, before[i]) {
				t.Fatalf("%s %v: base parameter %s changed in training", c.model, c.targets, m.specs[i].name)
			}
		}
		got, err := base.Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		for i := range seqs {
			if !slices.Equal(got.LogProbs[i], want.LogProbs[i]) {
				t.Fatalf("%s %v: Base scores changed in training", c.model, c.targets)
			}
		}
		final = append(final, adapterValues(m))
	}
	return final
}

// MergeLoRA folds the adapters into the weights: the merged model scores
// what the adapted one did, within float32 rounding.
func TestMergeLoRA(t *testing.T) {
	ctx := context.Background()
	seqs, _ := loraSeqs()
	for _, c := range loraCases {
		m := newTiny(t, c.model, 11)
		if err := m.AddLoRA(LoRA{Rank: 4, Alpha: 16, Targets: c.targets}, 4); err != nil {
			t.Fatal(err)
		}
		randomizeB(m, 12)
		want, err := m.Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		base, err := m.Base().Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.MergeLoRA(); err != nil {
			t.Fatal(err)
		}
		if _, ok := m.LoRA(); ok {
			t.Fatal("the merged model still has adapters")
		}
		got, err := m.Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		moved := 0.0
		for i := range seqs {
			for j := range want.LogProbs[i] {
				if d := math.Abs(float64(got.LogProbs[i][j] - want.LogProbs[i][j])); d > 1e-5 {
					t.Errorf("%s %v: merged log-prob [%d][%d] = %v, adapted %v", c.model, c.targets, i, j, got.LogProbs[i][j], want.LogProbs[i][j])
				}
				moved = math.Max(moved, math.Abs(float64(want.LogProbs[i][j]-base.LogProbs[i][j])))
			}
		}
		if moved < 1e-3 {
			t.Errorf("%s %v: the adapters moved the log-probs by only %g: the test would not see a merge that dropped them", c.model, c.targets, moved)
		}
	}
}

// Targets select modules as PEFT's target_modules do.
func TestLoRATargets(t *testing.T) {
	for _, c := range []struct {
		model   string
		targets []string
		pattern string
		want    []string // the modules of layer 0
		err     string
	}{
		{"llama-gqa", []string{AllLinear}, "", []string{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}, ""},
		{"llama-gqa", []string{"v_proj", "q_proj"}, "", []string{"self_attn.q_proj", "self_attn.v_proj"}, ""},
		{"llama-gqa", []string{"mlp.up_proj"}, "", []string{"mlp.up_proj"}, ""},
		{"llama-gqa", nil, `.*\.(q|v)_proj`, []string{"self_attn.q_proj", "self_attn.v_proj"}, ""},
		{"gpt-gelu", []string{"c_proj"}, "", []string{"attn.c_proj", "mlp.c_proj"}, ""},
		{"gpt-gelu", []string{AllLinear}, "", []string{"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"}, ""},
		{"gpt-gelu", []string{"q_proj"}, "", nil, "match no linear layer"},
		{"llama-gqa", []string{"lm_head"}, "", nil, "match no linear layer"},
		{"llama-gqa", []string{"proj"}, "", nil, "match no linear layer"},
		{"llama-gqa", nil, "", nil, "empty"},
		{"llama-gqa", []string{"q_proj"}, "q_proj", nil, "both"},
		{"llama-gqa", nil, "(q_proj", nil, "regular expression"},
	} {
		cfg := tinyConfigs[c.model].Normalized()
		mods, err := cfg.loraModules(LoRA{Rank: 2, Alpha: 2, Targets: c.targets, Pattern: c.pattern})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %q: error %v, want one containing %q", c.model, c.targets, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s %q: %v", c.model, c.targets, err)
		}
		var got []string
		for _, mod := range mods {
			if mod.layer == 0 {
				got = append(got, strings.TrimPrefix(strings.TrimPrefix(mod.path, "model.layers.0."), "transformer.h.0."))
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %q: layer 0 modules %q, want %q", c.model, c.targets, got, c.want)
		}
		if len(mods) != len(got)*cfg.Layers {
			t.Errorf("%s %q: %d modules over %d layers, want %d per layer", c.model, c.targets, len(mods), cfg.Layers, len(got))
		}
	}
}

// With non-zero adapters the graph engine computes what the native one
// does: the same scores and entropies and the same greedy samples, within
// float32 rounding. The graphs are first built before the adapters are
// added, and again after they are merged: neither graph is reused for the
// other model.
func TestLoRAEnginesAgree(t *testing.T) {
	for _, c := range loraCases {
		checkLoRAEnginesAgree(t, newTiny(t, c.model, 19), c.model, c.targets, 1e-4)
	}
}

// checkLoRAEnginesAgree is TestLoRAEnginesAgree's check of tiny model name m
// (made with seed 19) given adapters on targets, with log-probs and
// entropies within tol.
func checkLoRAEnginesAgree(t *testing.T, m *Model, name string, targets []string, tol float64) {
	t.Helper()
	ctx := context.Background()
	seqs, _ := loraSeqs()
	prompts := [][]int{{1, 2}, {3}, {4, 5, 6, 7}}
	opt := SampleOptions{MaxNewTokens: 6, Greedy: true}
	near := func(a, b float32) bool { return math.Abs(float64(a-b)) <= tol }
	m.SetEngine(EngineGraph)
	base, err := m.Score(ctx, seqs, true) // builds the graphs of the model without adapters
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(ctx, prompts, opt, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.AddLoRA(LoRA{Rank: 3, Alpha: 6, Targets: targets}, 8); err != nil {
		t.Fatal(err)
	}
	randomizeB(m, 20)
	var scores [2]Scores
	var samples [2][]Sample
	for i, e := range engines {
		m.SetEngine(e)
		if scores[i], err = m.Score(ctx, seqs, true); err != nil {
			t.Fatal(err)
		}
		if samples[i], err = m.Generate(ctx, prompts, opt, nil); err != nil {
			t.Fatal(err)
		}
	}
	moved := 0.0
	for r := range seqs {
		for j, x := range scores[0].LogProbs[r] {
			g := scores[1].LogProbs[r][j]
			if !near(x, g) || !near(scores[0].Entropy[r][j], scores[1].Entropy[r][j]) {
				t.Errorf("%s %v: sequence %d token %d: native lp %v entropy %v, graph %v %v", name, targets, r, j,
					x, scores[0].Entropy[r][j], g, scores[1].Entropy[r][j])
			}
			moved = math.Max(moved, math.Abs(float64(g-base.LogProbs[r][j])))
		}
	}
	if moved < 1e-3 {
		t.Errorf("%s %v: the adapters moved the graph's log-probs by only %g: the graph ignored them", name, targets, moved)
	}
	for r := range prompts {
		n, g := samples[0][r], samples[1][r]
		if !slices.Equal(n.Tokens, g.Tokens) {
			t.Fatalf("%s %v: greedy row %d: native %v, graph %v", name, targets, r, n.Tokens, g.Tokens)
		}
		for j := range n.LogProbs {
			if !near(n.LogProbs[j], g.LogProbs[j]) {
				t.Errorf("%s %v: greedy row %d token %d: native log-prob %v, graph %v", name, targets, r, j, n.LogProbs[j], g.LogProbs[j])
			}
		}
	}
	// Merged, the model runs the graphs of a model without adapters again.
	want := scores[0]
	if err := m.MergeLoRA(); err != nil {
		t.Fatal(err)
	}
	m.SetEngine(EngineGraph)
	got, err := m.Score(ctx, seqs, true)
	if err != nil {
		t.Fatal(err)
	}
	for r := range seqs {
		for j, x := range want.LogProbs[r] {
			if !near(x, got.LogProbs[r][j]) {
				t.Errorf("%s %v: merged, on the graphs: sequence %d token %d: lp %v, adapted %v", name, targets, r, j, got.LogProbs[r][j], x)
			}
		}
	}
}

// The graphs' adapter gradients, accumulated over two calls, match the
// native engine's, and so do the log-probs they return.
func TestLoRAGradientsMatchGraph(t *testing.T) {
	for _, c := range loraCases {
		checkLoRAGradients(t, newTiny(t, c.model, 21), c.model, c.targets, 1e-4)
	}
}

// checkLoRAGradients is TestLoRAGradientsMatchGraph's check of tiny model
// name m (made with seed 21) given adapters on targets, with log-probs
// within lpTol.
func checkLoRAGradients(t *testing.T, m *Model, name string, targets []string, lpTol float64) {
	t.Helper()
	seqs, w := loraSeqs()
	if err := m.AddLoRA(LoRA{Rank: 3, Alpha: 5, Targets: targets}, 6); err != nil {
		t.Fatal(err)
	}
	randomizeB(m, 22)
	acc, lps := accumulateOnEngines(context.Background(), t, m, seqs, w, 1)
	checkLogProbsWithin(t, fmt.Sprintf("%s %v", name, targets), lps, lpTol)
	if len(acc[1]) != len(m.lora.specs) {
		t.Fatalf("%s %v: the graph accumulated %d gradients, want one per adapter tensor (%d)", name, targets, len(acc[1]), len(m.lora.specs))
	}
	for i, s := range m.lora.specs {
		diff, norm := gradientGap(acc[0][i], acc[1][i])
		if norm == 0 {
			t.Errorf("%s %v: %s: zero gradient", name, targets, s.name)
		}
		if diff > 1e-4*norm+1e-6 {
			t.Errorf("%s %v: %s: native gradient differs from the graph's by %.3g (norm %.3g)", name, targets, s.name, diff, norm)
		}
	}
}

// Switching engines between micro-batches keeps an adapted model's
// accumulated gradient.
func TestLoRAEngineSwitchKeepsAccumulation(t *testing.T) {
	ctx := context.Background()
	seqs, w := loraSeqs()
	for _, c := range []struct{ model string }{{"qwen3-gqa"}, {"gpt-tanh"}} {
		grads := func(engines ...Engine) [][]float64 {
			m := newTiny(t, c.model, 41)
			if err := m.AddLoRA(LoRA{Rank: 2, Alpha: 4, Targets: []string{AllLinear}}, 7); err != nil {
				t.Fatal(err)
			}
			randomizeB(m, 42)
			tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 1e-3})
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range engines {
				m.SetEngine(e)
				if _, err := tr.Accumulate(ctx, seqs[i:i+1], w[i:i+1]); err != nil {
					t.Fatal(err)
				}
			}
			return tr.accumulated()
		}
		want := grads(EngineNative, EngineNative, EngineNative)
		for _, order := range [][]Engine{{EngineNative, EngineGraph, EngineNative}, {EngineGraph, EngineNative, EngineGraph}} {
			got := grads(order...)
			if len(got) != len(want) {
				t.Fatalf("%s %v: %d gradients, want %d", c.model, order, len(got), len(want))
			}
			for i := range want {
				for j := range want[i] {
					if math.Abs(got[i][j]-want[i][j]) > 1e-5+1e-4*math.Abs(want[i][j]) {
						t.Fatalf("%s %v: adapter tensor %d [%d]: %v after switching engines, %v without", c.model, order, i, j, got[i][j], want[i][j])
					}
				}
			}
		}
	}
}

// Base's model reads its adapted model's one copy of the base weights on
// either engine, wherever the other engine has moved them, and computes
// what the model without adapters does; it takes no trainer or adapters.
func TestLoRABaseSharesWeights(t *testing.T) {
	ctx := context.Background()
	seqs, _ := loraSeqs()
	for _, order := range [][2]Engine{{EngineNative, EngineGraph}, {EngineGraph, EngineNative}, {EngineGraph, EngineGraph}, {EngineNative, EngineNative}} {
		name := fmt.Sprintf("adapted on %s, base on %s", order[0], order[1])
		plain := newTiny(t, "qwen2-tied", 43)
		plain.SetEngine(order[1])
		want, err := plain.Score(ctx, seqs, true)
		if err != nil {
			t.Fatal(err)
		}
		m := newTiny(t, "qwen2-tied", 43)
		if err := m.AddLoRA(LoRA{Rank: 2, Alpha: 4, Targets: []string{AllLinear}}, 9); err != nil {
			t.Fatal(err)
		}
		randomizeB(m, 44)
		b := m.Base()
		m.SetEngine(order[0])
		b.SetEngine(order[1])
		for range 2 { // each pass moves the weights to its engine
			if _, err := m.Score(ctx, seqs, false); err != nil {
				t.Fatal(err)
			}
			got, err := b.Score(ctx, seqs, true)
			if err != nil {
				t.Fatal(err)
			}
			for i := range seqs {
				if !slices.Equal(got.LogProbs[i], want.LogProbs[i]) || !slices.Equal(got.Entropy[i], want.Entropy[i]) {
					t.Fatalf("%s: Base scores sequence %d %v, the model without adapters %v", name, i, got.LogProbs[i], want.LogProbs[i])
				}
			}
			if b.host != nil || b.params != nil || (m.host == nil) == (m.params == nil) {
				t.Fatalf("%s: Base holds host %v tensors %v, the adapted model host %v tensors %v: want one copy, the adapted model's",
					name, b.host != nil, b.params != nil, m.host != nil, m.params != nil)
			}
		}
		c, err := b.Clone()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(c.allParams(), plain.allParams()) {
			t.Errorf("%s: a Clone of Base has other weights than the model without adapters", name)
		}
		if _, err := NewTrainer(b, OptimizerConfig{}); err == nil || !strings.Contains(err.Error(), "frozen") {
			t.Errorf("%s: NewTrainer of Base: error %v, want one saying the base is frozen", name, err)
		}
		if err := b.AddLoRA(LoRA{Rank: 2, Alpha: 4, Targets: []string{AllLinear}}, 1); err == nil || !strings.Contains(err.Error(), "frozen") {
			t.Errorf("%s: AddLoRA on Base: error %v, want one saying the base is frozen", name, err)
		}
	}
}

// A graph built for adapters of one configuration is not reused for
// adapters of another of the same shapes (here the scale differs).
func TestLoRAExecsKeyedByConfig(t *testing.T) {
	ctx := context.Background()
	seqs, _ := loraSeqs()
	m := newTiny(t, "llama-gqa", 47)
	for i, alpha := range []float64{2, 8} {
		if err := m.AddLoRA(LoRA{Rank: 2, Alpha: alpha, Targets: []string{"q_proj", "down_proj"}}, 10); err != nil {
			t.Fatal(err)
		}
		randomizeB(m, 48)
		var s [2]Scores
		for j, e := range engines {
			m.SetEngine(e)
			var err error
			if s[j], err = m.Score(ctx, seqs, false); err != nil {
				t.Fatal(err)
			}
		}
		for r := range seqs {
			for j, x := range s[0].LogProbs[r] {
				if d := math.Abs(float64(x - s[1].LogProbs[r][j])); d > 1e-4 {
					t.Fatalf("alpha %v: sequence %d token %d: native lp %v, graph %v", alpha, r, j, x, s[1].LogProbs[r][j])
				}
			}
		}
		if i == 0 {
			if err := m.MergeLoRA(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Adapters saved in PEFT's layout load back onto the base bit for bit, under
// PEFT's names and config fields.
func TestAdapterFilesRoundTrip(t *testing.T) {
	ctx := context.Background()
	seqs, _ := loraSeqs()
	for _, c := range loraCases {
		m := newTiny(t, c.model, 13)
		if err := m.AddLoRA(LoRA{Rank: 2, Alpha: 5, Targets: c.targets}, 6); err != nil {
			t.Fatal(err)
		}
		randomizeB(m, 14)
		dir := t.TempDir()
		if err := m.SaveAdapters(dir, "org/base-model"); err != nil {
			t.Fatal(err)
		}
		// The config as PEFT reads it.
		var cfg map[string]any
		data, err := os.ReadFile(filepath.Join(dir, AdapterConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]any{"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2.0, "lora_alpha": 5.0,
			"lora_dropout": 0.0, "bias": "none", "base_model_name_or_path": "org/base-model", "use_rslora": false,
			"use_dora": false, "modules_to_save": nil, "fan_in_fan_out": tinyConfigs[c.model].Family == "gpt"} {
			if cfg[k] != want {
				t.Errorf("%s: adapter_config.json %s = %v, want %v", c.model, k, cfg[k], want)
			}
		}
		// The tensors: PEFT's names and shapes, A [r,in] and B [out,r].
		st, _, err := safetensors.Read(filepath.Join(dir, AdapterWeightsFile))
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != 2*len(m.lora.mods) {
			t.Errorf("%s: %d tensors for %d modules", c.model, len(st), len(m.lora.mods))
		}
		for _, mod := range m.lora.mods {
			for name, shape := range map[string][]int{
				"base_model.model." + mod.path + ".lora_A.weight": {2, mod.in},
				"base_model.model." + mod.path + ".lora_B.weight": {mod.out(), 2},
			} {
				if got, ok := st[name]; !ok || !slices.Equal(got.Shape, shape) || got.DType != "F32" {
					t.Errorf("%s: tensor %s: %v (present %v), want F32 %v", c.model, name, got.Shape, ok, shape)
				}
			}
		}
		want, err := m.Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		back := newTiny(t, c.model, 13)
		if err := back.LoadAdapters(dir); err != nil {
			t.Fatal(err)
		}
		got, err := back.Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		for i := range seqs {
			if !slices.Equal(got.LogProbs[i], want.LogProbs[i]) {
				t.Fatalf("%s %v: reloaded adapters score %v, saved %v", c.model, c.targets, got.LogProbs[i], want.LogProbs[i])
			}
		}
	}
}

// A PEFT adapter hacrl cannot load faithfully is refused, naming the file
// and what is wrong.
func TestAdapterFilesRefused(t *testing.T) {
	m := newTiny(t, "llama-gqa", 1)
	if err := m.AddLoRA(LoRA{Rank: 2, Alpha: 4, Targets: []string{"q_proj", "v_proj"}}, 1); err != nil {
		t.Fatal(err)
	}
	good := t.TempDir()
	if err := m.SaveAdapters(good, ""); err != nil {
		t.Fatal(err)
	}
	cfgData, _ := os.ReadFile(filepath.Join(good, AdapterConfigFile))
	st, _, err := safetensors.Read(filepath.Join(good, AdapterWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		config func(map[string]any)
		edit   func(map[string]safetensors.Tensor)
		want   string
	}{
		{name: "dora", config: func(c map[string]any) { c["use_dora"] = true }, want: "use_dora"},
		{name: "bias", config: func(c map[string]any) { c["bias"] = "lora_only" }, want: "bias"},
		{name: "modules_to_save", config: func(c map[string]any) { c["modules_to_save"] = []string{"lm_head"} }, want: "modules_to_save"},
		{name: "rank_pattern", config: func(c map[string]any) { c["rank_pattern"] = map[string]int{"q_proj": 4} }, want: "rank_pattern"},
		{name: "peft_type", config: func(c map[string]any) { c["peft_type"] = "IA3" }, want: "peft_type"},
		{name: "rank", config: func(c map[string]any) { c["r"] = 0 }, want: "rank 0"},
		{name: "targets", config: func(c map[string]any) { c["target_modules"] = 7 }, want: "target_modules"},
		{name: "fewer targets", config: func(c map[string]any) { c["target_modules"] = []string{"q_proj"} }, want: "is not one of this adapter's"},
		{name: "more targets", config: func(c map[string]any) { c["target_modules"] = []string{"q_proj", "v_proj", "o_proj"} }, want: "missing"},
		{name: "wrong rank", config: func(c map[string]any) { c["r"] = 3 }, want: "shape"},
		{name: "extra tensor", edit: func(s map[string]safetensors.Tensor) {
			s["base_model.model.lm_head.weight"] = safetensors.FromFloat32([]int{1}, []float32{1})
		}, want: `"base_model.model.lm_head.weight" is of lm_head, outside the blocks`},
		{name: "extra block tensor", edit: func(s map[string]safetensors.Tensor) {
			s["base_model.model.model.layers.0.mlp.up_proj.lora_A.weight"] = safetensors.FromFloat32([]int{2, 16}, make([]float32, 32))
		}, want: `"base_model.model.model.layers.0.mlp.up_proj.lora_A.weight" is not one of this adapter's`},
		{name: "missing B", edit: func(s map[string]safetensors.Tensor) {
			delete(s, "base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight")
		}, want: "lora_B.weight\" is missing"},
		{name: "NaN", edit: func(s map[string]safetensors.Tensor) {
			s["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"] = safetensors.FromFloat32([]int{2, 16}, append([]float32{float32(math.NaN())}, make([]float32, 31)...))
		}, want: "finite"},
	} {
		dir := t.TempDir()
		var cfg map[string]any
		if err := json.Unmarshal(cfgData, &cfg); err != nil {
			t.Fatal(err)
		}
		if c.config != nil {
			c.config(cfg)
		}
		data, _ := json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(dir, AdapterConfigFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		tensors := maps.Clone(st)
		if c.edit != nil {
			c.edit(tensors)
		}
		if err := safetensors.Write(filepath.Join(dir, AdapterWeightsFile), tensors, nil); err != nil {
			t.Fatal(err)
		}
		err := newTiny(t, "llama-gqa", 1).LoadAdapters(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: LoadAdapters: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// A clone of an adapted model carries its own copy of the adapters, on
// either engine: it scores what the model does, and training one leaves
// the other as it was.
func TestLoRACloneCopiesAdapters(t *testing.T) {
	ctx := context.Background()
	seqs, w := loraSeqs()
	for _, engine := range []Engine{EngineNative, EngineGraph} {
		m := newTiny(t, "llama-gqa", 17)
		m.SetEngine(engine)
		if err := m.AddLoRA(LoRA{Rank: 2, Alpha: 4, Targets: []string{AllLinear}}, 8); err != nil {
			t.Fatal(err)
		}
		randomizeB(m, 18)
		want, err := m.Score(ctx, seqs, false) // the graph engine moves the adapters to tensors
		if err != nil {
			t.Fatal(err)
		}
		c, err := m.Clone()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.LoRA(); !ok {
			t.Fatalf("%s: the clone has no adapters", engine)
		}
		tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 0.05})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Apply(ctx, 0); err != nil {
			t.Fatal(err)
		}
		got, err := c.Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		for i := range seqs {
			if !slices.Equal(got.LogProbs[i], want.LogProbs[i]) {
				t.Fatalf("%s: the clone scores %v, the model before its step %v", engine, got.LogProbs[i], want.LogProbs[i])
			}
		}
	}
}
