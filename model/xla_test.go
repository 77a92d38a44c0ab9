//go:build xla

package model

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/internal/xlatest"
)

// The graph engine on XLA (here XLA's CPU client, the compiler and runtime
// hacrl's GPU path uses) is held to the native engine on the four families
// users train — GPT-2 (its gelu_new, which XLA computes unfused where the Go
// backend has a fused op), Llama 3 (its rotary scaling), Qwen2 and Qwen3 —
// as the Go backend's graphs are, but with log-probs within 1e-5.
var xlaModels = []string{"gpt-tanh", "llama3-rope", "qwen2-tied", "qwen3-gqa"}

const xlaLogProbTol = 1e-5

func TestXLAEnginesAgree(t *testing.T) {
	b := xlatest.Backend(t)
	for _, name := range xlaModels {
		checkEnginesAgree(t, newTinyOn(t, b, name, 13), name, xlaLogProbTol)
	}
}

func TestXLAGradientsMatchNative(t *testing.T) {
	b := xlatest.Backend(t)
	for _, name := range xlaModels {
		checkGradientsMatch(t, newTinyOn(t, b, name, 17), name, xlaLogProbTol)
	}
}

// So is the gradient with an entropy term (AccumulateEntropy), here of
// adapters: the term changes only the LM head's gradient, whose path below
// the head the check above covers for every family, and the Go backend's
// graphs are held to the native engine for full models too
// (TestEntropyGradientsMatchGraph); one model keeps the XLA step short.
func TestXLAEntropyGradientsMatchNative(t *testing.T) {
	b := xlatest.Backend(t)
	checkEntropyGradients(t, newTinyOn(t, b, "gpt-tanh", 21), "gpt-tanh", []string{AllLinear}, xlaLogProbTol)
}

// Training steps (AdamW, clipping, weight decay: the optimizer's graphs)
// end at the native engine's weights; two families keep the suite short,
// the gradients of all four are checked above.
func TestXLATrainAlike(t *testing.T) {
	b := xlatest.Backend(t)
	for _, name := range []string{"gpt-gelu", "qwen3-gqa"} {
		checkTrainAlike(t, b, name)
	}
}

func TestXLALoRA(t *testing.T) {
	b := xlatest.Backend(t)
	for _, c := range []struct {
		model   string
		targets []string
	}{
		{"qwen3-gqa", []string{AllLinear}},
		{"qwen2-tied", []string{"k_proj", "o_proj", "gate_proj", "down_proj"}},
		{"llama3-rope", []string{"self_attn.v_proj", "mlp.down_proj"}},
		{"gpt-tanh", []string{AllLinear}},
	} {
		checkLoRAEnginesAgree(t, newTinyOn(t, b, c.model, 19), c.model, c.targets, xlaLogProbTol)
		checkLoRAGradients(t, newTinyOn(t, b, c.model, 21), c.model, c.targets, xlaLogProbTol)
	}
}

// A model trained on XLA's graphs saves the checkpoint, optimizer state and
// adapters the Go backend's native engine loads: the same weights bit for
// bit, and the same log-probs. Each family once, two of them with adapters.
func TestXLACheckpoint(t *testing.T) {
	ctx := context.Background()
	xb := xlatest.Backend(t)
	gob := testBackend(t)
	seqs, w := loraSeqs()
	for i, name := range xlaModels {
		lora := i%2 == 1
		m := newTinyOn(t, xb, name, 29)
		if lora {
			if err := m.AddLoRA(LoRA{Rank: 2, Alpha: 4, Targets: []string{AllLinear}}, 30); err != nil {
				t.Fatal(err)
			}
		}
		m.SetEngine(EngineGraph)
		tr, err := NewTrainer(m, OptimizerConfig{LearningRate: 1e-2})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Apply(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
		dir := t.TempDir()
		base, adapters := filepath.Join(dir, "model"), filepath.Join(dir, "adapter")
		if err := m.SaveWith(base, SaveOptions{DType: "float32"}); err != nil {
			t.Fatal(err)
		}
		if err := tr.SaveState(base); err != nil {
			t.Fatal(err)
		}
		if lora {
			if err := m.SaveAdapters(adapters, base); err != nil {
				t.Fatal(err)
			}
		}
		want, err := m.Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}

		got, err := Load(gob, base)
		if err != nil {
			t.Fatal(err)
		}
		sameBits(t, name+" on the Go backend", m, got)
		if lora {
			if err := got.LoadAdapters(adapters); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(adapterValues(m), adapterValues(got)) {
				t.Fatalf("%s: adapters saved from XLA load with other values", name)
			}
		}
		gotTr, err := NewTrainer(got, OptimizerConfig{LearningRate: 1e-2})
		if err != nil {
			t.Fatal(err)
		}
		if err := gotTr.LoadState(base); err != nil {
			t.Fatal(err)
		}
		if gotTr.Step() != 2 {
			t.Errorf("%s: resumed at step %d, want 2", name, gotTr.Step())
		}
		got.SetEngine(EngineNative)
		scores, err := got.Score(ctx, seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		checkLogProbsWithin(t, name+" saved from XLA, scored natively", [2][][]float32{scores.LogProbs, want.LogProbs}, xlaLogProbTol)
	}
}

// The backend in use is XLA's, not the Go backend's.
func TestXLABackendIsXLA(t *testing.T) {
	b := xlatest.Backend(t)
	if b.Name() != "xla" {
		t.Fatalf("backend %q, want xla", b.Name())
	}
	if gob, _ := backend.New(backend.Sequential); gob == b {
		t.Fatal("xla:cpu and the Go backend are one backend")
	}
}
