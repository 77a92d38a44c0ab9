package train

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/model"
)

// loraTinyConfig is a short HACPO run of the example agents (warm-started,
// so that rewards and gradients are not all zero) with LoRA adapters on two
// of them — gpt-char's every linear layer; llama-bpe's attention queries
// and values and MLP down projection, rank-stabilised — while the third
// trains all its weights.
func loraTinyConfig(t *testing.T, dir string, steps int) *config.Config {
	t.Helper()
	src := fmt.Sprintf(`
seed: 5
out: %s
steps: %d
method: {name: hacpo}           # has a KL term: a LoRA agent's reference is its base
task: {name: arith, digits: 2, operators: "+-"}
batch: {prompts_per_step: 4, responses_per_prompt: 4, mini_batch: 16, micro_batch: 8}
agents:
  - name: gpt-char
    checkpoint: ../examples/agents/gpt-char
    lora: {rank: 4}
    optimizer: {lr: 0.003}
    sampling: {max_new_tokens: 24}
  - name: llama-bpe
    checkpoint: ../examples/agents/llama-bpe
    template: {kind: chat}
    lora: {rank: 2, alpha: 4, target_modules: [q_proj, v_proj, down_proj], use_rslora: true}
    optimizer: {lr: 0.003}
    sampling: {max_new_tokens: 24}
  - name: gpt-early
    checkpoint: ../examples/agents/gpt-char-early
    optimizer: {lr: 0.0003}
    sampling: {max_new_tokens: 24}
eval:
  every: 1
  sets: [{name: test, split: test, problems: 8}]
checkpoint: {every: 1, keep: 2}
`, filepath.Join(dir, "out"), steps)
	cfg, err := config.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestLoRARun: a run with LoRA agents trains their adapters only, uses the
// frozen base as the KL reference (no copy saved), checkpoints and saves
// the final agents as PEFT adapter directories naming their base, and a
// run resumed from a checkpoint ends bit for bit as an uninterrupted one.
func TestLoRARun(t *testing.T) {
	dir := t.TempDir()
	cfg := loraTinyConfig(t, dir, 3)
	run, err := New(context.Background(), cfg, Options{Observer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range run.Agents() {
		if _, ok := a.Model.LoRA(); ok != (i < 2) {
			t.Fatalf("agent %s has adapters: %v", a.Name, ok)
		}
		if i < 2 && (a.Ref == nil || a.Ref == a.Model) {
			t.Fatalf("agent %s: reference %p, want the base of %p", a.Name, a.Ref, a.Model)
		}
	}
	bases := make([][]byte, 2)
	for i := range bases {
		bases[i] = must(os.ReadFile(filepath.Join(run.Agents()[i].BaseDir, "model.safetensors")))
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b := must(backend.New(backend.Choose(cfg.Backend)))
	seqs := []model.Sequence{{Prompt: []int{1, 2, 3}, Response: []int{4, 5, 6, 7}}, {Prompt: []int{3}, Response: []int{2, 2}}}
	for i, a := range run.Agents()[:2] {
		if _, err := os.Stat(filepath.Join(cfg.Out, "reference", a.Name)); !os.IsNotExist(err) {
			t.Errorf("%s: a reference copy was saved (%v); the base is the reference", a.Name, err)
		}
		final := filepath.Join(cfg.Out, "final", a.Name)
		if _, err := os.Stat(filepath.Join(final, "model.safetensors")); !os.IsNotExist(err) {
			t.Errorf("%s: the final agent has full weights (%v), want the adapters only", a.Name, err)
		}
		_, baseName, err := model.ReadAdapterConfig(final)
		if err != nil {
			t.Fatal(err)
		}
		if want := must(filepath.Abs(cfg.Agents[i].Checkpoint)); baseName != want {
			t.Errorf("%s: base_model_name_or_path %q, want %q", a.Name, baseName, want)
		}
		// The base is untouched.
		if got := must(os.ReadFile(filepath.Join(baseName, "model.safetensors"))); !bytes.Equal(got, bases[i]) {
			t.Errorf("%s: the base changed", a.Name)
		}
		// The final adapters on the saved base compute what the trained agent does.
		m := must(model.Load(b, baseName))
		before := must(m.Score(ctx, seqs, false))
		if err := m.LoadAdapters(final); err != nil {
			t.Fatal(err)
		}
		got, want := must(m.Score(ctx, seqs, false)), must(a.Model.Score(ctx, seqs, false))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: base + final adapters score %v, the trained agent %v", a.Name, got.LogProbs, want.LogProbs)
		}
		if reflect.DeepEqual(before, want) {
			t.Errorf("%s: the adapters did not change the model", a.Name)
		}
		if !reflect.DeepEqual(must(a.Ref.Score(ctx, seqs, false)), before) {
			t.Errorf("%s: the KL reference is not the base", a.Name)
		}
	}

	// Stopped after one step and resumed to three: the same run.
	dir2 := t.TempDir()
	short := loraTinyConfig(t, dir2, 1)
	trainWith(t, short, Options{})
	rest := *short
	rest.Steps = 3
	_, rec := trainWith(t, &rest, Options{Resume: true})
	if !bytes.Contains([]byte(rec.text()), []byte("resumed from")) {
		t.Fatalf("did not resume:\n%s", rec.text())
	}
	want := deterministic(must(metrics.ReadFile(filepath.Join(cfg.Out, metrics.FileName))))
	got := deterministic(must(metrics.ReadFile(filepath.Join(rest.Out, metrics.FileName))))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("resumed LoRA run's metrics differ from the uninterrupted run's:\n%v\n%v", got, want)
	}
	for _, a := range cfg.Agents {
		for _, f := range []string{model.AdapterWeightsFile, "model.safetensors"} {
			w, errW := os.ReadFile(filepath.Join(cfg.Out, "final", a.Name, f))
			g, errG := os.ReadFile(filepath.Join(rest.Out, "final", a.Name, f))
			if (errW == nil) != (errG == nil) || !bytes.Equal(w, g) {
				t.Errorf("%s: final %s differs after resuming", a.Name, f)
			}
		}
	}
	// A checkpoint holds the adapters and their optimizer state, not the base.
	ck := filepath.Join(checkpointDir(rest.Out, 3), "agents", cfg.Agents[0].Name)
	if _, err := os.Stat(filepath.Join(ck, "model.safetensors")); !os.IsNotExist(err) {
		t.Errorf("the checkpoint of a LoRA agent has the full weights (%v)", err)
	}
	var ac map[string]any
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(ck, model.AdapterConfigFile))), &ac); err != nil || ac["r"] != 4.0 {
		t.Errorf("checkpoint adapter config %v (%v), want r 4", ac, err)
	}
}

