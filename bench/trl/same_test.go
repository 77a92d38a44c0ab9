// Package trl_test holds the two sides of bench/trl to the same GRPO step:
// hacrl-grpo.yaml (hacrl's side), grpo_step.py (TRL's) and compare.sh's
// defaults must name the same batch, lengths, optimizer and loss settings,
// and those of hacrl's grpo preset, so that an edit to one file that is not
// made to the others fails here instead of skewing the benchmark.
package trl_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
)

// value returns the first submatch of re in text, failing t when there is
// none (the file no longer says it the way this test reads it).
func value(t *testing.T, file, text, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%s: no match for %q", file, re)
	}
	return m[1]
}

func number(t *testing.T, file, text, re string) float64 {
	t.Helper()
	s := value(t, file, text, re)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%s: %q (from %q): %v", file, s, re, err)
	}
	return v
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSameStep(t *testing.T) {
	cfg, err := config.Load("hacrl-grpo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	py := read(t, "grpo_step.py")
	sh := read(t, "compare.sh")
	if len(cfg.Agents) != 1 {
		t.Fatalf("hacrl-grpo.yaml: %d agents, want 1", len(cfg.Agents))
	}
	a := cfg.Agents[0]
	preset := hacpo.MustPreset("grpo")
	if cfg.Method.Name != "grpo" || cfg.Method.KLCoef != nil || cfg.Method.ClipLow != nil || cfg.Method.ClipHigh != nil {
		t.Errorf("hacrl-grpo.yaml: method %+v, want the grpo preset without overrides", cfg.Method)
	}
	B, G := cfg.Batch.PromptsPerStep, cfg.Batch.ResponsesPerPrompt
	if cfg.Batch.MiniBatch != B*G {
		t.Errorf("hacrl-grpo.yaml: mini_batch %d, want B·G = %d (one update per step, as TRL's)", cfg.Batch.MiniBatch, B*G)
	}
	if cfg.Dataset == nil || cfg.Dataset.Path != "runs/trl-grpo/problems.jsonl" || a.Checkpoint != "runs/trl-grpo/model" {
		t.Errorf("hacrl-grpo.yaml: dataset %+v, checkpoint %q: want what compare.sh prepares in runs/trl-grpo", cfg.Dataset, a.Checkpoint)
	}
	// The Python string literal's \\ is one backslash.
	want := regexp.MustCompile(`\\\\`).ReplaceAllString(value(t, "grpo_step.py", py, `SUFFIX = "(.*)"`), `\`)
	if cfg.Dataset != nil && want != cfg.Dataset.PromptSuffix {
		t.Errorf("prompt suffix: hacrl-grpo.yaml %q, grpo_step.py %q", cfg.Dataset.PromptSuffix, want)
	}
	o, s := a.Optimizer, a.Sampling
	for _, c := range []struct {
		what       string
		hacrl, got float64
	}{
		// compare.sh's defaults are the yaml's values (it edits them for its flags).
		{"compare.sh prompts", float64(B), number(t, "compare.sh", sh, `\bprompts=(\d+)`)},
		{"compare.sh responses", float64(G), number(t, "compare.sh", sh, `\bresponses=(\d+)`)},
		{"compare.sh max_new", float64(s.MaxNewTokens), number(t, "compare.sh", sh, `\bmax_new=(\d+)`)},
		{"compare.sh micro", float64(cfg.Batch.MicroBatch), number(t, "compare.sh", sh, `\bmicro=(\d+)`)},
		{"compare.sh steps", float64(cfg.Steps), number(t, "compare.sh", sh, `\bsteps=(\d+)`)},
		{"compare.sh kl", preset.KLCoef, number(t, "compare.sh", sh, `\bkl=([0-9.e-]+)`)},
		// grpo_step.py's GRPOConfig and defaults.
		{"prompts", float64(B), number(t, "grpo_step.py", py, `"--prompts", type=int, default=(\d+)`)},
		{"responses", float64(G), number(t, "grpo_step.py", py, `"--responses", type=int, default=(\d+)`)},
		{"max_new_tokens", float64(s.MaxNewTokens), number(t, "grpo_step.py", py, `"--max-new-tokens", type=int, default=(\d+)`)},
		{"micro_batch", float64(cfg.Batch.MicroBatch), number(t, "grpo_step.py", py, `"--micro-batch", type=int, default=(\d+)`)},
		{"steps", float64(cfg.Steps), number(t, "grpo_step.py", py, `"--steps", type=int, default=(\d+)`)},
		{"kl_coef", preset.KLCoef, number(t, "grpo_step.py", py, `"--kl-coef", type=float, default=([0-9.e-]+)`)},
		{"clip low", preset.SelfClipLow, number(t, "grpo_step.py", py, `\bepsilon=([0-9.e-]+)`)},
		{"clip high", preset.SelfClipHigh, number(t, "grpo_step.py", py, `\bepsilon_high=([0-9.e-]+)`)},
		{"lr", o.LR, number(t, "grpo_step.py", py, `\blearning_rate=([0-9.e-]+)`)},
		{"weight_decay", *o.WeightDecay, number(t, "grpo_step.py", py, `\bweight_decay=([0-9.e-]+)`)},
		{"beta1", o.Beta1, number(t, "grpo_step.py", py, `\badam_beta1=([0-9.e-]+)`)},
		{"beta2", o.Beta2, number(t, "grpo_step.py", py, `\badam_beta2=([0-9.e-]+)`)},
		{"epsilon", o.Epsilon, number(t, "grpo_step.py", py, `\badam_epsilon=([0-9.e-]+)`)},
		{"max_grad_norm", *o.MaxGradNorm, number(t, "grpo_step.py", py, `\bmax_grad_norm=([0-9.e-]+)`)},
		{"temperature", *s.Temperature, number(t, "grpo_step.py", py, `\btemperature=([0-9.e-]+)`)},
		{"top_p", s.TopP, number(t, "grpo_step.py", py, `\btop_p=([0-9.e-]+)`)},
		{"top_k", float64(s.TopK), number(t, "grpo_step.py", py, `\btop_k=(\d+)`)},
	} {
		if c.hacrl != c.got {
			t.Errorf("%s: hacrl's side %v, the other file %v", c.what, c.hacrl, c.got)
		}
	}
	if preset.RatioLevel != hacpo.TokenLevel || value(t, "grpo_step.py", py, `loss_type="(\w+)"`) != "grpo" {
		t.Errorf("want the token-level ratio (preset %q) and TRL's loss_type grpo (its seq-mean-token-mean)", preset.RatioLevel)
	}
	if o.Schedule != "constant" || value(t, "grpo_step.py", py, `lr_scheduler_type="(\w+)"`) != "constant" {
		t.Errorf("schedule: hacrl %q; want constant on both sides", o.Schedule)
	}
}
