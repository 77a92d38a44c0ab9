package model

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hacrl/hacrl/safetensors"
)

// roundWeights rounds m's product weights (roundedToBF16) to bfloat16 in
// place with the checkpoint writer's rounding and returns how many values
// it rounded.
func roundWeights(m *Model) (rounded int) {
	for j, s := range m.specs {
		if !roundedToBF16(s.name) {
			continue
		}
		v := m.paramValues(j)
		for k, x := range v {
			v[k] = float64(safetensors.BFloat16ToFloat32(safetensors.Float32ToBFloat16(float32(x))))
		}
		m.setParamValues(j, v)
		rounded += len(v)
	}
	return rounded
}

// A model sampling with bfloat16 weights samples exactly what a float32
// copy of it whose product weights were rounded to bfloat16 samples —
// tokens and their log-probs — before and after training steps (the copy
// is made again after each update), while its Score stays the float32
// model's; and the gap between its samples' log-probs and Score's is that
// of the rounding, small and not zero.
func TestSampleBF16MatchesRoundedWeights(t *testing.T) {
	ctx := context.Background()
	seqs, w := loraSeqs()
	prompts := [][]int{{3, 1, 4}, {6}, {2, 7, 1, 8, 2}, {5, 5}}
	for _, name := range []string{"llama-gqa", "gpt-gelu", "llama3-rope", "llama-bias"} { // untied heads: the head is a product weight
		t.Run(name, func(t *testing.T) {
			m := newTiny(t, name, 7)
			m.SetEngine(EngineNative)
			plain, err := m.Clone()
			if err != nil {
				t.Fatal(err)
			}
			if err := m.SetSampleDType(WeightsBFloat16); err != nil {
				t.Fatal(err)
			}
			tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 1e-2})
			if err != nil {
				t.Fatal(err)
			}
			trPlain, err := NewTrainer(plain, OptimizerConfig{LearningRate: 1e-2})
			if err != nil {
				t.Fatal(err)
			}
			for step := range 3 {
				rounded, err := m.Clone()
				if err != nil {
					t.Fatal(err)
				}
				if err := rounded.SetSampleDType(WeightsFloat32); err != nil {
					t.Fatal(err)
				}
				roundWeights(rounded)
				opt := SampleOptions{MaxNewTokens: 8, Temperature: 1}
				got, err := m.Generate(ctx, prompts, opt, rand.New(rand.NewPCG(uint64(step), 3)))
				if err != nil {
					t.Fatal(err)
				}
				want, err := rounded.Generate(ctx, prompts, opt, rand.New(rand.NewPCG(uint64(step), 3)))
				if err != nil {
					t.Fatal(err)
				}
				for i := range prompts {
					if !slices.Equal(got[i].Tokens, want[i].Tokens) {
						t.Fatalf("step %d: sample %d = %v, float32 model with rounded weights %v", step, i, got[i].Tokens, want[i].Tokens)
					}
					sameFloats(t, "sample log-probs", got[i].LogProbs, want[i].LogProbs)
				}
				// Score is the float32 model's: the same as a model never set
				// to sample in bfloat16, trained alike.
				sc, err := m.Score(ctx, seqs, false)
				if err != nil {
					t.Fatal(err)
				}
				scPlain, err := plain.Score(ctx, seqs, false)
				if err != nil {
					t.Fatal(err)
				}
				for i := range seqs {
					sameFloats(t, "Score log-probs", sc.LogProbs[i], scPlain.LogProbs[i])
				}
				// The samples' own log-probs against Score's.
				sampled := make([]Sequence, len(prompts))
				for i, p := range prompts {
					sampled[i] = Sequence{Prompt: p, Response: got[i].Tokens}
				}
				own, err := m.Score(ctx, sampled, false)
				if err != nil {
					t.Fatal(err)
				}
				var gap float64
				var n int
				for i := range sampled {
					for j, v := range own.LogProbs[i] {
						d := float64(v - got[i].LogProbs[j])
						gap += max(d, -d)
						n++
					}
				}
				if gap /= float64(n); gap == 0 || gap > 0.05 {
					t.Errorf("step %d: mean |log-prob gap| between bfloat16 samples and Score %g, want small and > 0", step, gap)
				}
				for i, tr := range []*Trainer{tr, trPlain} {
					if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
						t.Fatal(err)
					}
					if _, err := tr.Apply(ctx, 0); err != nil {
						t.Fatalf("trainer %d: %v", i, err)
					}
				}
			}
		})
	}
}

func TestSampleDTypeRefused(t *testing.T) {
	m := newTiny(t, "llama-gqa", 7)
	m.SetEngine(EngineGraph)
	if err := m.SetSampleDType(WeightsBFloat16); err == nil {
		t.Error("bfloat16 sampling on the graph engine: no error")
	}
	m.SetEngine(EngineNative)
	if err := m.SetSampleDType("float16"); err == nil {
		t.Error("sample dtype float16: no error")
	}
}
