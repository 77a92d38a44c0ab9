package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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
	if m := c.Agents[0].Model; m.KVHeads != 2 || m.Activation != "gelu" || m.Hidden != 128 {
		t.Errorf("model defaults not applied: %+v", m)
	}
	// A new model's template defaults to plain; a checkpoint's is left to the
	// checkpoint (train resolves it).
	if c.Agents[1].Template.Kind != "chat" || c.Agents[0].Template.Kind != "plain" {
		t.Errorf("templates: %+v %+v", c.Agents[0].Template, c.Agents[1].Template)
	}
	o := c.Agents[0].Optimizer
	if *o.WeightDecay != 0.01 || *o.MaxGradNorm != 1 || o.Beta1 != 0.9 || o.Beta2 != 0.999 || o.Epsilon != 1e-8 || o.Schedule != "constant" {
		t.Errorf("optimizer defaults: %+v", o)
	}
	if s := c.Agents[0].Sampling; *s.Temperature != 1 || s.TopP != 1 {
		t.Errorf("sampling defaults: %+v", s)
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
	if *c.Method.Alpha != 1.0 || c.Method.Delta != nil || c.Method.CrossAdvantage != "" {
		t.Errorf("method overrides: %+v", c.Method)
	}
	if c.Batch.MicroBatch != 16 || c.Eval.Sets[0].Temperature != 1 {
		t.Errorf("given values replaced: micro_batch %d, eval temperature %g", c.Batch.MicroBatch, c.Eval.Sets[0].Temperature)
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
		{"impossible heads", "heads: 2", "heads: 3", "agents[0].model.heads (line 11): must divide dim (32), got 3"},
		{"micro does not divide mini", "micro_batch: 16", "micro_batch: 5", "batch.micro_batch (line 8): must divide batch.mini_batch (32), got 5"},
		{"bad top_p", "top_p: 0.9", "top_p: 1.5", "agents[1].sampling.top_p (line 19): must be in (0, 1], got 1.5"},
		{"negative max_batch", "top_p: 0.9", "top_p: 0.9, max_batch: -2", "agents[1].sampling.max_batch (line 19): must be >= 0"},
		{"duplicate agent", "name: b", "name: a", `agents[1].name (line 15): "a" is also the name of agents[0]`},
		{"both model and checkpoint", "checkpoint: ckpt/b", "checkpoint: ckpt/b\n    model: {family: gpt, dim: 32, layers: 1, heads: 2, max_seq: 64}", "agents[1] (line 15): give exactly one of checkpoint or model"},
		{"bad family", "family: gpt", "family: rnn", `agents[0].model.family (line 11): must be gpt or llama, got "rnn"`},
		{"no task", "task: {name: arith, digits: 2}", "", "task: give exactly one of task or dataset"},
		{"bad schedule", "schedule: cosine", "schedule: step", `agents[1].optimizer.schedule (line 18): must be constant, linear or cosine, got "step"`},
		{"duplicate key", "steps: 10", "steps: 10\nsteps: 11", "steps (line 6): key given twice"},
		{"eval problems for generated task", "problems: 50", "problems: 0", "eval.sets[0].problems (line 22): required for a generated task's split"},
		{"bad cross advantage", "alpha: 1.0}", "alpha: 1.0, cross_advantage: negative}", `method.cross_advantage (line 6): must be all, positive or capable, got "negative"`},
		{"bad cross bounds", "alpha: 1.0}", "alpha: 1.0, cross_bounds: wide}", `method.cross_bounds (line 6): must be fixed, adaptive or decoupled, got "wide"`},
		{"bad responses multiplier", "alpha: 1.0}", "alpha: 1.0, responses_multiplier: -2}", `method.responses_multiplier (line 6): must be >= 1 (0 or absent: the preset's), got -2`},
		{"bad semantics", "alpha: 1.0}", "alpha: 1.0, semantics: paper}", `method.semantics (line 6): must be v1 or original, got "paper"`},
		{"bad guard", "steps: 10", "steps: 10\non_non_finite: ignore", `on_non_finite (line 6): must be skip or stop, got "ignore"`},
		{"bad engine", "steps: 10", "steps: 10\nengine: gpu", `engine (line 6): must be auto, native or graph, got "gpu"`},
		{"bad compute dtype", "top_p: 0.9}", "top_p: 0.9}\n    compute_dtype: float16", `agents[1].compute_dtype (line 20): must be float32 or bfloat16, got "float16"`},
		{"bfloat16 on the native engine", "top_p: 0.9}", "top_p: 0.9}\n    compute_dtype: bfloat16\nengine: native", "agents[1].compute_dtype (line 20): bfloat16 runs on the graph engine"},
		{"bad frozen dtype", "top_p: 0.9}", "top_p: 0.9}\n    frozen_dtype: float16", `agents[1].frozen_dtype (line 20): must be float32 or bfloat16, got "float16"`},
		{"frozen bfloat16 without lora", "top_p: 0.9}", "top_p: 0.9}\n    frozen_dtype: bfloat16", "agents[1].frozen_dtype (line 20): bfloat16 holds a LoRA agent's frozen base and needs a lora section"},
		{"bad sample dtype", "top_p: 0.9}", "top_p: 0.9}\n    sample_dtype: fp8", `agents[1].sample_dtype (line 20): must be float32 or bfloat16, got "fp8"`},
		{"sample bfloat16 on the graph engine", "top_p: 0.9}", "top_p: 0.9}\n    sample_dtype: bfloat16\nengine: graph", "agents[1].sample_dtype (line 20): bfloat16 runs on the native engine"},
		{"frozen bfloat16 on the graph engine", "top_p: 0.9}", "top_p: 0.9}\n    lora: {rank: 2}\n    frozen_dtype: bfloat16\nengine: graph", "agents[1].frozen_dtype (line 21): bfloat16 runs on the native engine"},
		{"several errors", "steps: 10", "steps: -1\nengine: gpu", "steps (line 5): must be >= 0, got -1\nengine (line 6)"},
		{"eval task without split", "sets: [{name: test, split: test, problems: 50}]", "sets: [{name: b, benchmark: gsm8k, task: {operators: \"+\"}}]", "eval.sets[0].task (line 22): only with split"},
		{"eval task of another task", "problems: 50}", "problems: 50, task: {name: countdown}}", "eval.sets[0].task.name (line 22): must be the run's task (arith) or left out, got \"countdown\""},
		{"eval task option of another task", "problems: 50}", "problems: 50, task: {numbers: 4}}", "eval.sets[0].task.numbers (line 22): is an option of countdown, not of arith"},
		{"eval prompt_suffix with a split", "problems: 50}", "problems: 50, prompt_suffix: Answer.}", "eval.sets[0].prompt_suffix (line 22): only with benchmark or dataset"},
		{"negative rollouts.every", "steps: 10", "steps: 10\nrollouts: {every: -1}", "rollouts.every (line 6): must be >= 0 (0 = off), got -1"},
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

// TestExplicitValues holds the rule that only keys left out take defaults:
// a value given explicitly is either kept with its documented meaning or
// refused, by path and line, never replaced.
func TestExplicitValues(t *testing.T) {
	refused := []struct {
		name, from, to, want string
	}{
		{"fractional steps", "steps: 10", "steps: 2.5", `steps (line 5): cannot read "2.5" as an integer: not a whole number`},
		{"fractional prompts", "prompts_per_step: 8", "prompts_per_step: 4.7", `batch.prompts_per_step (line 8): cannot read "4.7" as an integer`},
		{"fractional top_k", "top_p: 0.9", "top_k: 1.5", `agents[1].sampling.top_k (line 19): cannot read "1.5" as an integer`},
		{"fractional task seed", "digits: 2", "digits: 2, seed: 0.5", `task.seed (line 7): cannot read "0.5" as a non-negative integer`},
		{"NaN", "top_p: 0.9", "top_p: .nan", `agents[1].sampling.top_p (line 19): cannot read ".nan" as a number: must be finite`},
		{"Inf", "lr: 0.001}", "lr: .inf}", `agents[0].optimizer.lr (line 13): cannot read ".inf" as a number: must be finite`},
		{"zero responses", "responses_per_prompt: 4", "responses_per_prompt: 0", "batch.responses_per_prompt (line 8): must not be 0; leave the key out for the default (8)"},
		{"zero top_p", "top_p: 0.9", "top_p: 0", "agents[1].sampling.top_p (line 19): must not be 0; leave the key out for the default (1)"},
		{"zero top_p as 0.0", "top_p: 0.9", "top_p: 0.0", "agents[1].sampling.top_p (line 19): must not be 0"},
		{"negative temperature", "top_p: 0.9", "temperature: -1", "agents[1].sampling.temperature (line 19): must be >= 0 (0 = greedy), got -1"},
		{"zero keep", "problems: 50}]", "problems: 50}]\ncheckpoint: {keep: 0}", "checkpoint.keep (line 23): must not be 0; leave the key out for the default (2)"},
		{"negative keep", "problems: 50}]", "problems: 50}]\ncheckpoint: {keep: -1}", "checkpoint.keep (line 23): must be >= 1, got -1"},
		{"zero beta1", "lr: 0.001}", "lr: 0.001, beta1: 0}", "agents[0].optimizer.beta1 (line 13): must not be 0; leave the key out for the default (0.9)"},
		{"beta2 one", "lr: 0.001}", "lr: 0.001, beta2: 1}", "agents[0].optimizer.beta2 (line 13): must be in (0, 1), got 1"},
		{"zero epsilon", "lr: 0.001}", "lr: 0.001, epsilon: 0}", "agents[0].optimizer.epsilon (line 13): must not be 0"},
		{"negative max_grad_norm", "lr: 0.001}", "lr: 0.001, max_grad_norm: -1}", "agents[0].optimizer.max_grad_norm (line 13): must be >= 0 (0 = no clipping), got -1"},
		{"empty schedule", "schedule: cosine", `schedule: ""`, "agents[1].optimizer.schedule (line 18): must not be empty; leave the key out for the default (constant)"},
		{"empty template kind", "kind: chat", `kind: ""`, "agents[1].template.kind (line 17): must not be empty; leave the key out for the default (plain for a new model"},
		{"unknown template kind", "kind: chat", "kind: jinja", `agents[1].template.kind (line 17): must be plain, chat or hf, got "jinja"`},
		{"vars without hf", "kind: chat", "kind: chat, vars: {enable_thinking: false}", "agents[1].template.vars (line 17): applies to kind hf only, not chat"},
		{"reserved var", "kind: chat", "kind: hf, vars: {add_generation_prompt: false}", "agents[1].template.vars.add_generation_prompt (line 17): is set by the template renderer"},
		{"empty method name", "name: hacpo", `name: ""`, "method.name (line 6): must not be empty; leave the key out for the default (hacpo)"},
		{"zero kv_heads", "max_seq: 64}\n    tokenizer", "max_seq: 64, kv_heads: 0}\n    tokenizer", "agents[0].model.kv_heads (line 11): must not be 0; leave the key out for the default (heads)"},
		{"zero micro_batch", "micro_batch: 16", "micro_batch: 0", "batch.micro_batch (line 8): must not be 0; leave the key out for the default (mini_batch)"},
		{"zero eval temperature", "problems: 50}", "problems: 50, samples: 4, temperature: 0}", "eval.sets[0].temperature (line 22): must not be 0; leave the key out for the default (1)"},
		{"zero task digits", "digits: 2", "digits: 0", "task.digits (line 7): must not be 0; leave the key out for the default (the task's"},
		{"other task's option", "digits: 2", "digits: 2, numbers: 4", "task.numbers (line 7): is an option of countdown, not of arith"},
		{"unknown task", "name: arith", "name: arithmetic", `task.name (line 7): unknown task "arithmetic"; valid: arith, countdown`},
		{"negative samples", "problems: 50}", "problems: 50, samples: -2}", "eval.sets[0].samples (line 22): must be >= 0 (0 = greedy accuracy only), got -2"},
		{"not a bool", "every: 5", "every: 5\n  at_start: nope", `eval.at_start (line 22): cannot read "nope" as true or false`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(valid, tc.from, tc.to, 1)
			if src == valid {
				t.Fatalf("test case did not change the config")
			}
			c, err := Parse([]byte(src))
			if err == nil {
				t.Fatalf("accepted (%+v), want an error containing %q", c, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}

	kept := []struct {
		name, from, to string
		check          func(c *Config) bool
	}{
		{"temperature 0 is greedy, kept", "top_p: 0.9", "top_p: 0.9, temperature: 0", func(c *Config) bool { return *c.Agents[1].Sampling.Temperature == 0 }},
		{"temperature given is kept", "top_p: 0.9", "top_p: 0.9, temperature: 0.7", func(c *Config) bool { return *c.Agents[1].Sampling.Temperature == 0.7 }},
		{"max_grad_norm 0 is no clipping, kept", "lr: 0.001}", "lr: 0.001, max_grad_norm: 0}", func(c *Config) bool { return *c.Agents[0].Optimizer.MaxGradNorm == 0 }},
		{"weight_decay 0 is off, kept", "lr: 0.001}", "lr: 0.001, weight_decay: 0}", func(c *Config) bool { return *c.Agents[0].Optimizer.WeightDecay == 0 }},
		{"at_start false kept", "every: 5", "every: 5\n  at_start: false", func(c *Config) bool { return !*c.Eval.AtStart }},
		{"alpha 0 kept", "alpha: 1.0", "alpha: 0", func(c *Config) bool { return c.Method.Alpha != nil && *c.Method.Alpha == 0 }},
		{"whole number written as a float", "steps: 10", "steps: 1e3", func(c *Config) bool { return c.Steps == 1000 }},
		{"eval every 0: start and end only", "every: 5", "every: 0", func(c *Config) bool { return c.Eval.Every == 0 }},
		{"top_k 0: off", "top_p: 0.9", "top_p: 0.9, top_k: 0", func(c *Config) bool { return c.Agents[1].Sampling.TopK == 0 }},
		{"eval temperature 0 without samples is not read", "problems: 50}", "problems: 50, samples: 0}", func(c *Config) bool { return c.Eval.Sets[0].Temperature == 1 }},
		{"a key with no value is left out", "top_p: 0.9}", "top_p: 0.9, temperature: ~}", func(c *Config) bool { return *c.Agents[1].Sampling.Temperature == 1 }},
		{"omitted keys take defaults", "responses_per_prompt: 4, ", "", func(c *Config) bool { return c.Batch.ResponsesPerPrompt == 8 }},
		{"eval task: the run's name may be given", "problems: 50}", "problems: 50, task: {name: arith, operators: \"+\"}}", func(c *Config) bool { return c.Eval.Sets[0].Task.Operators == "+" }},
		{"checkpoint template left to the checkpoint", "    template: {kind: chat}\n", "", func(c *Config) bool { return c.Agents[1].Template.Kind == "" }},
	}
	for _, tc := range kept {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(valid, tc.from, tc.to, 1)
			if src == valid {
				t.Fatalf("test case did not change the config")
			}
			c, err := Parse([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("value not as given: %+v", c)
			}
		})
	}
}

// TestMarshalRoundTrip: a parsed config written by Marshal parses back to the
// same value, zero values with a meaning included.
func TestMarshalRoundTrip(t *testing.T) {
	for name, src := range map[string]string{
		"valid":                    valid,
		"greedy":                   strings.Replace(valid, "top_p: 0.9", "top_p: 0.9, temperature: 0, top_k: 0", 1),
		"eval set on one operator": strings.Replace(valid, "problems: 50}", "problems: 50, task: {operators: \"+\", ops: 2}}", 1),
		"no clip, no eval at start, dataset": strings.Replace(strings.Replace(valid, "task: {name: arith, digits: 2}", "dataset: {path: d.jsonl, prompt_suffix: \" Answer:\"}", 1),
			"every: 5", "every: 0\n  at_start: false", 1),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			data, err := Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(data)
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if !sameValues(c, back) {
				t.Errorf("round trip differs:\n%+v\n%+v\n%s", c, back, data)
			}
			if !bytes.Contains(data, []byte("top_k: 0")) || !bytes.Contains(data, []byte("keep: 2")) {
				t.Errorf("defaults and meaningful zeros missing:\n%s", data)
			}
			clone := c.Clone()
			if !reflect.DeepEqual(c, clone) {
				t.Fatal("clone differs")
			}
			*clone.Agents[0].Optimizer.WeightDecay = 0.5
			clone.Agents[0].Model.Dim = 1
			if *c.Agents[0].Optimizer.WeightDecay == 0.5 || c.Agents[0].Model.Dim == 1 {
				t.Error("clone shares memory with the original")
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
		{"small bpe", "vocab_size: 300", "vocab_size: 100", "tokenizer.vocab_size (line 4): a byte-level BPE needs at least 257"},
		{"bad heads", "heads: 4", "heads: 5", "model.heads (line 3): must divide dim (32), got 5"},
		{"bad schedule", "lr: 0.001", "lr: 0.001, schedule: exp", `optimizer.schedule (line 8): must be constant, linear or cosine, got "exp"`},
		{"zero batch size", "steps: 10", "steps: 10\nbatch_size: 0", "batch_size (line 8): must not be 0; leave the key out for the default (32)"},
		{"zero eval problems", "steps: 10", "steps: 10\neval: {problems: 0}", "eval.problems (line 8): must not be 0; leave the key out for the default (200)"},
		{"fractional steps", "steps: 10", "steps: 10.5", `steps (line 7): cannot read "10.5" as an integer`},
		{"no examples", "examples: 100", "", "examples: required for a generated task"},
		{"qwen3 with head_dim", "heads: 4, max_seq: 64}", "heads: 3, max_seq: 64, model_type: qwen3, head_dim: 16, rope_theta: 1000000}", ""},
		{"llama3 rope scaling", "max_seq: 64}", "max_seq: 64, rope_scaling: {rope_type: llama3, factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16}}", ""},
		{"bad model_type", "max_seq: 64}", "max_seq: 64, model_type: mistral}", `model.model_type (line 3): must be llama, qwen2 or qwen3, got "mistral"`},
		{"odd head_dim", "max_seq: 64}", "max_seq: 64, head_dim: 7}", "model.head_dim (line 3): must be even and > 0 (rotary positions), got 7"},
		{"heads without head_dim", "heads: 4", "heads: 5", "(or set head_dim)"},
		{"bad rope_type", "max_seq: 64}", "max_seq: 64, rope_scaling: {rope_type: yarn, factor: 4, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16}}", `model.rope_scaling.rope_type (line 3): must be llama3, got "yarn"`},
		{"bad high_freq_factor", "max_seq: 64}", "max_seq: 64, rope_scaling: {rope_type: llama3, factor: 4, low_freq_factor: 2, high_freq_factor: 1, original_max_position_embeddings: 16}}", "model.rope_scaling.high_freq_factor (line 3): must be > low_freq_factor (2), got 1"},
		{"no original max positions", "max_seq: 64}", "max_seq: 64, rope_scaling: {rope_type: llama3, factor: 4, low_freq_factor: 1, high_freq_factor: 4}}", "model.rope_scaling.original_max_position_embeddings (line 3): must be > 0, got 0"},
		{"llama option on gpt", "family: llama", "family: gpt, head_dim: 8", `model.head_dim (line 3): applies to family llama only, not "gpt"`},
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
				if s.Model.KVHeads != s.Model.Heads || s.Model.Hidden != LlamaHidden(32) || s.BatchSize != 32 || *s.Optimizer.WeightDecay != 0.01 {
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
		{", too_long: skip", "", `must be error or drop, got "skip"`},
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
	sft := "out: o\ncheckpoint: c\ndataset: {path: d.jsonl, too_long: %s}\nsteps: 1\nbatch_size: 1\noptimizer: {lr: 1}\n"
	if _, err := ParseSFT([]byte(fmt.Sprintf(sft, "trim"))); err == nil || !strings.Contains(err.Error(), `dataset.too_long (line 3): must be error or drop, got "trim"`) {
		t.Errorf("SFT with too_long: trim: %v", err)
	}
	if c, err := ParseSFT([]byte(fmt.Sprintf(sft, "drop"))); err != nil || c.Dataset.TooLong != "drop" {
		t.Errorf("SFT with too_long: drop: %v", err)
	}
}

// TestDefaultTags: every default tag of every config type parses as its
// field's type and is applied; no field has both a default and a derived tag.
func TestDefaultTags(t *testing.T) {
	for _, v := range []any{&Config{}, &SFT{}} {
		rv := reflect.ValueOf(v).Elem()
		allocate(rv)
		fillDefaults(rv)
		checkTags(t, rv)
	}
}

// allocate gives every nil struct pointer a value and every list of
// structs one element, so that fillDefaults reaches every field.
func allocate(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() && v.Type().Elem().Kind() == reflect.Struct {
			v.Set(reflect.New(v.Type().Elem()))
		}
		if !v.IsNil() {
			allocate(v.Elem())
		}
	case reflect.Slice:
		if v.Len() == 0 && v.Type().Elem().Kind() == reflect.Struct {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		for i := 0; i < v.Len(); i++ {
			allocate(v.Index(i))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				allocate(v.Field(i))
			}
		}
	}
}

func checkTags(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			checkTags(t, v.Elem())
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			checkTags(t, v.Index(i))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			_, hasDefault := f.Tag.Lookup("default")
			_, hasDerived := f.Tag.Lookup("derived")
			if hasDefault && hasDerived {
				t.Errorf("%s.%s has both a default and a derived tag", v.Type().Name(), f.Name)
			}
			if fv := v.Field(i); hasDefault && (fv.Kind() == reflect.Pointer && fv.IsNil() || isZero(fv)) {
				t.Errorf("%s.%s: default %q not applied", v.Type().Name(), f.Name, f.Tag.Get("default"))
			}
			checkTags(t, v.Field(i))
		}
	}
}

// An hf template's vars parse as YAML values and survive Marshal.
func TestTemplateVars(t *testing.T) {
	c, err := Parse([]byte(strings.Replace(valid, "kind: chat", "kind: hf, vars: {enable_thinking: false, date_string: 26 Jul 2024}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	tm := c.Agents[1].Template
	if tm.Kind != "hf" || tm.Vars["enable_thinking"] != false || tm.Vars["date_string"] != "26 Jul 2024" {
		t.Fatalf("template = %+v", tm)
	}
	data, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if !reflect.DeepEqual(back.Agents[1].Template, tm) {
		t.Errorf("round trip: %+v, want %+v", back.Agents[1].Template, tm)
	}
}

// method.semantics: "" and v1 keep the config as it was (the key is left out
// of the marshalled config, so its hash is unchanged); original needs
// mini-batches that split over 8 ranks.
func TestMethodSemantics(t *testing.T) {
	base, err := Parse([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	baseJSON, _ := json.Marshal(base)
	if base.Method.Semantics != "" || strings.Contains(string(baseJSON), "semantics") {
		t.Errorf("no key: semantics %q, JSON %s", base.Method.Semantics, baseJSON)
	}
	for _, c := range []struct {
		method, batch, want string
	}{
		{"semantics: v1", "mini_batch: 32, micro_batch: 16", ""},
		{"semantics: original", "mini_batch: 32, micro_batch: 16", ""},
		{"semantics: original", "mini_batch: 12, micro_batch: 4", "method.semantics (line 6): original splits each mini-batch over 8 ranks: batch.mini_batch must be a multiple of 8, got 12"},
		{"semantics: v1", "mini_batch: 12, micro_batch: 4", ""},
	} {
		src := strings.NewReplacer("alpha: 1.0}", "alpha: 1.0, "+c.method+"}", "mini_batch: 32, micro_batch: 16", c.batch).Replace(valid)
		cfg, err := Parse([]byte(src))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s, %s: %v", c.method, c.batch, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s, %s: error %v, want %q", c.method, c.batch, err, c.want)
		case err == nil && "semantics: "+cfg.Method.Semantics != c.method:
			t.Errorf("%s: parsed %q", c.method, cfg.Method.Semantics)
		}
	}
}

// TestEvalTaskOnDatasetRun: an evaluation set's task section needs a run
// with a generated task to change.
func TestEvalTaskOnDatasetRun(t *testing.T) {
	src := strings.Replace(valid, "task: {name: arith, digits: 2}", "dataset: {path: d.jsonl}", 1)
	src = strings.Replace(src, "problems: 50}", "problems: 50, task: {operators: \"+\"}}", 1)
	_, err := Parse([]byte(src))
	if want := "eval.sets[0].task (line 22): only for a run with a generated task"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want an error containing %q", err, want)
	}
}

func TestTaskOverride(t *testing.T) {
	run := Task{Name: "arith", Seed: 7, Digits: 2, Operators: "+-"}
	tests := []struct {
		name string
		o    *Task
		want Task
	}{
		{"nil keeps the run's", nil, run},
		{"empty keeps the run's", &Task{}, run},
		{"one option replaced", &Task{Operators: "+"}, Task{Name: "arith", Seed: 7, Digits: 2, Operators: "+"}},
		{"several, the run's name given", &Task{Name: "arith", Digits: 3, Ops: 2}, Task{Name: "arith", Seed: 7, Digits: 3, Ops: 2, Operators: "+-"}},
		{"seed and format weight", &Task{Seed: 9, FormatWeight: 0.1}, Task{Name: "arith", Seed: 9, FormatWeight: 0.1, Digits: 2, Operators: "+-"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := run
			if got := run.Override(tc.o); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if run != before {
				t.Errorf("Override changed its receiver: %+v", run)
			}
		})
	}
}

func TestAgentNames(t *testing.T) {
	c := &Config{Agents: []Agent{{Name: "b"}, {Name: "a"}}}
	if got := c.AgentNames(); !reflect.DeepEqual(got, []string{"b", "a"}) {
		t.Errorf("AgentNames = %v, want [b a] (config order)", got)
	}
}

// parseSection parses the valid config with section appended. With want
// set it requires an error containing want and returns nil; otherwise it
// requires none.
func parseSection(t *testing.T, section, want string) *Config {
	t.Helper()
	c, err := Parse([]byte(valid + section + "\n"))
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want one containing %q", err, want)
		}
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}
