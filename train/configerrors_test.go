package train

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/model"
)

// errorsCase is a small run of the shipped example agents; the tests below
// count its lines.
const errorsCase = `name: errors
out: %OUT%
steps: 1
method: {name: hacpo}
task: {name: arith, digits: 2, operators: "+-"}
batch: {prompts_per_step: 2, mini_batch: 8}
agents:
  - name: gpt-char
    checkpoint: examples/agents/gpt-char
    optimizer: {lr: 0.0001}
    sampling: {max_new_tokens: 8}
  - name: llama-bpe
    checkpoint: examples/agents/llama-bpe
    template: {kind: chat}
    optimizer: {lr: 0.0001}
    sampling: {max_new_tokens: 8}
eval:
  at_start: false
  sets: [{name: test, split: test, problems: 4}]
`

// TestStartErrorsNameKeyAndLine: the checks train makes after parsing
// (Resolve, and New before any work) name the key with its line in the file,
// or the --set that gave the value; a model directory that looks like a hub
// id says hacrl downloads nothing and how to make the directory.
func TestStartErrorsNameKeyAndLine(t *testing.T) {
	t.Chdir("..")
	hub := []string{"hacrl downloads nothing", "hf download Qwen/Qwen3-0.6B --local-dir DIR"}
	tests := []struct {
		name     string
		old, new string   // an edit of errorsCase
		sets     []string // --set arguments
		resolve  bool     // the error comes from Resolve (--print-defaults) too
		want     []string
	}{
		{name: "hub id", old: "checkpoint: examples/agents/llama-bpe", new: "checkpoint: Qwen/Qwen3-0.6B",
			want: append([]string{"agents[1].checkpoint (line 13): no directory Qwen/Qwen3-0.6B (want a model directory: config.json"}, hub...)},
		{name: "hub id by --set", sets: []string{"agents[llama-bpe].checkpoint=Qwen/Qwen3-0.6B"},
			want: append([]string{"--set agents[llama-bpe].checkpoint=Qwen/Qwen3-0.6B: no directory Qwen/Qwen3-0.6B"}, hub...)},
		{name: "template from a missing checkpoint", old: "checkpoint: examples/agents/gpt-char", new: "checkpoint: examples/agents/gpt-chr", resolve: true,
			want: []string{"agents[0].checkpoint (line 9): no directory examples/agents/gpt-chr (want a model directory"}},
		{name: "tokenizer file", old: "    template: {kind: chat}\n", new: "    template: {kind: chat}\n    tokenizer: examples/agents/llama-bpe/tokenizer.jsn\n",
			want: []string{"agents[1].tokenizer (line 15): no file examples/agents/llama-bpe/tokenizer.jsn (want a tokenizer.json)"}},
		{name: "backend", old: "steps: 1\n", new: "steps: 1\nbackend: cuda\n",
			want: []string{`backend (line 4): backend "cuda": unknown backend "cuda"; valid: go (go:parallelism=N), xla:cuda or xla:cpu`}},
		{name: "dataset file", old: `task: {name: arith, digits: 2, operators: "+-"}`, new: "dataset: {path: no/such.jsonl}",
			want: []string{"dataset.path (line 5): ", "no/such.jsonl"}},
		{name: "dataset name", old: `task: {name: arith, digits: 2, operators: "+-"}`, new: "dataset: {path: math_trian}",
			want: []string{"dataset.path (line 5): math_trian is neither a .jsonl or .parquet file nor a shared data set (aime24, aime25, amc23, gsm8k, math, "}},
		{name: "eval dataset", old: "sets: [{name: test, split: test, problems: 4}]", new: "sets: [{dataset: no/such.jsonl}]",
			want: []string{"eval.sets[0].dataset (line 19): ", "no/such.jsonl"}},
		{name: "eval dataset by --set", sets: []string{"eval.sets=[{dataset: no/such.jsonl}]"},
			want: []string{"--set eval.sets=[{dataset: no/such.jsonl}]: eval.sets[0].dataset: ", "no/such.jsonl"}},
	}
	t.Setenv("HACRL_BACKEND", "") // the config's backend, not the environment's
	t.Setenv("GOMLX_BACKEND", "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(errorsCase, "%OUT%", filepath.Join(t.TempDir(), "run"), 1)
			if tt.old != "" {
				if !strings.Contains(src, tt.old) {
					t.Fatalf("errorsCase lacks %q", tt.old)
				}
				src = strings.Replace(src, tt.old, tt.new, 1)
			}
			sets, err := config.ParseSets(tt.sets)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse([]byte(src), sets...)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s: no error", what)
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s:\n%v\nwant it to contain %q", what, err, w)
					}
				}
			}
			if tt.resolve {
				_, err := Resolve(cfg)
				check("Resolve", err)
			}
			r, err := New(context.Background(), cfg, Options{})
			if err == nil {
				r.Close()
			}
			check("New", err)
		})
	}
}

