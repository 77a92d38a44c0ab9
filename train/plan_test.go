package train

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/internal/pyenv"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/reward"
)

// TestPlanLoRA: the plan gives a LoRA agent's trainable parameters beside
// its total — the parameters of its adapter as saved in PEFT's layout,
// counted by safetensors, and the modules that adapter adapts — and a
// full-weight agent its total alone.
func TestPlanLoRA(t *testing.T) {
	cfg := loraTinyConfig(t, t.TempDir(), 1)
	run, err := New(context.Background(), cfg, Options{Observer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	plan := run.Plan()
	var files []string
	var lora []*Agent
	for _, a := range run.Agents() {
		if _, ok := a.Model.LoRA(); !ok {
			continue
		}
		dir := t.TempDir()
		if err := saveAgent(a, dir, false); err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.Join(dir, model.AdapterWeightsFile))
		lora = append(lora, a)
	}
	if len(lora) != 2 {
		t.Fatalf("%d LoRA agents, want 2", len(lora))
	}
	var res struct {
		Adapters []struct {
			Params  int64
			Modules []string
		}
	}
	pyenv.Run(t, "testdata/adapter_params.py", map[string]any{"files": files}, &res)
	line := func(name string) string {
		m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + ` .*$`).FindString(plan)
		if m == "" {
			t.Fatalf("the plan has no line for %s:\n%s", name, plan)
		}
		return m
	}
	trainable := regexp.MustCompile(`, trainable (\d+) \(LoRA r (\d+) on ([a-z_, ]+)\);`)
	for i, a := range lora {
		l := line(a.Name)
		m := trainable.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("%s: the plan line has no exact trainable count and LoRA modules:\n%s", a.Name, l)
			continue
		}
		got := res.Adapters[i]
		if n, _ := strconv.ParseInt(m[1], 10, 64); n != got.Params {
			t.Errorf("%s: the plan says trainable %d, the saved adapter holds %d parameters:\n%s", a.Name, n, got.Params, l)
		}
		if want := fmt.Sprint(cfg.Agents[a.Index].LoRA.Rank); m[2] != want {
			t.Errorf("%s: the plan says r %s, want %s", a.Name, m[2], want)
		}
		mods := strings.Split(m[3], ", ")
		slices.Sort(mods)
		if !slices.Equal(mods, got.Modules) {
			t.Errorf("%s: the plan names the modules %q, the saved adapter adapts %q", a.Name, mods, got.Modules)
		}
		if want := "params " + count(a.Model.NumParams()) + ","; !strings.Contains(l, want) {
			t.Errorf("%s: the plan line lacks %q:\n%s", a.Name, want, l)
		}
	}
	if l := line("gpt-early"); strings.Contains(l, "trainable") || !strings.Contains(l, "params "+count(run.Agents()[2].Model.NumParams())+";") {
		t.Errorf("a full-weight agent's plan line: %s", l)
	}
}

// count writes parameter counts as a person reads them.
func TestCount(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0"}, {8192, "8192"}, {9999, "9999"},
		{10000, "10.0K"}, {36864, "36.9K"}, {116992, "117K"},
		{999499, "999K"}, {999500, "1.00M"}, {1240000, "1.24M"},
		{596049920, "596M"}, {7615616512, "7.62B"}, {2_000_000_000_000, "2.00T"}, {5_000_000_000_000_000, "5000T"},
	} {
		if got := count(tt.n); got != tt.want {
			t.Errorf("count(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestStepSummary: a step's line gives, per agent this process trains,
// acc and len (the share cut when any was), ω of each other agent in
// config order and clip self/cross where rollouts are shared, and the
// mean reward only with an external reward.
func TestStepSummary(t *testing.T) {
	names := []string{"a", "b", "c"}
	vals := []map[string]float64{
		{"accuracy/train": 0.8125, "reward/mean": 0.8125, "length/mean": 31.25, "omega/b": 0.5, "omega/c": 2,
			"clip/self_frac": 0.01, "clip/cross_lower_frac": 0.25, "clip/cross_upper_frac": 0.125},
		{"accuracy/train": 0.25, "reward/mean": 0.4, "length/mean": 9, "length/truncated_frac": 0.125, "omega/a": 2, "omega/c": 4},
		{},
	}
	agents := []*Agent{{Name: "a", Index: 0}, {Name: "b", Index: 1}}
	tests := []struct {
		name   string
		shares bool
		reward bool
		agents []*Agent
		want   string
	}{
		{"shared", true, false, agents,
			"a acc 0.812 len 31.2 ω 0.50/2.00 clip 0.01/0.38 · b acc 0.250 len 9.0 (12% cut) ω 2.00/4.00 clip 0.00/0.00"},
		{"private, external reward", false, true, agents,
			"a reward 0.812 acc 0.812 len 31.2 clip 0.01 · b reward 0.400 acc 0.250 len 9.0 (12% cut) clip 0.00"},
		{"one agent's process", true, false, agents[1:],
			"b acc 0.250 len 9.0 (12% cut) ω 2.00/4.00 clip 0.00/0.00"},
	}
	for _, tt := range tests {
		r := &Run{agents: tt.agents, names: names}
		r.algo.SharesRollouts = tt.shares
		if tt.reward {
			r.reward = &reward.Client{}
		}
		nums := r.stepSummary(vals)
		var parts []string // as the progress line shows them
		for _, a := range tt.agents {
			parts = append(parts, a.Name+" "+nums[a.Name])
		}
		if got := strings.Join(parts, " · "); len(nums) != len(tt.agents) || got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}
