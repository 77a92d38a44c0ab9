//go:build xla

package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hacrl/hacrl/internal/xlatest"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/model"
)

// A shortened run of the main example trains on XLA's graphs (xla:cpu, the
// GPU path's compiler and runtime) end to end: every step's metrics are
// finite, the evaluation before training gives the greedy accuracy the
// native engine gives, and the agents it saves load.
func TestXLATrain(t *testing.T) {
	xlatest.Plugin(t)
	t.Chdir("../..")
	var cfg map[string]any
	raw, err := os.ReadFile("examples/arith-hacpo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["batch"] = map[string]any{"prompts_per_step": 4, "responses_per_prompt": 4, "mini_batch": 16, "micro_batch": 16}
	cfg["eval"] = map[string]any{"every": 2, "sets": []any{map[string]any{"name": "test", "split": "test", "problems": 8, "samples": 1}}}
	cfg["checkpoint"] = map[string]any{"every": 2, "keep": 1}
	for _, a := range cfg["agents"].([]any) {
		a := a.(map[string]any)
		abs, err := filepath.Abs(a["checkpoint"].(string))
		if err != nil {
			t.Fatal(err)
		}
		a["checkpoint"] = abs
	}
	dir := t.TempDir()
	path, out := filepath.Join(dir, "arith-xla.yaml"), filepath.Join(dir, "run")
	raw, err = yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := runHacrl(t, "train", path, "--steps", "2", "--out", out, "--backend", xlatest.Config)
	if code != 0 {
		t.Fatalf("hacrl train on %s: exit %d\nstdout:\n%s\nstderr:\n%s", xlatest.Config, code, stdout, stderr)
	}
	native := filepath.Join(dir, "native")
	if stdout, stderr, code := runHacrl(t, "train", path, "--steps", "0", "--out", native, "--backend", "go:ops_sequential"); code != 0 {
		t.Fatalf("hacrl train on the Go backend: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	recs := runMetrics(t, out)
	want := stepZeroGreedy(t, runMetrics(t, native))
	got := stepZeroGreedy(t, recs)
	for a, acc := range want {
		if got[a] != acc {
			t.Errorf("agent %s: greedy accuracy before training %v on XLA, %v natively", a, got[a], acc)
		}
		if acc == 0 {
			t.Errorf("agent %s: greedy accuracy 0 before training: the check needs agents that solve some problems", a)
		}
	}

	steps := map[string]int{}
	for _, rec := range recs {
		for k, x := range rec.Values {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Errorf("metrics: step %d agent %q: %s = %v", rec.Step, rec.Agent, k, x)
			}
		}
		if _, ok := rec.Values["loss/policy"]; ok {
			steps[rec.Agent]++
			for _, k := range []string{"time/sample", "time/score", "time/update"} {
				if x := rec.Values[k]; x <= 0 {
					t.Errorf("metrics: step %d agent %q: %s = %v, want a positive time", rec.Step, rec.Agent, k, x)
				}
			}
		}
	}
	for _, a := range []string{"gpt-char", "llama-bpe"} {
		if steps[a] != 2 {
			t.Errorf("agent %s: %d training steps in metrics.jsonl, want 2", a, steps[a])
		}
	}

	// The saved agents are ordinary checkpoints.
	matches, _ := filepath.Glob(filepath.Join(out, "*", "*", "config.json"))
	if len(matches) == 0 {
		t.Fatalf("no agent checkpoint under %s", out)
	}
	for _, m := range matches {
		if _, err := model.Load(xlatest.Backend(t), filepath.Dir(m)); err != nil {
			t.Errorf("loading %s: %v", filepath.Dir(m), err)
		}
	}
}

// runMetrics reads the metrics.jsonl of the run in out.
func runMetrics(t *testing.T, out string) []metrics.Record {
	t.Helper()
	recs, err := metrics.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// stepZeroGreedy returns each agent's greedy test accuracy at step 0.
func stepZeroGreedy(t *testing.T, recs []metrics.Record) map[string]float64 {
	t.Helper()
	acc := map[string]float64{}
	for _, rec := range recs {
		if v, ok := rec.Values["eval/test/greedy_acc"]; ok && rec.Step == 0 {
			acc[rec.Agent] = v
		}
	}
	if len(acc) != 2 {
		t.Fatalf("step-0 greedy accuracy for %d agents, want 2: %v", len(acc), acc)
	}
	return acc
}
