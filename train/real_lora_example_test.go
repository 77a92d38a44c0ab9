package train

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/internal/hfstandin"
	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/model"
)

// realLoRAExample is the LoRA config of examples/real.
const realLoRAExample = "../examples/real/qwen3-1.7b-llama32-math-lora.yaml"

// TestRealLoRAExample runs examples/real's LoRA config end to end on
// random-weight stand-ins (hfstandin: Qwen3-0.6B's architecture for
// Qwen3-1.7B — the same qwen3 family, head_dim and q/k norms — and
// Llama-3.2-1B-Instruct's), changing only sizes and the training reward as
// TestRealExample does: both agents train rank-16 adapters on their
// bfloat16 checkpoints, and OUT/final/<agent> is a PEFT adapter directory
// naming the checkpoint that hacrl eval's loader (LoadSaved) reads back as
// the trained agent.
func TestRealLoRAExample(t *testing.T) {
	npmDir := npmtest.Dir(t)
	b, err := backend.New(backend.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(realLoRAExample)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	standins := map[string]struct{ model, tok, published string }{
		"qwen3-1.7b":           {hfstandin.Qwen3_0_6B, "qwen3", "models/Qwen3-1.7B"},
		"llama3.2-1b-instruct": {hfstandin.Llama3_2_1BInstruct, "llama3", "models/Llama-3.2-1B-Instruct"},
	}
	if len(cfg.Agents) != 2 {
		t.Fatalf("%s: %d agents, want 2", realLoRAExample, len(cfg.Agents))
	}
	for i := range cfg.Agents {
		a := &cfg.Agents[i]
		s, ok := standins[a.Name]
		if !ok {
			t.Fatalf("%s: unexpected agent %q", realLoRAExample, a.Name)
		}
		if want := (&config.LoRA{Rank: 16, Alpha: 32, TargetModules: config.Modules{config.AllLinear}}); a.Checkpoint != s.published || !reflect.DeepEqual(a.LoRA, want) {
			t.Errorf("%s: agent %s: checkpoint %s, lora %+v; want %s and %+v", realLoRAExample, a.Name, a.Checkpoint, a.LoRA, s.published, want)
		}
		a.Checkpoint = filepath.Join(tmp, s.model)
		if err := hfstandin.Write(b, a.Checkpoint, npmtest.Model(npmDir, s.tok), hfstandin.Small(s.model, int64(i+1))); err != nil {
			t.Fatal(err)
		}
		a.Sampling.MaxNewTokens = 8
		a.Optimizer.LR = 1e-2 // random stand-ins: a visible change in one step
	}
	cfg.Out = filepath.Join(tmp, "out")
	cfg.Steps = 1
	cfg.Batch.PromptsPerStep, cfg.Batch.ResponsesPerPrompt = 2, 2
	cfg.Batch.MiniBatch, cfg.Batch.MicroBatch = 2, 2
	cfg.Eval.Sets = nil
	cfg.Reward = &config.Reward{Command: []string{pythonPath(t), "testdata/logreward.py", filepath.Join(tmp, "reward.log")},
		Timeout: "60s", StartTimeout: "2m"}
	run, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	seqs := []model.Sequence{{Prompt: []int{9, 8, 7, 6}, Response: []int{5, 4, 3}}}
	for i, a := range run.Agents() {
		final := filepath.Join(cfg.Out, "final", a.Name)
		_, base, err := model.ReadAdapterConfig(final)
		if err != nil {
			t.Fatal(err)
		}
		if base != cfg.Agents[i].Checkpoint {
			t.Errorf("%s: base_model_name_or_path %q, want %q", a.Name, base, cfg.Agents[i].Checkpoint)
		}
		s, err := LoadSaved(final, TemplateChoice{})
		if err != nil {
			t.Fatal(err)
		}
		back, err := s.Agent(b)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := back.Model.Score(context.Background(), seqs, false)
		want, _ := a.Model.Score(context.Background(), seqs, false)
		ref, _ := a.Model.Base().Score(context.Background(), seqs, false)
		if !reflect.DeepEqual(got, want) || reflect.DeepEqual(want, ref) || back.Template.Kind != a.Template.Kind {
			t.Errorf("%s: the final adapter on its base scores %v, the trained agent %v (base %v); template %s, want %s",
				a.Name, got.LogProbs, want.LogProbs, ref.LogProbs, back.Template.Kind, a.Template.Kind)
		}
	}
}
