package config

import (
	"strings"
	"testing"
)

// setBase is a small valid run config; its lines are counted by the tests.
const setBase = `name: base
out: runs/base
steps: 10
method: {name: hacpo}
task: {name: arith, digits: 2}
batch: {prompts_per_step: 4, mini_batch: 8}
agents:
  - name: a
    checkpoint: ckpt/a
    optimizer: &opt {lr: 0.0001}
    sampling: {max_new_tokens: 16}
  - name: b
    checkpoint: ckpt/b
    optimizer: *opt
    sampling: {max_new_tokens: 16}
eval:
  sets: [{name: test, split: test, problems: 20}]
`

// TestSetIsAFileEdit: a config with --set overrides holds the same values as
// the file edited to those values (applied in order, the last one winning),
// for scalars, agents by index and by name, whole lists as flow YAML, new
// sections, null (back to the default), and a key inside an anchored value,
// which changes only the entry it names.
func TestSetIsAFileEdit(t *testing.T) {
	tests := []struct {
		name   string
		sets   []string
		edited string // setBase with the same changes written into it
	}{
		{"scalars", []string{"steps=100", "eval.every=10", "agents[0].optimizer.lr=2e-4"},
			strings.NewReplacer("steps: 10", "steps: 100", "optimizer: &opt {lr: 0.0001}", "optimizer: {lr: 2e-4}", "optimizer: *opt", "optimizer: {lr: 0.0001}", "eval:\n", "eval:\n  every: 10\n").Replace(setBase)},
		{"agent by name", []string{"agents[b].sampling.temperature=0.5"},
			strings.Replace(setBase, "optimizer: *opt\n    sampling: {max_new_tokens: 16}", "optimizer: *opt\n    sampling: {max_new_tokens: 16, temperature: 0.5}", 1)},
		{"flow list", []string{"eval.sets=[{name: t2, split: train, problems: 5, samples: 2}]"},
			strings.Replace(setBase, "sets: [{name: test, split: test, problems: 20}]", "sets: [{name: t2, split: train, problems: 5, samples: 2}]", 1)},
		{"new section", []string{"agents[1].lora={rank: 4}", "agents[1].lora.alpha=16"},
			strings.Replace(setBase, "    checkpoint: ckpt/b\n", "    checkpoint: ckpt/b\n    lora: {rank: 4, alpha: 16}\n", 1)},
		{"last wins", []string{"steps=5", "steps=7"}, strings.Replace(setBase, "steps: 10", "steps: 7", 1)},
		{"null is the default", []string{"agents[0].sampling.max_new_tokens=16", "batch.responses_per_prompt="}, setBase},
		{"map key", []string{"agents[0].template.kind=hf", "agents[0].template.vars.enable_thinking=false"},
			strings.Replace(setBase, "    checkpoint: ckpt/a\n", "    checkpoint: ckpt/a\n    template: {kind: hf, vars: {enable_thinking: false}}\n", 1)},
		{"a whole entry", []string{"agents[1]={name: c, checkpoint: ckpt/c, optimizer: {lr: 1e-3}, sampling: {max_new_tokens: 8}}"},
			strings.Replace(setBase, "  - name: b\n    checkpoint: ckpt/b\n    optimizer: *opt\n    sampling: {max_new_tokens: 16}\n", "  - {name: c, checkpoint: ckpt/c, optimizer: {lr: 1e-3}, sampling: {max_new_tokens: 8}}\n", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sets, err := ParseSets(tt.sets)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse([]byte(setBase), sets...)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Parse([]byte(tt.edited))
			if err != nil {
				t.Fatalf("edited file: %v\n%s", err, tt.edited)
			}
			if strings.Join(got.Sets, "\n") != strings.Join(tt.sets, "\n") {
				t.Errorf("Sets = %q, want %q", got.Sets, tt.sets)
			}
			got.Sets = nil
			if !sameValues(got, want) {
				t.Errorf("with --set:\n%s\nedited file:\n%s", mustMarshal(t, got), mustMarshal(t, want))
			}
		})
	}
	// The anchor's other user keeps the file's value.
	sets, _ := ParseSets([]string{"agents[0].optimizer.lr=0.5"})
	c, err := Parse([]byte(setBase), sets...)
	if err != nil {
		t.Fatal(err)
	}
	if c.Agents[0].Optimizer.LR != 0.5 || c.Agents[1].Optimizer.LR != 0.0001 {
		t.Errorf("lr = %g, %g; want 0.5 for agents[0] only", c.Agents[0].Optimizer.LR, c.Agents[1].Optimizer.LR)
	}
}