// TestModelDirHints: the commands' CHECKPOINT, --base and --adapter, an
// adapter's base_model_name_or_path and an SFT config's checkpoint get the
// same word on hub ids, from one helper (ModelDirError).
func TestModelDirHints(t *testing.T) {
	dir := t.TempDir()
	adapter := filepath.Join(dir, "adapter")
	if err := os.Mkdir(adapter, 0o755); err != nil {
		t.Fatal(err)
	}
	acfg := `{"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 4, "target_modules": ["c_attn"], "base_model_name_or_path": "Qwen/Qwen3-0.6B"}`
	if err := os.WriteFile(filepath.Join(adapter, model.AdapterConfigFile), []byte(acfg), 0o644); err != nil {
		t.Fatal(err)
	}
	sft, err := config.ParseSFT([]byte("out: " + filepath.Join(dir, "sft") + "\ncheckpoint: Qwen/Qwen3-0.6B\ntask: {name: arith}\nexamples: 4\nsteps: 1\noptimizer: {lr: 0.001}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"CHECKPOINT", func() error { _, err := LoadSaved("Qwen/Qwen3-0.6B", TemplateChoice{}); return err }, "checkpoint: no directory Qwen/Qwen3-0.6B"},
		{"--adapter", func() error { _, err := LoadSavedAdapter("", "Qwen/Qwen3-0.6B", TemplateChoice{}); return err }, "adapter: no directory Qwen/Qwen3-0.6B"},
		{"--base", func() error { _, err := AdapterBase("Qwen/Qwen3-0.6B", adapter); return err }, "base: no directory Qwen/Qwen3-0.6B"},
		{"adapter's base", func() error { _, err := AdapterBase("", adapter); return err }, `its base "Qwen/Qwen3-0.6B" (base_model_name_or_path in adapter_config.json) is not a model directory here: give its base (--base DIR)`},
		{"merge --adapter", func() error { return MergeAdapter(nil, "", "Qwen/Qwen3-0.6B", filepath.Join(dir, "merged"), "") }, "merge: adapter: no directory Qwen/Qwen3-0.6B"},
		{"sft checkpoint", func() error { _, err := SFT(context.Background(), sft, os.Stderr); return err }, "checkpoint (line 2): no directory Qwen/Qwen3-0.6B"},
	}
	for _, tt := range tests {
		err := tt.err()
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, w := range []string{tt.want, "hacrl downloads nothing", "hf download Qwen/Qwen3-0.6B --local-dir DIR"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s:\n%v\nwant it to contain %q", tt.name, err, w)
			}
		}
	}
	if err := ModelDirError("x", "examples/agents/gpt-chr"); err == nil || strings.Contains(err.Error(), "hub id") {
		t.Errorf("a local path that is not there: %v, want no hub hint", err)
	}
}

// TestResumeDiffSuggestsSet: a resume refused for a config that differs
// names each key with the --set that matches the checkpoint, and that --set
// does make the training configs (and so their hashes) equal.
func TestResumeDiffSuggestsSet(t *testing.T) {
	src := strings.Replace(errorsCase, "%OUT%", "runs/x", 1)
	parse := func(args ...string) *config.Config {
		t.Helper()
		sets, err := config.ParseSets(args)
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Parse([]byte(src), sets...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	training := func(c *config.Config) string {
		t.Helper()
		j, err := trainingConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		return string(j)
	}
	ckpt := training(parse("agents[llama-bpe].optimizer.lr=3e-4", "task.digits=3", "agents[0].template.kind=plain"))
	diff, err := configDiff([]byte(ckpt), []byte(training(parse("method.alpha=0.5"))))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(diff, "\n")
	for _, w := range []string{
		"agents[1].optimizer.lr: checkpoint 0.0003, config 0.0001 (--set 'agents[1].optimizer.lr=0.0003' matches the checkpoint)",
		"task.digits: checkpoint 3, config 2 (--set task.digits=3 matches the checkpoint)",
		`agents[0].template.kind: checkpoint "plain", config unset (--set 'agents[0].template.kind="plain"' matches the checkpoint)`,
		"method.alpha: checkpoint unset, config 0.5 (the checkpoint's config leaves it out: so must this one)",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("diff:\n%s\nwant a line %q", text, w)
		}
	}
	// An agent the config lacks gets no --set for its keys.
	two := training(parse())
	one := training(parse("agents=[{name: gpt-char, checkpoint: examples/agents/gpt-char, optimizer: {lr: 0.0001}, sampling: {max_new_tokens: 8}}]", "method.name=grpo"))
	diff, err = configDiff([]byte(two), []byte(one))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range diff {
		if strings.HasPrefix(l, "agents[1].") && strings.Contains(l, "--set") {
			t.Errorf("a key of an agent the config lacks: %s", l)
		}
	}
	if !slices.Contains(diff, "agents[1].name: checkpoint \"llama-bpe\", config unset") {
		t.Errorf("diff %q lacks the dropped agent", diff)
	}
	// Pasting the suggested flags (a shell would drop the quotes) gives the
	// checkpoint's training config.
	var args []string
	for _, m := range regexp.MustCompile(`\(--set (\S+) matches`).FindAllStringSubmatch(text, -1) {
		args = append(args, strings.TrimSuffix(strings.TrimPrefix(m[1], "'"), "'"))
	}
	if len(args) != 3 {
		t.Fatalf("suggested %q, want 3 flags", args)
	}
	if got := training(parse(args...)); got != ckpt || configHash([]byte(got)) != configHash([]byte(ckpt)) {
		t.Errorf("with the suggested %q the training config is\n%s\nwant the checkpoint's\n%s", args, got, ckpt)
	}
}
