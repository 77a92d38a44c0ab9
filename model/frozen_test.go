package model

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// roundedToBF16 reports whether a tiny model's parameter is one of the
// weights a bfloat16 base holds in bfloat16: the projections of every
// layer and an untied LM head, not embeddings, norms or biases.
func roundedToBF16(name string) bool {
	for _, s := range []string{"_proj.weight", ".c_attn.weight", ".c_fc.weight", ".c_proj.weight"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return name == "lm_head.weight"
}

// loraPair returns two copies of a tiny model with the same random
// adapters: one whose base is held in bfloat16 (SetFrozenDType), and one in
// float32 whose base weights were rounded to bfloat16 beforehand with the
// checkpoint writer's rounding (safetensors.Float32ToBFloat16), and how
// many values were rounded.
func loraPair(t *testing.T, name string, targets []string) (bf, ref *Model, rounded int) {
	t.Helper()
	for i := range 2 {
		m := newTiny(t, name, 7)
		m.SetEngine(EngineNative)
		if i == 1 {
			rounded = roundWeights(m)
		}
		if err := m.AddLoRA(LoRA{Rank: 2, Alpha: 4, Targets: targets}, 3); err != nil {
			t.Fatal(err)
		}
		randomizeB(m, 9)
		if i == 0 {
			if err := m.SetFrozenDType(WeightsBFloat16); err != nil {
				t.Fatal(err)
			}
			bf = m
		} else {
			ref = m
		}
	}
	return bf, ref, rounded
}

// sameFloats fails the test unless a and b hold the same bits.
func sameFloats[F float32 | float64](t *testing.T, what string, a, b []F) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values, want %d", what, len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(float64(a[i])) && math.IsNaN(float64(b[i]))) {
			t.Fatalf("%s[%d] = %v, float32 model with a rounded base: %v", what, i, a[i], b[i])
		}
	}
}

// A LoRA model whose frozen base is held in bfloat16 computes exactly what
// a float32 model whose base weights were rounded to bfloat16 first
// computes: the same log-probs and entropies, samples, KL-reference
// (Base) log-probs, and the same adapters after training steps; its
// weights take 2 bytes per rounded value instead of 4.
func TestFrozenBF16MatchesRoundedBase(t *testing.T) {
	ctx := context.Background()
	seqs, w := loraSeqs()
	prompts := [][]int{{3, 1, 4}, {6}, {2, 7, 1, 8, 2}}
	for _, c := range loraCases {
		t.Run(c.model+"/"+strings.Join(c.targets, ","), func(t *testing.T) {
			bf, ref, rounded := loraPair(t, c.model, c.targets)
			if bf.FrozenDType() != WeightsBFloat16 || ref.FrozenDType() != WeightsFloat32 || bf.Base().FrozenDType() != WeightsBFloat16 {
				t.Fatalf("FrozenDType: %s and %s (base %s)", bf.FrozenDType(), ref.FrozenDType(), bf.Base().FrozenDType())
			}
			if saved := ref.WeightBytes() - bf.WeightBytes(); rounded == 0 || saved != 2*int64(rounded) {
				t.Errorf("WeightBytes %d (bfloat16 base) and %d (float32): %d bytes saved for %d rounded weights, want 2 each",
					bf.WeightBytes(), ref.WeightBytes(), saved, rounded)
			}
			trainers := [2]*Trainer{}
			for i, m := range []*Model{bf, ref} {
				tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 5e-3, WeightDecay: 0.1})
				if err != nil {
					t.Fatal(err)
				}
				trainers[i] = tr
			}
			for step := range 3 {
				var sc [2]Scores
				var base [2]Scores
				var samples [2][]Sample
				var lps [2][][]float32
				for i, m := range []*Model{bf, ref} {
					var err error
					if sc[i], err = m.Score(ctx, seqs, true); err != nil {
						t.Fatal(err)
					}
					if base[i], err = m.Base().Score(ctx, seqs, false); err != nil {
						t.Fatal(err)
					}
					opt := SampleOptions{MaxNewTokens: 6, Temperature: 1}
					if samples[i], err = m.Generate(ctx, prompts, opt, rand.New(rand.NewPCG(uint64(step), 1))); err != nil {
						t.Fatal(err)
					}
					if lps[i], err = trainers[i].Accumulate(ctx, seqs, w); err != nil {
						t.Fatal(err)
					}
					if _, err := trainers[i].Apply(ctx, 0); err != nil {
						t.Fatal(err)
					}
				}
				for j := range seqs {
					sameFloats(t, "log-probs", sc[0].LogProbs[j], sc[1].LogProbs[j])
					sameFloats(t, "entropies", sc[0].Entropy[j], sc[1].Entropy[j])
					sameFloats(t, "Base log-probs", base[0].LogProbs[j], base[1].LogProbs[j])
					sameFloats(t, "training log-probs", lps[0][j], lps[1][j])
				}
				for j := range prompts {
					if !slices.Equal(samples[0][j].Tokens, samples[1][j].Tokens) {
						t.Fatalf("step %d: sample %d = %v, float32 model with a rounded base: %v", step, j, samples[0][j].Tokens, samples[1][j].Tokens)
					}
					sameFloats(t, "sample log-probs", samples[0][j].LogProbs, samples[1][j].LogProbs)
				}
				sameFloats(t, "adapters after a step", adapterValues(bf), adapterValues(ref))
			}
		})
	}
}