func mustMarshal(t *testing.T, c *Config) string {
	t.Helper()
	data, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestSetErrors: a bad --set is refused naming the flag as given, and, for
// an error inside a value it set, the key there; checks are the file's
// (unknown keys with the valid ones and a suggestion, types, ranges, names),
// and errors elsewhere still name their line.
func TestSetErrors(t *testing.T) {
	tests := []struct {
		set  string
		want []string
	}{
		{"steps", []string{"--set steps: want KEY=VALUE"}},
		{"agents[0.lr=1", []string{`--set agents[0.lr=1: key "agents[0.lr": [ without ]`}},
		{"agents..lr=1", []string{"empty key name"}},
		{"steps=[1", []string{"--set steps=[1: value \"[1\" is not valid YAML"}},
		{"agents[0].optimizer.lr=abc", []string{`--set agents[0].optimizer.lr=abc: cannot read "abc" as a number`}},
		{"agents[1].optimizer.lr=0", []string{"--set agents[1].optimizer.lr=0: must be > 0, got 0"}},
		{"steps=2.5", []string{`--set steps=2.5: cannot read "2.5" as an integer: not a whole number`}},
		{"agents[2].optimizer.lr=1", []string{"--set agents[2].optimizer.lr=1: agents has 2 entries, agents[0] to agents[1]"}},
		{"agents[-1].optimizer.lr=1", []string{"agents has 2 entries"}},
		{"agents[c].optimizer.lr=1", []string{`--set agents[c].optimizer.lr=1: agents has no entry named "c"; names: a, b`}},
		{"agents[0].sampling.temprature=1", []string{"--set agents[0].sampling.temprature=1: unknown key; valid keys here: max_batch, max_new_tokens, temperature, top_k, top_p; did you mean temperature?"}},
		{"agents[0].optimzer.lr=1", []string{"--set agents[0].optimzer.lr=1: agents[0].optimzer: unknown key; valid keys here: ", "did you mean optimizer?"}},
		{"steps.x=1", []string{`--set steps.x=1: steps is "10" (line 3), not a mapping with a key x`}},
		{"name[0]=x", []string{`--set name[0]=x: name is "base" (line 1), not a list`}},
		{"rollouts.every[0]=1", []string{"rollouts.every is not in the config, so it has no entry [0]; set the whole list"}},
		{"method.name=ppo", []string{`--set method.name=ppo: unknown method "ppo"; valid: cispo, dapo, dr_grpo, grpo, gspo, gspo2x, hacpo, hacpo-capable, naive, no-adv, no-cross-clip, no-omega, no-stepwise`}},
		{"eval.sets=[{name: t, split: test, problms: 5}]", []string{"--set eval.sets=[{name: t, split: test, problms: 5}]: eval.sets[0].problms: unknown key", "did you mean problems?"}},
		{"eval.sets=[{name: t, split: test}]", []string{"--set eval.sets=[{name: t, split: test}]: eval.sets[0].problems: required for a generated task's split"}},
		{"eval.sets[0]={benchmark: gsm8kk}", []string{`--set eval.sets[0]={benchmark: gsm8kk}: eval.sets[0].benchmark: unknown benchmark "gsm8kk"; valid: `, "gsm8k, math"}},
		{"agents[0].optimizer={beta1: 0.9}", []string{"--set agents[0].optimizer={beta1: 0.9}: agents[0].optimizer.lr: required (> 0)"}},
		{"agents[0].sampling.top_p=0", []string{"--set agents[0].sampling.top_p=0: must not be 0; without the override the default applies (1)"}},
		{"task.digits=13", []string{"--set task.digits=13: must be in 1..12, got 13"}},
		{"task.numbers=4", []string{"--set task.numbers=4: is an option of countdown, not of arith"}},
		{"agents[1].template.kind=jinja", []string{`--set agents[1].template.kind=jinja: must be plain, chat or hf, got "jinja"`}},
		// An error the override causes elsewhere names that place's line.
		{"batch.micro_batch=3", []string{"--set batch.micro_batch=3: must divide batch.mini_batch (8), got 3"}},
		{"task.name=countdown", []string{"task.digits (line 5): is an option of arith, not of countdown"}},
	}
	for _, tt := range tests {
		sets, err := ParseSets([]string{tt.set})
		if err == nil {
			_, err = Parse([]byte(setBase), sets...)
		}
		if err == nil {
			t.Errorf("--set %s: accepted", tt.set)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("--set %s:\n%v\nwant it to contain %q", tt.set, err, w)
			}
		}
	}
}

