package train

import (
	"cmp"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/rollout"
)

// TestSemanticsOriginalRun trains the warm-started three-agent example one
// step under each semantics from the same seed. Both sample the same
// rollouts (nothing has been updated yet); each learner's logged mini-batch
// membership is the plan of its semantics, computed here from the logged
// lengths (the original: verl's balance_batch over 8 ranks of each response's
// prompt + response tokens as its source sampled it); and the losses differ.
func TestSemanticsOriginalRun(t *testing.T) {
	type result struct {
		recs []rollout.Record
		vals map[string]map[string]float64 // agent → metric
		plan string
	}
	runOne := func(semantics string) (result, *Run) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		cfg := exampleConfig(t, out)
		cfg.Steps = 1
		cfg.Method.Semantics = semantics
		cfg.Checkpoint.Every = 0
		run, err := New(context.Background(), cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { run.Close() })
		res := result{plan: run.Plan(), vals: map[string]map[string]float64{}}
		if _, err := run.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		if res.recs, err = rollout.ReadLog(rollout.LogPath(out, 1)); err != nil {
			t.Fatal(err)
		}
		recs, err := metrics.ReadFile(filepath.Join(out, "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if rec.Step == 1 && rec.Agent != "" {
				res.vals[rec.Agent] = rec.Values
			}
		}
		return res, run
	}
	v1, _ := runOne("")
	orig, run := runOne("original")
	if !strings.Contains(orig.plan, "original semantics: each step's batch is balanced over 8 ranks") || strings.Contains(v1.plan, "original semantics") {
		t.Errorf("plans:\n%s\n%s", v1.plan, orig.plan)
	}

	// The same rollouts, in the pool's order (source, prompt, sample).
	if len(v1.recs) != 24 || len(orig.recs) != 24 {
		t.Fatalf("%d and %d records, want 24", len(v1.recs), len(orig.recs))
	}
	agents := run.Agents()
	index := map[string]int{}
	for k, a := range agents {
		index[a.Name] = k
	}
	order := func(a, b rollout.Record) int {
		return cmp.Or(cmp.Compare(index[a.Agent], index[b.Agent]), cmp.Compare(a.Prompt, b.Prompt), cmp.Compare(a.Sample, b.Sample))
	}
	slices.SortFunc(v1.recs, order)
	slices.SortFunc(orig.recs, order)
	for i := range v1.recs {
		a, b := v1.recs[i], orig.recs[i]
		if a.Agent != b.Agent || a.Response != b.Response || a.Reward != b.Reward {
			t.Fatalf("record %d differs: %+v vs %+v", i, a, b)
		}
	}

	// Lengths as the sources sampled them, per agent in pool order.
	problems := run.drawProblems(0)
	lengths := make([][]int, len(agents))
	for _, rec := range orig.recs {
		k := index[rec.Agent]
		lengths[k] = append(lengths[k], len(renderPrompts(agents[k], problems)[rec.Prompt])+rec.Tokens)
	}
	crossFirst := false
	for k, a := range agents {
		for _, c := range []struct {
			name string
			res  result
			s    hacpo.Settings
		}{
			{"v1", v1, hacpo.MustPreset("hacpo")},
			{"original", orig, run.algo},
		} {
			p, err := c.s.PlanStep(k, lengths, 8)
			if err != nil {
				t.Fatal(err)
			}
			want := map[hacpo.SeqRef]int{}
			for m := range p.MiniBatches {
				for _, r := range p.Refs(m) {
					want[r] = m
				}
			}
			seen := make([]int, len(agents)) // per source: its responses so far, in pool order
			for _, rec := range c.res.recs {
				src := index[rec.Agent]
				ref := hacpo.SeqRef{Source: src, Index: seen[src]}
				seen[src]++
				u := rec.Learners[k]
				if u.Learner != a.Name || u.Update != want[ref] {
					t.Errorf("%s: learner %s, %v: update %d (%s), want %d", c.name, a.Name, ref, u.Update, u.Learner, want[ref])
				}
				if c.name == "original" && src != k && u.Update == 0 {
					crossFirst = true
				}
			}
		}
	}
	if !crossFirst {
		t.Error("original: no learner met a cross sample in its first update")
	}
	differ := false
	for _, a := range agents {
		if v1.vals[a.Name]["loss/policy"] != orig.vals[a.Name]["loss/policy"] {
			differ = true
		}
	}
	if !differ {
		t.Errorf("the same losses under both semantics: %v", orig.vals)
	}
}

// A run whose step cannot be split over the original semantics' 8 ranks is
// refused before any work, naming the key.
func TestSemanticsOriginalBatchChecked(t *testing.T) {
	cfg := exampleConfig(t, filepath.Join(t.TempDir(), "out"))
	cfg.Method.Semantics = "original"
	cfg.Method.Name = "gspo" // its own 4 × 2 = 8 sequences are fine …
	if _, err := methodSettings(cfg); err != nil {
		t.Errorf("gspo: %v", err)
	}
	cfg.Batch.PromptsPerStep = 3 // … 3 × 2 = 6 are not
	_, err := methodSettings(cfg)
	if err == nil || !strings.Contains(err.Error(), "method.semantics (line 5): original balances each learner's 6 sequences per step over 8 ranks") {
		t.Errorf("error %v", err)
	}
	cfg.Method.Name = "hacpo" // 3 agents × 6 = 18
	if _, err := methodSettings(cfg); err == nil || !strings.Contains(err.Error(), "18 sequences") {
		t.Errorf("hacpo: error %v", err)
	}
	cfg.Method.Semantics = ""
	if s, err := methodSettings(cfg); err != nil || s.IsOriginal() {
		t.Errorf("v1: %v", err)
	}
}
