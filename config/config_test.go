package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const valid = `
name: demo
seed: 3
out: runs/demo
steps: 10
method: {name: hacpo, alpha: 1.0}
task: {name: arith, digits: 2}
batch: {prompts_per_step: 8, responses_per_prompt: 4, mini_batch: 32, micro_batch: 16}
agents:
  - name: a
    model: {family: gpt, dim: 32, layers: 1, heads: 2, max_seq: 64}
    tokenizer: tok.json
    optimizer: {lr: 0.001}
    sampling: {max_new_tokens: 16}
  - name: b
    checkpoint: ckpt/b
    template: {kind: chat}
    optimizer: {lr: 0.001, schedule: cosine}
    sampling: {max_new_tokens: 16, top_p: 0.9}
eval:
  every: 5
  sets: [{name: test, split: test, problems: 50}]
`

func TestParseValid(t *testing.T) {
	c, err := Parse([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	if c.Agents[0].Model.KVHeads != 2 || c.Agents[0].Model.Activation != "gelu" {
		t.Errorf("model defaults not applied: %+v", c.Agents[0].Model)
	}
	if c.Agents[1].Template.Kind != "chat" || c.Agents[0].Template.Kind != "plain" {
		t.Errorf("templates: %+v %+v", c.Agents[0].Template, c.Agents[1].Template)
	}
	if *c.Agents[0].Optimizer.WeightDecay != 0.01 || c.Agents[0].Optimizer.MaxGradNorm != 1 {
		t.Errorf("optimizer defaults: %+v", c.Agents[0].Optimizer)
	}
	if c.Checkpoint.Keep != 2 || c.OnNonFinite != "skip" || !*c.Eval.AtStart || c.Engine != "auto" {
		t.Errorf("run defaults: keep %d on_non_finite %q at_start %v engine %q", c.Checkpoint.Keep, c.OnNonFinite, *c.Eval.AtStart, c.Engine)
	}
	if c.Rollouts.Every != 0 {
		t.Errorf("rollouts.every defaults to %d, want 0 (off)", c.Rollouts.Every)
	}
	if c, err := Parse([]byte(valid + "rollouts: {every: 3}\n")); err != nil || c.Rollouts.Every != 3 {
		t.Errorf("rollouts: {every: 3}: %v, %+v", err, c)
	}
	if *c.Method.Alpha != 1.0 || c.Method.Delta != nil || c.Method.CrossAdvantage != "all" {
		t.Errorf("method overrides: %+v", c.Method)
	}
}

func TestParseErrorsNameKeyPath(t *testing.T) {
	tests := []struct {
		name, from, to, want string
	}{
		{"unknown top key", "steps: 10", "stepz: 10", "stepz (line"},
		{"unknown nested key", "sampling: {max_new_tokens: 16, top_p: 0.9}", "sampling: {max_new_tokens: 16, top_pp: 0.9}", "agents[1].sampling.top_pp (line"},
		{"wrong type", "dim: 32", "dim: big", `agents[0].model.dim (line 11): cannot read "big" as an integer`},
		{"list expected", "sets: [{name: test, split: test, problems: 50}]", "sets: {name: test}", "eval.sets (line"},
		{"impossible heads", "heads: 2", "heads: 3", "agents[0].model.heads: must divide dim (32), got 3"},
		{"micro does not divide mini", "micro_batch: 16", "micro_batch: 5", "batch.micro_batch: must divide batch.mini_batch (32), got 5"},
		{"bad top_p", "top_p: 0.9", "top_p: 1.5", "agents[1].sampling.top_p: must be in (0, 1], got 1.5"},
		{"duplicate agent", "name: b", "name: a", `agents[1].name: "a" is also the name of agents[0]`},
		{"both model and checkpoint", "checkpoint: ckpt/b", "checkpoint: ckpt/b\n    model: {family: gpt, dim: 32, layers: 1, heads: 2, max_seq: 64}", "agents[1]: give exactly one of checkpoint or model"},
		{"bad family", "family: gpt", "family: rnn", `agents[0].model.family: must be gpt or llama, got "rnn"`},
		{"no task", "task: {name: arith, digits: 2}", "", "task: give exactly one of task or dataset"},
		{"bad schedule", "schedule: cosine", "schedule: step", `agents[1].optimizer.schedule: must be constant, linear or cosine, got "step"`},
		{"duplicate key", "steps: 10", "steps: 10\nsteps: 11", "steps (line 6): key given twice"},
		{"eval problems for generated task", "problems: 50", "problems: 0", "eval.sets[0].problems: must be > 0"},
		{"bad cross advantage", "alpha: 1.0}", "alpha: 1.0, cross_advantage: negative}", `method.cross_advantage: must be all or positive, got "negative"`},
		{"bad guard", "steps: 10", "steps: 10\non_non_finite: ignore", `on_non_finite: must be skip or stop, got "ignore"`},
		{"bad engine", "steps: 10", "steps: 10\nengine: gpu", `engine: must be auto, native or graph, got "gpu"`},
		{"negative rollouts.every", "steps: 10", "steps: 10\nrollouts: {every: -1}", "rollouts.every: must be >= 0 (0 = off), got -1"},
		{"unknown rollouts key", "steps: 10", "steps: 10\nrollouts: {each: 2}", "rollouts.each (line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(valid, tc.from, tc.to, 1)
			if src == valid {
				t.Fatalf("test case did not change the config")
			}
			_, err := Parse([]byte(src))
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestLlamaHidden(t *testing.T) {
	for _, tc := range []struct{ dim, want int }{{128, 352}, {96, 256}, {64, 176}, {48, 128}} {
		if got := LlamaHidden(tc.dim); got != tc.want {
			t.Errorf("LlamaHidden(%d) = %d, want %d", tc.dim, got, tc.want)
		}
	}
}

func TestLoadSFT(t *testing.T) {
	good := `
out: agents/a
model: {family: llama, dim: 32, layers: 1, heads: 4, max_seq: 64}
tokenizer: {kind: bpe, vocab_size: 300}
task: {name: arith}
examples: 100
steps: 10
optimizer: {lr: 0.001}
`
	for _, tc := range []struct{ name, from, to, want string }{
		{"valid", "", "", ""},
		{"unknown key", "steps: 10", "stepz: 10", "stepz (line"},
		{"small bpe", "vocab_size: 300", "vocab_size: 100", "tokenizer.vocab_size: a byte-level BPE needs at least 257"},
		{"bad heads", "heads: 4", "heads: 5", "model.heads: must divide dim (32), got 5"},
		{"bad schedule", "lr: 0.001", "lr: 0.001, schedule: exp", `optimizer.schedule: must be constant, linear or cosine, got "exp"`},
		{"no examples", "examples: 100", "", "examples: required for a generated task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sft.yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(good, tc.from, tc.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := LoadSFT(path)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s.Model.KVHeads != 4 || s.Model.Hidden != LlamaHidden(32) || s.BatchSize != 32 || *s.Optimizer.WeightDecay != 0.01 {
					t.Errorf("defaults not applied: %+v %+v", s.Model, s.Optimizer)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want one naming %s and containing %q", err, path, tc.want)
			}
		})
	}
}

// dataset.too_long is error (the default) or drop, in run and SFT configs.
func TestDatasetTooLong(t *testing.T) {
	dataset := strings.Replace(valid, "task: {name: arith, digits: 2}", "dataset: {path: d.jsonl%s}", 1)
	dataset = strings.Replace(dataset, "sets: [{name: test, split: test, problems: 50}]", "sets: []", 1)
	for _, tc := range []struct{ value, want, err string }{
		{"", "error", ""},
		{", too_long: error", "error", ""},
		{", too_long: drop", "drop", ""},
		{", too_long: skip", "", `dataset.too_long: must be error or drop, got "skip"`},
	} {
		c, err := Parse([]byte(fmt.Sprintf(dataset, tc.value)))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("too_long%s: %v, want %q", tc.value, err, tc.err)
			}
		case err != nil:
			t.Errorf("too_long%s: %v", tc.value, err)
		case c.Dataset.TooLong != tc.want:
			t.Errorf("too_long%s: got %q, want %q", tc.value, c.Dataset.TooLong, tc.want)
		}
	}
	sft := SFT{Out: "o", Engine: "auto", Checkpoint: "c", Dataset: &Dataset{Path: "d.jsonl", TooLong: "trim"}, Steps: 1, BatchSize: 1,
		Template: Template{Kind: "plain"}, Optimizer: Optimizer{LR: 1, WeightDecay: new(float64), Schedule: "constant"}}
	if err := sft.Validate(); err == nil || !strings.Contains(err.Error(), `dataset.too_long: must be error or drop, got "trim"`) {
		t.Errorf("SFT with too_long: trim: %v", err)
	}
	sft.Dataset.TooLong = "drop"
	if err := sft.Validate(); err != nil {
		t.Errorf("SFT with too_long: drop: %v", err)
	}
}