// A bfloat16 base saves as held (its rounded values, exactly, in float32
// files): loaded back it is the float32 model with the rounded base.
func TestFrozenBF16Save(t *testing.T) {
	bf, ref, _ := loraPair(t, "llama-gqa", []string{AllLinear})
	dir := filepath.Join(t.TempDir(), "base")
	if err := bf.Base().Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range ref.specs {
		sameFloats(t, s.name, back.paramValues(i), ref.paramValues(i))
		sameFloats(t, s.name+" (paramValues)", bf.paramValues(i), ref.paramValues(i))
	}
}

// SetFrozenDType refuses what it cannot do, saying why.
func TestFrozenDTypeRefused(t *testing.T) {
	plain := newTiny(t, "llama-gqa", 7)
	plain.SetEngine(EngineNative)
	graph := newTiny(t, "llama-gqa", 7)
	graph.SetEngine(EngineGraph)
	if err := graph.AddLoRA(LoRA{Rank: 2, Alpha: 4, Targets: []string{AllLinear}}, 3); err != nil {
		t.Fatal(err)
	}
	bf, _, _ := loraPair(t, "llama-gqa", []string{AllLinear})
	_, mergeErr := bf.Clone()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no adapters", plain.SetFrozenDType(WeightsBFloat16), "needs a model with LoRA adapters"},
		{"graph engine", graph.SetFrozenDType(WeightsBFloat16), "native engine"},
		{"unknown dtype", bf.SetFrozenDType("float16"), `"float16"`},
		{"back to float32", bf.SetFrozenDType(WeightsFloat32), "rounded to bfloat16 already"},
		{"merge", bf.MergeLoRA(), "bfloat16"},
		{"clone", mergeErr, ""},
	} {
		switch {
		case tc.want == "" && tc.err != nil:
			t.Errorf("%s: %v", tc.name, tc.err)
		case tc.want != "" && (tc.err == nil || !strings.Contains(tc.err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, tc.err, tc.want)
		}
	}
	// A copy of the bfloat16 base without adapters cannot be trained.
	c, err := bf.Base().Clone()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewTrainer(c, OptimizerConfig{LearningRate: 1e-3}); err == nil || !strings.Contains(err.Error(), "bfloat16") {
		t.Errorf("NewTrainer on a bfloat16 base without adapters: %v, want a refusal", err)
	}
}
