package model

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hacrl/hacrl/internal/pyenv"
)

// Every llama-family tiny config (Qwen3's head_dim and q/k norms, Llama 3's
// rotary scaling, Qwen2's biases, grouped-query attention), saved in the
// Hugging Face layout with weights well off their initial values, gives
// the same per-token log-probs on both engines as an independent PyTorch
// reading of the saved config.json and model.safetensors
// (bench/torch/hf_logprobs.py).
func TestMatchesPyTorch(t *testing.T) {
	python := pyenv.Python(t)
	script, err := filepath.Abs(filepath.Join("..", "bench", "torch", "hf_logprobs.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(41, 41))
	var seqs [][]int
	for _, n := range []int{12, 5, 2, 30} {
		seqs = append(seqs, randomTokens(rng, n, 16))
	}
	input, err := json.Marshal(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range tinyConfigs {
		if cfg.Family != "llama" {
			continue
		}
		m := newTiny(t, name, 41)
		for i := range m.specs {
			v := m.paramValues(i)
			for j := range v {
				v[j] += 0.25 * rng.NormFloat64()
			}
			m.setParamValues(i, v)
		}
		dir := t.TempDir()
		if err := m.Save(dir); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(python, script, dir)
		cmd.Stdin = bytes.NewReader(input)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %s: %v\n%s", name, script, err, stderr.String())
		}
		var ref struct{ LogProbs [][]float64 }
		if err := json.Unmarshal(out, &ref); err != nil || len(ref.LogProbs) != len(seqs) {
			t.Fatalf("%s: PyTorch output %q: %v", name, out, err)
		}
		batch := make([]Sequence, len(seqs))
		for i, x := range seqs {
			batch[i] = Sequence{Prompt: x[:1], Response: x[1:]}
		}
		for _, e := range []Engine{EngineNative, EngineGraph} {
			m.SetEngine(e)
			got, err := m.Score(ctx, batch, false)
			if err != nil {
				t.Fatal(err)
			}
			for i := range seqs {
				if len(got.LogProbs[i]) != len(ref.LogProbs[i]) {
					t.Fatalf("%s %s: sequence %d: %d log-probs, PyTorch %d", name, e, i, len(got.LogProbs[i]), len(ref.LogProbs[i]))
				}
				for j, lp := range got.LogProbs[i] {
					if d := math.Abs(float64(lp) - ref.LogProbs[i][j]); d > 1e-4 {
						t.Errorf("%s %s: sequence %d token %d: log-prob %v, PyTorch %v", name, e, i, j+1, lp, ref.LogProbs[i][j])
					}
				}
			}
		}
	}
}
