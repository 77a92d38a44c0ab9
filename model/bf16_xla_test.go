//go:build xla

package model

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"

	"github.com/hacrl/hacrl/internal/xlatest"
)

// bf16Models are the families the bfloat16 checks run on: GPT-2, Llama 3
// and Qwen3 (q/k norms, grouped-query attention).
var bf16Models = []string{"gpt-tanh", "llama3-rope", "qwen3-gqa"}

// bf16Seqs are ragged sequences and per-token weights for the checks.
func bf16Seqs() ([]Sequence, [][]float32) {
	return raggedSeqs(rand.New(rand.NewPCG(41, 1)), 4, 2, 2, 3, 3)
}

// bf16Comparison scores and differentiates model name (on backend b, graph
// engine, with adapters lora unless nil: then the gradient is the
// adapters') in float32 and in bfloat16 and returns the largest log-prob
// difference, the gradients' relative error ‖g₁₆ − g₃₂‖/‖g₃₂‖ and their
// cosine similarity.
func bf16Comparison(t *testing.T, b compute.Backend, name string, lora *LoRA) (lpDiff, gradErr, cosine float64) {
	t.Helper()
	ctx := context.Background()
	seqs, w := bf16Seqs()
	var lps [2][][]float32
	var grads [2][][]float64
	for i, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		m := newTinyOn(t, b, name, 43)
		m.SetEngine(EngineGraph)
		if lora != nil {
			if err := m.AddLoRA(*lora, 44); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.SetComputeDType(dt); err != nil {
			t.Fatal(err)
		}
		tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 1e-3})
		if err != nil {
			t.Fatal(err)
		}
		if lps[i], err = tr.Accumulate(ctx, seqs, w); err != nil {
			t.Fatal(err)
		}
		grads[i] = tr.accumulated()
	}
	for r := range lps[0] {
		for j := range lps[0][r] {
			lpDiff = math.Max(lpDiff, math.Abs(float64(lps[1][r][j]-lps[0][r][j])))
		}
	}
	var dot, n32, n16, diff float64
	for i := range grads[0] {
		for j, g := range grads[0][i] {
			h := grads[1][i][j]
			dot, n32, n16, diff = dot+g*h, n32+g*g, n16+h*h, diff+(g-h)*(g-h)
		}
	}
	return lpDiff, math.Sqrt(diff / n32), dot / math.Sqrt(n32*n16)
}

// bf16LogProbTol bounds how far bfloat16 products move a log-prob of the
// tiny models: each product rounds its operands and its result to 8
// significant bits (relative error up to 2⁻⁹ ≈ 0.002), so a logit moves by
// a few 0.002 of the magnitudes it sums, and the tiny models' logits are
// below 1: log-probs move by a few 1e-4 (measured on XLA: 4e-4 to 8e-4;
// the gradients' relative error 0.003). A model that silently kept float32
// products (1e-7 apart) would pass the bound but fail bf16MinEffect.
const (
	bf16LogProbTol = 5e-3
	bf16MinEffect  = 1e-5
	bf16GradTol    = 2e-2 // relative error of the whole gradient
)

// checkBF16 holds bfloat16 to float32 on backend b within bfloat16's
// precision, and checks that it is bfloat16 that ran.
func checkBF16(t *testing.T, b compute.Backend) {
	t.Helper()
	type run struct {
		name string
		lora *LoRA
	}
	runs := []run{{"qwen3-gqa", &LoRA{Rank: 2, Alpha: 4, Targets: []string{AllLinear}}}}
	for _, name := range bf16Models {
		runs = append(runs, run{name, nil})
	}
	for _, r := range runs {
		name := r.name
		if r.lora != nil {
			name += " with LoRA"
		}
		lpDiff, gradErr, cosine := bf16Comparison(t, b, r.name, r.lora)
		t.Logf("%s on %s: bf16 log-probs within %.2g of float32's; gradient relative error %.3g, cosine %.6f", name, b.Name(), lpDiff, gradErr, cosine)
		if lpDiff > bf16LogProbTol {
			t.Errorf("%s: bf16 log-probs differ from float32's by %.3g, more than %g", name, lpDiff, bf16LogProbTol)
		}
		if lpDiff < bf16MinEffect {
			t.Errorf("%s: bf16 log-probs within %.3g of float32's: the products did not run in bfloat16", name, lpDiff)
		}
		if gradErr > bf16GradTol || cosine < 0.999 {
			t.Errorf("%s: bf16 gradient relative error %.3g (cosine %.6f), want at most %g (cosine ≥ 0.999)", name, gradErr, cosine, bf16GradTol)
		}
	}
}

func TestXLABF16AgreesWithFloat32(t *testing.T) {
	checkBF16(t, xlatest.Backend(t))
}

