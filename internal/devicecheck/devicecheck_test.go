//go:build xla

package devicecheck

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/internal/pyenv"
	"github.com/hacrl/hacrl/internal/shared"
	"github.com/hacrl/hacrl/internal/xlatest"
)

// report is the part of device-check.json the test reads.
type report struct {
	Mode string `json:"mode"`
	Env  struct {
		HacrlRuns bool     `json:"hacrl_runs"`
		Errors    []string `json:"errors"`
	} `json:"env"`
	Parts []struct {
		Name   string   `json:"name"`
		Status string   `json:"status"`
		Stderr []string `json:"stderr_tail"`
	} `json:"parts"`
	Logprobs map[string]float64 `json:"logprobs"`
	Bench    []struct {
		Model string         `json:"model"`
		DType string         `json:"dtype"`
		Hacrl map[string]any `json:"hacrl"`
		Torch map[string]any `json:"torch"`
	} `json:"bench"`
	Hacpo map[string]map[string]float64 `json:"hacpo"`
}

func TestXLADeviceCheckDryRun(t *testing.T) {
	python := pyenv.Python(t)
	plugin := xlatest.Plugin(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, ok := shared.RepoRoot(wd)
	if !ok {
		t.Fatalf("no go.mod above %s", wd)
	}
	dir := t.TempDir()
	bin, out := filepath.Join(dir, "hacrl-xla"), filepath.Join(dir, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	build := exec.CommandContext(ctx, "bash", "scripts/build-xla.sh", bin)
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build-xla.sh: %v\n%s", err, b)
	}

	run := exec.CommandContext(ctx, "bash", "scripts/device-check.sh", "--cpu")
	run.Dir = root
	run.Env = append(pyenv.Env(), "OUT="+out, "HACRL="+bin, "PYTHON="+python, "TMPDIR="+dir,
		backend.XLAPluginEnv+"="+plugin)
	start := time.Now()
	b, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/device-check.sh --cpu: %v\n%s", err, b)
	}
	t.Logf("scripts/device-check.sh --cpu: %s\n%s", time.Since(start).Round(time.Second), b)

	data, err := os.ReadFile(filepath.Join(out, "device-check.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("device-check.json: %v", err)
	}
	if md, err := os.ReadFile(filepath.Join(out, "device-check.md")); err != nil {
		t.Error(err)
	} else if !strings.Contains(string(md), "| hacpo | ok |") {
		t.Errorf("device-check.md has no row for the HACPO part:\n%s", md)
	}
	if rep.Mode != "cpu" || !rep.Env.HacrlRuns {
		t.Errorf("mode %q, hacrl runs %v (want cpu, true); environment messages: %q", rep.Mode, rep.Env.HacrlRuns, rep.Env.Errors)
	}

	// Every part, and each one finished.
	want := map[string]bool{"logprobs": true, "hacpo": true}
	// The dry run benchmarks Qwen3's shape in bfloat16 and Llama's in float32.
	models := []string{"qwen3-0.6b", "llama3.2-1b"}
	benches := map[string]string{"qwen3-0.6b": "bfloat16", "llama3.2-1b": "float32"}
	for _, side := range []string{"hacrl", "torch"} {
		for m, dt := range benches {
			want["bench-"+side+"-"+m+"-"+dt] = true
		}
	}
	for _, p := range rep.Parts {
		if !want[p.Name] {
			t.Errorf("unexpected part %q", p.Name)
			continue
		}
		delete(want, p.Name)
		if p.Status != "ok" {
			t.Errorf("part %s: %s; stderr ends:\n%s", p.Name, p.Status, strings.Join(p.Stderr, "\n"))
		}
	}
	for name := range want {
		t.Errorf("part %s is missing from the report", name)
	}

	// Log-probs: hacrl on xla:cpu against transformers on the CPU, same
	// checkpoint. float32 agrees to 1e-4; bfloat16 products (autocast on
	// both sides) differ from float32 by more than nothing (both really ran
	// in bfloat16) and agree with each other to bfloat16's precision.
	lp := rep.Logprobs
	for _, c := range []struct {
		key      string
		min, max float64
	}{
		{"tokens", 100, 1000},
		{"float32_max_abs_diff", 0, 1e-4},
		{"bfloat16_max_abs_diff", 0, 0.05},
		{"hacrl_bf16_vs_f32", 1e-4, 0.1},
		{"transformers_bf16_vs_f32", 1e-4, 0.1},
		{"hacrl_bf16_fused_vs_decomposed", 0, 0}, // xla:cpu has no fused attention: the same path twice
	} {
		v, ok := lp[c.key]
		if !ok || math.IsNaN(v) || v < c.min || v > c.max {
			t.Errorf("logprobs.%s = %v (present %v), want within [%g, %g]", c.key, v, ok, c.min, c.max)
		}
	}

	// The benchmark: both sides of every model and dtype, the same model
	// (parameter count), positive finite throughput and utilisation.
	if len(rep.Bench) != len(benches) {
		t.Errorf("%d benchmark rows, want %d", len(rep.Bench), len(benches))
	}
	for _, r := range rep.Bench {
		for side, e := range map[string]map[string]any{"hacrl": r.Hacrl, "torch": r.Torch} {
			for _, k := range []string{"train_tokens_per_s", "sample_tokens_per_s", "train_mfu", "sample_mfu", "params"} {
				if v, ok := e[k].(float64); !ok || !(v > 0) || math.IsInf(v, 0) {
					t.Errorf("bench %s %s %s: %s = %v, want a positive finite number", r.Model, r.DType, side, k, e[k])
				}
			}
		}
		if r.Hacrl["params"] != r.Torch["params"] {
			t.Errorf("bench %s %s: hacrl has %v parameters, PyTorch %v: not the same model", r.Model, r.DType, r.Hacrl["params"], r.Torch["params"])
		}
	}

	// The HACPO step: each agent's sampling, scoring and update times, and
	// the step's.
	for _, agent := range models {
		for _, phase := range []string{"sample", "score", "update"} {
			if v := rep.Hacpo[agent][phase]; !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("hacpo %s time/%s = %v, want a positive finite number", agent, phase, v)
			}
		}
	}
	if v := rep.Hacpo["(whole step)"]["step"]; !(v > 0) || math.IsInf(v, 0) {
		t.Errorf("hacpo time/step = %v, want a positive finite number", v)
	}
}