// TestLoRANewModelBase: the base of a LoRA agent made from a new model is
// saved once in OUT/base/<agent>, with its tokenizer, and the final adapter
// names it; an adapter directory given as an agent's checkpoint is refused
// with a message saying what to do.
func TestLoRANewModelBase(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "grpo", 1)
	cfg.Eval.Sets = nil
	cfg.Agents = cfg.Agents[:1]
	cfg.Agents[0].LoRA = &config.LoRA{Rank: 2, Alpha: 4, TargetModules: config.Modules{"c_attn"}}
	trainWith(t, cfg, Options{})
	base := filepath.Join(cfg.Out, "base", "gpt-char")
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(base, f)); err != nil {
			t.Errorf("saved base: %v", err)
		}
	}
	final := filepath.Join(cfg.Out, "final", "gpt-char")
	l, name, err := model.ReadAdapterConfig(final)
	if err != nil {
		t.Fatal(err)
	}
	if want := must(filepath.Abs(base)); name != want || l.Rank != 2 || !reflect.DeepEqual(l.Targets, []string{"c_attn"}) {
		t.Errorf("final adapter %+v of base %q, want rank 2 on c_attn of %q", l, name, want)
	}
	m := must(model.Load(must(backend.New(backend.Choose(cfg.Backend))), base))
	if err := m.LoadAdapters(final); err != nil {
		t.Fatal(err)
	}

	next := tinyConfig(t, t.TempDir(), "grpo", 1)
	next.Agents = next.Agents[:1]
	next.Agents[0].Model, next.Agents[0].Checkpoint = nil, final
	if _, err := New(context.Background(), next, Options{}); err == nil ||
		!strings.Contains(err.Error(), "agent gpt-char: checkpoint "+final+" is a LoRA adapter (adapter_config.json), not a model: merge it into its base first (hacrl merge)") {
		t.Errorf("an adapter as a checkpoint: %v", err)
	}
}

// TestLoRAExampleImproves: examples/arith-hacpo-lora.yaml, shortened to 30
// steps, improves both agents' held-out greedy accuracy (200 test problems)
// with adapters alone.
func TestLoRAExampleImproves(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two agents for 30 steps")
	}
	cfg, err := config.Load("../examples/arith-hacpo-lora.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Out = filepath.Join(t.TempDir(), "out")
	cfg.Steps = 30
	cfg.Eval.Every = 0
	cfg.Eval.Sets[0].Samples = 0 // greedy accuracy only
	cfg.Checkpoint.Every = 0
	for i := range cfg.Agents {
		cfg.Agents[i].Checkpoint = filepath.Join("..", cfg.Agents[i].Checkpoint)
		if cfg.Agents[i].LoRA == nil {
			t.Fatalf("agent %s of the LoRA example has no lora section", cfg.Agents[i].Name)
		}
	}
	sum, _ := trainWith(t, cfg, Options{})
	for _, a := range sum.Agents {
		before, after := sum.First[a]["eval/test/greedy_acc"], sum.Last[a]["eval/test/greedy_acc"]
		t.Logf("%s: greedy accuracy %.3f -> %.3f", a, before, after)
		if !(after > before) || sum.FirstStep != 0 || sum.LastStep != 30 {
			t.Errorf("%s: greedy accuracy %.3f at step %d -> %.3f at step %d, want an improvement", a, before, sum.FirstStep, after, sum.LastStep)
		}
	}
}