// On XLA, training in bfloat16 keeps float32 parameters, gradient
// accumulator and AdamW moments, and learns as float32 does.
func TestXLABF16TrainingKeepsFloat32State(t *testing.T) {
	b := xlatest.Backend(t)
	ctx := context.Background()
	seqs, _ := bf16Seqs()
	// Raise every response token's log-prob: Apply descends on Σ w·log p, so w = −1.
	w := make([][]float32, len(seqs))
	for i, s := range seqs {
		w[i] = make([]float32, len(s.Response))
		for j := range w[i] {
			w[i][j] = -1
		}
	}
	for _, name := range []string{"gpt-tanh", "qwen3-gqa"} { // two families keep the suite short
		var gain [2]float64
		for i, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
			m := newTinyOn(t, b, name, 47)
			if err := m.SetComputeDType(dt); err != nil {
				t.Fatal(err)
			}
			if got := m.EngineName(); got != string(EngineGraph) {
				t.Fatalf("%s in %s: engine %s, want graph", name, dt, got)
			}
			tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 1e-2})
			if err != nil {
				t.Fatal(err)
			}
			var first, last float64
			for step := range 3 {
				lps, err := tr.Accumulate(ctx, seqs, w)
				if err != nil {
					t.Fatal(err)
				}
				sum := 0.0
				for _, r := range lps {
					for _, x := range r {
						sum += float64(x)
					}
				}
				if step == 0 {
					first = sum
					if len(tr.acc) != len(m.params) {
						t.Fatalf("%s in %s: %d accumulated gradients on the backend, want %d", name, dt, len(tr.acc), len(m.params))
					}
					for j, g := range tr.acc {
						if g.DType() != dtypes.Float32 {
							t.Errorf("%s in %s: accumulated gradient of %s is %s, want float32", name, dt, m.specs[j].name, g.DType())
						}
					}
				}
				last = sum
				if _, err := tr.Apply(ctx, 0); err != nil {
					t.Fatal(err)
				}
			}
			gain[i] = last - first
			for j, p := range m.params {
				if p.DType() != dtypes.Float32 {
					t.Errorf("%s in %s: parameter %s is %s, want float32", name, dt, m.specs[j].name, p.DType())
				}
			}
			mom, vel := tr.graphMoments()
			for j := range mom {
				if mom[j].DType() != dtypes.Float32 || vel[j].DType() != dtypes.Float32 {
					t.Errorf("%s in %s: AdamW moments of %s are %s and %s, want float32", name, dt, m.specs[j].name, mom[j].DType(), vel[j].DType())
				}
			}
		}
		t.Logf("%s: 3 steps raised Σ log p by %.4f in float32, %.4f in bf16", name, gain[0], gain[1])
		if gain[1] <= 0 || math.Abs(gain[1]-gain[0]) > 0.1*gain[0] {
			t.Errorf("%s: 3 steps raised Σ log p by %.4f in bf16, %.4f in float32: want a gain within 10%% of float32's", name, gain[1], gain[0])
		}
	}
}

// On XLA, decoding in bfloat16 (left-padded prompts, the KV cache, the
// decomposed attention) reports log-probs of the tokens it draws within
// bfloat16's precision of what the float32 model scores them.
func TestXLABF16GenerateAgreesWithFloat32(t *testing.T) {
	b := xlatest.Backend(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(53, 1))
	prompts := [][]int{randomTokens(rng, 3, 16), randomTokens(rng, 9, 16), randomTokens(rng, 5, 16)}
	for _, name := range bf16Models {
		m16 := newTinyOn(t, b, name, 59)
		if err := m16.SetComputeDType(dtypes.BFloat16); err != nil {
			t.Fatal(err)
		}
		samples, err := m16.Generate(ctx, prompts, SampleOptions{MaxNewTokens: 6, Temperature: 1}, rand.New(rand.NewPCG(61, 1)))
		if err != nil {
			t.Fatal(err)
		}
		m32 := newTinyOn(t, b, name, 59)
		m32.SetEngine(EngineGraph)
		seqs := make([]Sequence, len(prompts))
		for i, s := range samples {
			seqs[i] = Sequence{Prompt: prompts[i], Response: s.Tokens}
		}
		sc, err := m32.Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		diff := 0.0
		for i, s := range samples {
			for j, lp := range s.LogProbs {
				diff = math.Max(diff, math.Abs(float64(lp-sc.LogProbs[i][j])))
			}
		}
		t.Logf("%s: bf16 decoding's log-probs within %.2g of float32's scores", name, diff)
		if diff > bf16LogProbTol || diff < bf16MinEffect {
			t.Errorf("%s: bf16 decoding's log-probs within %.3g of float32's scores, want between %g and %g", name, diff, bf16MinEffect, bf16LogProbTol)
		}
	}
}

// XLA's CPU plugin offers no fused attention: a bfloat16 scoring or
// training pass whose heads cuDNN would take (64 wide) keeps the
// decomposed attention there, as on the Go backend (TestFusedAttentionChoice).
func TestXLACPUKeepsDecomposedAttention(t *testing.T) {
	caps := xlatest.Backend(t).Capabilities()
	if caps.Operations[compute.OpTypeFusedScaledDotProductAttention] {
		t.Fatalf("xla:cpu offers fused attention; the bfloat16 checks would no longer cover the decomposed path alone")
	}
	t.Setenv(FusedAttentionEnv, "")
	n := &net{bf16: true}
	if use, vjp := n.fusedAttention(caps, &attention{causal: true}, 64); use || vjp {
		t.Errorf("xla:cpu: fused attention %v, VJP %v; want the decomposed attention", use, vjp)
	}
}
