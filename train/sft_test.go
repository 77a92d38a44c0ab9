package train

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/model"
)

func TestSFTWritesALoadableAgent(t *testing.T) {
	dir := t.TempDir()
	src := `
out: ` + filepath.Join(dir, "agent") + `
seed: 3
model: {family: llama, dim: 32, layers: 1, heads: 2, kv_heads: 1, max_seq: 64}
tokenizer: {kind: bpe, vocab_size: 280}
template: {kind: chat}
task: {name: arith, digits: 1, operators: "+"}
examples: 200
steps: 60
batch_size: 16
optimizer: {lr: 0.01}
eval: {every: 0, problems: 20, max_new_tokens: 24}
backend: go:ops_sequential
`
	path := filepath.Join(dir, "sft.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadSFT(path)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	res, err := SFT(context.Background(), cfg, &log)
	if err != nil {
		t.Fatal(err)
	}
	// The first logged loss is at step 50; by then it is far below ln(vocab).
	if res.FinalLoss <= 0 || res.FinalLoss > 2.5 || res.Accuracy < 0 || res.Accuracy > 1 {
		t.Errorf("result %+v\n%s", res, log.String())
	}
	if !strings.Contains(log.String(), "sft step 60/60 loss") || !strings.Contains(log.String(), "test greedy acc") {
		t.Errorf("log:\n%s", log.String())
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "optimizer.safetensors", "agent.json", "sft.json"} {
		if _, err := os.Stat(filepath.Join(cfg.Out, f)); err != nil {
			t.Error(err)
		}
	}
	meta, err := ReadMeta(cfg.Out)
	if err != nil || meta.Template.Kind != "chat" || meta.Task == nil || meta.Task.Name != "arith" {
		t.Errorf("agent.json: %+v, %v", meta, err)
	}
	// The saved agent trains on in a run.
	run := tinyConfig(t, dir, "gspo", 1)
	run.Agents = run.Agents[:1]
	one := 1.0
	run.Agents[0] = config.Agent{Name: "warm", Checkpoint: cfg.Out, Template: config.Template{Kind: "chat"},
		Optimizer: run.Agents[0].Optimizer, Sampling: config.Sampling{Temperature: &one, TopP: 1, MaxNewTokens: 16}}
	run.Eval.Sets[0].Problems = 4
	r, err := New(context.Background(), run, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Agents()[0].Model.Config(); got.Family != "llama" || got.KVHeads != 1 {
		t.Errorf("loaded model config %+v", got)
	}
	if _, err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(r.backend, filepath.Join(run.Out, "final", "warm")); err != nil {
		t.Error(err)
	}
}
