package train

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/model"
)

// agents[].frozen_dtype: bfloat16 reaches the LoRA agent's model (its base
// held in bfloat16, half the bytes of its matrix weights) and not the
// others; the run trains it, and its final adapters on the checkpoint's
// base rounded the same way (SetFrozenDType) score what the trained agent
// does, bit for bit.
func TestFrozenDTypeReachesAgent(t *testing.T) {
	cfg := loraTinyConfig(t, t.TempDir(), 1)
	cfg.Agents[1].FrozenDType = "bfloat16"
	run, err := New(context.Background(), cfg, Options{Observer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range run.Agents() {
		want := model.WeightsFloat32
		if i == 1 {
			want = model.WeightsBFloat16
		}
		if got := a.Model.FrozenDType(); got != want {
			t.Errorf("%s: frozen dtype %s, want %s", a.Name, got, want)
		}
	}
	a := run.Agents()[1]
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b := must(backend.New(backend.Choose(cfg.Backend)))
	m := must(model.Load(b, must(filepath.Abs(cfg.Agents[1].Checkpoint))))
	full := m.WeightBytes()
	m.SetEngine(model.EngineNative)
	if err := m.LoadAdapters(filepath.Join(cfg.Out, "final", a.Name)); err != nil {
		t.Fatal(err)
	}
	if err := m.SetFrozenDType(model.WeightsBFloat16); err != nil {
		t.Fatal(err)
	}
	if m.WeightBytes() >= full {
		t.Errorf("bfloat16 base: %d bytes of weights with adapters, float32 base alone %d", m.WeightBytes(), full)
	}
	seqs := []model.Sequence{{Prompt: []int{1, 2, 3}, Response: []int{4, 5, 6, 7}}, {Prompt: []int{3}, Response: []int{2, 2}}}
	got, want := must(m.Score(ctx, seqs, false)), must(a.Model.Score(ctx, seqs, false))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bfloat16 base + final adapters score %v, the trained agent %v", got.LogProbs, want.LogProbs)
	}
}

// agents[].sample_dtype: bfloat16 reaches the agent's model, which samples
// its rollouts with bfloat16 weights, and the step reports the mean
// log-prob gap between its samples and its own scoring (the old
// log-probs): small, and not zero; agents sampling in float32 report none.
func TestSampleDTypeReachesAgent(t *testing.T) {
	cfg := loraTinyConfig(t, t.TempDir(), 1)
	cfg.Agents[2].SampleDType = "bfloat16"
	run, err := New(context.Background(), cfg, Options{Observer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range run.Agents() {
		want := model.WeightsFloat32
		if i == 2 {
			want = model.WeightsBFloat16
		}
		if got := a.Model.SampleDType(); got != want {
			t.Errorf("%s: sample dtype %s, want %s", a.Name, got, want)
		}
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := must(metrics.ReadFile(filepath.Join(cfg.Out, metrics.FileName)))
	seen := false
	for _, r := range recs {
		gap, ok := r.Values["rollout/logprob_abs_diff"]
		if ok && r.Agent != cfg.Agents[2].Name {
			t.Errorf("step %d %s: rollout/logprob_abs_diff %v, want it for the bfloat16 sampler only", r.Step, r.Agent, gap)
		}
		if ok {
			seen = true
			if !(gap > 0 && gap < 0.1) {
				t.Errorf("step %d %s: rollout/logprob_abs_diff %v, want small and > 0", r.Step, r.Agent, gap)
			}
		}
	}
	if !seen {
		t.Errorf("no rollout/logprob_abs_diff recorded for %s", cfg.Agents[2].Name)
	}
}