// TestSetIntoEmptyList: an entry of a list the file leaves empty cannot be
// set; the error says to set the whole list.
func TestSetIntoEmptyList(t *testing.T) {
	src := strings.Replace(setBase, "  sets: [{name: test, split: test, problems: 20}]", "  sets:", 1)
	set, _ := ParseSet("eval.sets[0].problems=1")
	_, err := Parse([]byte(src), set)
	if want := "--set eval.sets[0].problems=1: eval.sets is empty (line 17), so it has no entry [0]; set the whole list (--set 'eval.sets=[...]')"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestSetFlag: the flags that OUT/config.yaml and resume errors print are
// quoted where a shell would change them, and parse back to the argument.
func TestSetFlag(t *testing.T) {
	for arg, want := range map[string]string{
		"steps=100":                    "--set steps=100",
		"agents[0].optimizer.lr=2e-4":  "--set 'agents[0].optimizer.lr=2e-4'",
		"eval.sets=[{name: it's, x}]":  `--set 'eval.sets=[{name: it'\''s, x}]'`,
		`agents[0].template.kind="hf"`: `--set 'agents[0].template.kind="hf"'`,
	} {
		if got := SetFlag(arg); got != want {
			t.Errorf("SetFlag(%q) = %s, want %s", arg, got, want)
		}
	}
}

// TestFlagOverride: the flags of their own (--steps, --out, ...) apply after
// the --sets, are checked the same way with errors that name the flag, keep
// a string a string, and are not recorded among Sets; ParseSFT takes both.
func TestFlagOverride(t *testing.T) {
	set, _ := ParseSet("steps=5")
	steps, err := FlagOverride("--steps", "steps", int64(7))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := FlagOverride("--out", "out", "~")
	c, err := Parse([]byte(setBase), set, steps, out)
	if err != nil {
		t.Fatal(err)
	}
	if c.Steps != 7 || c.Out != "~" || strings.Join(c.Sets, ",") != "steps=5" {
		t.Errorf("steps %d, out %q, Sets %q; want 7, ~, [steps=5]", c.Steps, c.Out, c.Sets)
	}
	bad, _ := FlagOverride("--steps", "steps", int64(-1))
	if _, err := Parse([]byte(setBase), bad); err == nil || !strings.Contains(err.Error(), "--steps -1: must be >= 0, got -1") {
		t.Errorf("--steps -1: %v", err)
	}
	sft := "out: o\ncheckpoint: c\ntask: {name: arith}\nexamples: 4\nsteps: 1\noptimizer: {lr: 1e-3}\n"
	lr, _ := ParseSet("optimizer.lr=2e-4")
	problems, _ := FlagOverride("--eval-problems", "eval.problems", 0)
	s, err := ParseSFT([]byte(sft), lr)
	if err != nil || s.Optimizer.LR != 2e-4 {
		t.Errorf("sft with --set optimizer.lr=2e-4: lr %v, %v", s, err)
	}
	if _, err := ParseSFT([]byte(sft), problems); err == nil || !strings.Contains(err.Error(), "--eval-problems 0: must not be 0; without the override the default applies (200)") {
		t.Errorf("sft --eval-problems 0: %v", err)
	}
}
