package train

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/model"
)

// poison makes every gradient weight of one learner's mini-batch NaN.
func poison(agent string, m int) func(int, string, int, [][]float32) {
	return func(step int, a string, mb int, grad [][]float32) {
		if step == 1 && a == agent && mb == m {
			for _, row := range grad {
				for i := range row {
					row[i] = float32(math.NaN())
				}
			}
		}
	}
}

func TestNonFiniteGuardSkips(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "hacpo", 1)
	cfg.Eval.Sets = nil
	run, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	run.gradHook = poison("llama-char", 1)
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Agent == "" {
			continue
		}
		want := 0.0
		if r.Agent == "llama-char" {
			want = 1
		}
		if got := r.Values["skipped_minibatches"]; got != want {
			t.Errorf("%s skipped %v mini-batches, want %v", r.Agent, got, want)
		}
		if r.Agent == "llama-char" && r.Values["updates"] != 2 {
			t.Errorf("llama-char made %v updates, want 2 of 3", r.Values["updates"])
		}
	}
	// The checkpoint holds finite weights only.
	b := run.backend
	for _, name := range []string{"gpt-char", "llama-char", "llama-bpe"} {
		m, err := model.Load(b, filepath.Join(cfg.Out, "final", name))
		if err != nil {
			t.Fatal(err)
		}
		sc, err := m.Score(context.Background(), []model.Sequence{{Prompt: []int{1, 2}, Response: []int{3, 4}}}, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range sc.LogProbs[0] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Errorf("%s: non-finite log-prob %v from the saved weights", name, v)
			}
		}
	}
}

func TestNonFiniteGuardStops(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "hacpo", 1)
	cfg.Eval.Sets = nil
	cfg.OnNonFinite = "stop"
	run, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	run.gradHook = poison("gpt-char", 2)
	_, err = run.Train(context.Background())
	if err == nil {
		t.Fatal("want the run to stop")
	}
	if want := "step 1: agent gpt-char: mini-batch 2: non-finite gradient"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %q", err, want)
	}
	if cks, _ := listCheckpoints(cfg.Out); len(cks) != 0 {
		t.Errorf("a stopped run left checkpoints %v", cks)
	}
}
