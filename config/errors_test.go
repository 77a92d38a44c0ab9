package config

import (
	"strings"
	"testing"
)

// TestValueErrors: every error about a config value names its key path and
// line, says what is expected, and lists the valid names where a name is
// wrong. Each case edits setBase (old → new) and wants a message fragment
// that starts at the key.
func TestValueErrors(t *testing.T) {
	tests := []struct {
		name, old, new, want string
	}{
		{"method name", "method: {name: hacpo}", "method: {name: ppo}",
			`method.name (line 4): unknown method "ppo"; valid: cispo, dapo, dr_grpo, grpo, gspo, gspo2x, hacpo, hacpo-capable, naive, no-adv, no-cross-clip, no-omega, no-stepwise`},
		{"method range", "method: {name: hacpo}", "method: {name: hacpo, delta: 1.5}", "method.delta (line 4): must be in [0, 1], got 1.5"},
		{"method omega", "method: {name: hacpo}", "method: {name: hacpo, omega_min: 2, omega_max: 1}", "method.omega_max (line 4): must be >= omega_min (2), got 1"},
		{"method window", "method: {name: hacpo}", "method: {name: hacpo, window: 0}", "method.window (line 4): must be >= 1, got 0"},
		{"shared rollouts, one agent", "  - name: b\n    checkpoint: ckpt/b\n    optimizer: *opt\n    sampling: {max_new_tokens: 16}\n", "",
			"agents (line 7): method hacpo shares rollouts between agents and needs at least 2, got 1"},
		{"capability", "method: {name: hacpo}", "method: {name: hacpo, capability: acc}", `method.capability (line 4): must be accuracy or mean_reward, got "acc"`},
		{"task name", "task: {name: arith, digits: 2}", "task: {name: arithmetic}", `task.name (line 5): unknown task "arithmetic"; valid: arith, countdown`},
		{"task option", "task: {name: arith, digits: 2}", "task: {name: arith, ops: 9}", "task.ops (line 5): must be in 1..4, got 9"},
		{"task operators", "task: {name: arith, digits: 2}", "task: {name: arith, operators: \"+/\"}", `task.operators (line 5): must be a non-empty subset of "+-*" without repeats, got "+/"`},
		{"task format weight", "task: {name: arith, digits: 2}", "task: {name: arith, format_weight: 1}", "task.format_weight (line 5): must be in [0, 1), got 1"},
		{"lr left out", "optimizer: &opt {lr: 0.0001}", "optimizer: &opt {beta1: 0.9}", "agents[0].optimizer.lr (line 10): required (> 0): the peak learning rate"},
		{"lr zero", "optimizer: &opt {lr: 0.0001}", "optimizer: &opt {lr: 0}", "agents[0].optimizer.lr (line 10): must be > 0, got 0"},
		{"schedule", "optimizer: &opt {lr: 0.0001}", "optimizer: &opt {lr: 0.0001, schedule: cosin}", `agents[0].optimizer.schedule (line 10): must be constant, linear or cosine, got "cosin"`},
		{"max_new_tokens left out", "    sampling: {max_new_tokens: 16}\n  - name: b", "    sampling: {top_k: 2}\n  - name: b", "agents[0].sampling.max_new_tokens (line 11): required (> 0): the longest response in tokens"},
		{"prompts_per_step left out", "batch: {prompts_per_step: 4, mini_batch: 8}", "batch: {mini_batch: 8}", "batch.prompts_per_step (line 6): required (> 0): prompts drawn each step"},
		{"template kind", "    checkpoint: ckpt/a\n", "    checkpoint: ckpt/a\n    template: {kind: jinja}\n", `agents[0].template.kind (line 10): must be plain, chat or hf, got "jinja"`},
		{"compute dtype", "    checkpoint: ckpt/a\n", "    checkpoint: ckpt/a\n    compute_dtype: fp16\n", `agents[0].compute_dtype (line 10): must be float32 or bfloat16, got "fp16"`},
		{"rollout engine", "    checkpoint: ckpt/a\n", "    checkpoint: ckpt/a\n    rollout: {engine: vllm}\n", `agents[0].rollout.engine (line 10): must be local or openai, got "vllm"`},
		{"rollout dialect", "    checkpoint: ckpt/a\n", "    checkpoint: ckpt/a\n    rollout: {engine: openai, url: \"http://h:1\", dialect: tgi}\n", `agents[0].rollout.dialect (line 10): must be vllm, sglang or hacrl, got "tgi"`},
		{"lora module", "    checkpoint: ckpt/a\n", "    checkpoint: ckpt/a\n    lora: {rank: 4, target_modules: [qproj]}\n", `agents[0].lora.target_modules[0] (line 10): must be one of q_proj, k_proj`},
		{"lora rank left out", "    checkpoint: ckpt/a\n", "    checkpoint: ckpt/a\n    lora: {alpha: 8}\n", "agents[0].lora.rank (line 10): required (> 0)"},
		{"new model family", "    checkpoint: ckpt/a\n", "    model: {family: bert, dim: 8, layers: 1, heads: 2, max_seq: 8}\n    tokenizer: t.json\n", `agents[0].model.family (line 9): must be gpt or llama, got "bert"`},
		{"new model sizes", "    checkpoint: ckpt/a\n", "    model: {family: gpt, dim: 8, heads: 2, max_seq: 8}\n    tokenizer: t.json\n", "agents[0].model.layers (line 9): required (> 0)"},
		{"benchmark", "sets: [{name: test, split: test, problems: 20}]", "sets: [{benchmark: gsm8kk}]", `eval.sets[0].benchmark (line 17): unknown benchmark "gsm8kk"; valid: aime24, aime25, amc23, gsm8k, math`},
		{"split", "sets: [{name: test, split: test, problems: 20}]", "sets: [{split: dev, problems: 20}]", `eval.sets[0].split (line 17): must be test or train, got "dev"`},
		{"split problems", "sets: [{name: test, split: test, problems: 20}]", "sets: [{split: test}]", "eval.sets[0].problems (line 17): required for a generated task's split"},
		{"on_non_finite", "steps: 10\n", "steps: 10\non_non_finite: halt\n", `on_non_finite (line 4): must be skip or stop, got "halt"`},
		{"engine", "steps: 10\n", "steps: 10\nengine: cuda\n", `engine (line 4): must be auto, native or graph, got "cuda"`},
		{"too_long", "task: {name: arith, digits: 2}", "dataset: {path: d.jsonl, too_long: trim}", `dataset.too_long (line 5): must be error or drop, got "trim"`},
		{"reward timeout", "steps: 10\n", "steps: 10\nreward: {url: \"http://h:1\", timeout: soon}\n", `reward.timeout (line 4): must be a duration like 30s or 2m, got "soon"`},
		{"typo", "    sampling: {max_new_tokens: 16}\n  - name: b", "    sampling: {max_new_tokens: 16, temprature: 1}\n  - name: b",
			"agents[0].sampling.temprature (line 11): unknown key; valid keys here: max_batch, max_new_tokens, temperature, top_k, top_p; did you mean temperature?"},
		{"typo, no near key", "steps: 10\n", "steps: 10\nzebra: 1\n", "zebra (line 4): unknown key; valid keys here: agents, backend,"},
		{"type", "steps: 10", "steps: ten", `steps (line 3): cannot read "ten" as an integer`},
		{"section type", "batch: {prompts_per_step: 4, mini_batch: 8}", "batch: 4", `batch (line 6): expected a mapping of keys, got "4"`},
		{"list type", "sets: [{name: test, split: test, problems: 20}]", "sets: test", `eval.sets (line 17): expected a list, got "test"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(setBase, tt.old) {
				t.Fatalf("setBase lacks %q", tt.old)
			}
			src := strings.Replace(setBase, tt.old, tt.new, 1)
			_, err := Parse([]byte(src))
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
		})
	}
	if d := didYouMean("zebra", []string{"agents", "backend", "steps"}); d != "" {
		t.Errorf("didYouMean(zebra) = %q, want none", d)
	}
}

func TestRewardRangeErrors(t *testing.T) {
	base := "steps: 1\nout: o\nmethod: {name: gspo}\ntask: {name: arith}\nbatch: {prompts_per_step: 2, mini_batch: 8}\nagents: [{name: a, model: {family: gpt, dim: 8, layers: 1, heads: 1, max_seq: 32}, tokenizer: t.json, optimizer: {lr: 0.001}, sampling: {max_new_tokens: 8}}]\n"
	for _, c := range []struct{ reward, want string }{
		{"reward: {command: [x], range: [1, 0]}", "reward.range"},
		{"reward: {command: [x], range: [0, 1, 2]}", "reward.range"},
		{"reward: {command: [x], success_above: 1}", "reward.success_above"},
		{"reward: {command: [x], range: [-1, 1], success_above: -2}", "reward.success_above"},
	} {
		_, err := Parse([]byte(base + c.reward + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.reward, err, c.want)
		}
	}
	if _, err := Parse([]byte(base + "reward: {command: [x], range: [-1, 1], success_above: 0}\n")); err != nil {
		t.Errorf("a valid range: %v", err)
	}
}
