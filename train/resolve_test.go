package train

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
)

// resolveCase is a config for the resolve tests, written from the repository
// root (the examples name their checkpoints from there).
const resolveCase = `
out: %OUT%
steps: 3
method: {name: %METHOD%}
task: {name: countdown, max_number: 50}
batch: {prompts_per_step: 2, mini_batch: 8}
agents:
  - name: inherits-chat
    checkpoint: examples/agents/llama-bpe
    optimizer: {lr: 0.001}
    sampling: {max_new_tokens: 8, temperature: 0}
  - name: own-template
    checkpoint: examples/agents/llama-bpe
    template: {kind: plain, system: "Be brief."}
    optimizer: {lr: 0.001, max_grad_norm: 0, weight_decay: 0}
    sampling: {max_new_tokens: 8, top_k: 0}
  - name: new
    model: {family: llama, dim: 16, layers: 1, heads: 2, max_seq: 32}
    tokenizer: examples/agents/llama-bpe/tokenizer.json
    optimizer: {lr: 0.001}
    sampling: {max_new_tokens: 8}
eval:
  at_start: false
  sets: [{split: test, problems: 4, samples: 2}, {dataset: x/y.jsonl, temperature: 0.5}]
checkpoint: {every: 0}
`

// TestResolveRoundTrip: the resolved config (what --print-defaults prints and
// OUT/config.yaml holds) has every default filled in, and config.Load reads
// it back as the same resolved config, for every example and preset.
func TestResolveRoundTrip(t *testing.T) {
	t.Chdir("..")
	paths, err := filepath.Glob("examples/*.yaml")
	real, _ := filepath.Glob("examples/real/*.yaml")
	paths = append(paths, real...)
	if err != nil || len(paths) == 0 || len(real) == 0 {
		t.Fatalf("no example configs: %v", err)
	}
	configs := map[string]*config.Config{}
	for _, p := range paths {
		c, err := config.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		configs[p] = c
	}
	for _, m := range hacpo.PresetNames() {
		src := strings.NewReplacer("%OUT%", t.TempDir(), "%METHOD%", m).Replace(resolveCase)
		c, err := config.Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		configs["method "+m] = c
	}
	overridden := strings.NewReplacer("%OUT%", t.TempDir(), "{name: %METHOD%}", "{name: naive, kl_coef: 0, window: 3, normalize_std: false, cross_advantage: positive}").Replace(resolveCase)
	c, err := config.Parse([]byte(overridden))
	if err != nil {
		t.Fatal(err)
	}
	configs["overrides"] = c

	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			data, err := ResolvedYAML(cfg)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Resolve(cfg)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			back, err := config.Load(path)
			if err != nil {
				t.Fatalf("the resolved config does not load: %v\n%s", err, data)
			}
			if !back.Equal(want) {
				t.Fatalf("loaded back differently:\n%+v\nwant\n%+v\n%s", back, want, data)
			}
			again, err := ResolvedYAML(back)
			if err != nil || !bytes.Equal(again, data) {
				t.Fatalf("resolving the resolved config changes it (%v):\n%s\nthen\n%s", err, data, again)
			}
			s1, err1 := methodSettings(cfg)
			s2, err2 := methodSettings(back)
			if err1 != nil || err2 != nil || !reflect.DeepEqual(s1, s2) {
				t.Errorf("method settings differ: %+v (%v) vs %+v (%v)", s1, err1, s2, err2)
			}
			m := reflect.ValueOf(back.Method)
			for i := 0; i < m.NumField(); i++ {
				if f := m.Field(i); f.Kind() == reflect.Pointer && f.IsNil() {
					t.Errorf("method.%s not filled in", m.Type().Field(i).Name)
				}
			}
			for _, a := range back.Agents {
				if a.Template.Kind == "" || a.Sampling.Temperature == nil || a.Optimizer.MaxGradNorm == nil {
					t.Errorf("agent %s not filled in: %+v", a.Name, a)
				}
			}
			if back.Backend != backend.Default {
				t.Errorf("backend %q, want %q", back.Backend, backend.Default)
			}
		})
	}

	// What the resolution fills in, and what it keeps.
	r, err := Resolve(configs["method hacpo"])
	if err != nil {
		t.Fatal(err)
	}
	if a := r.Agents[0]; a.Template.Kind != "chat" || *a.Sampling.Temperature != 0 {
		t.Errorf("agent from a chat checkpoint without a template: %+v, want the checkpoint's chat and temperature 0 kept", a)
	}
	if a := r.Agents[1]; a.Template.Kind != "plain" || a.Template.System != "Be brief." || *a.Optimizer.MaxGradNorm != 0 || *a.Optimizer.WeightDecay != 0 {
		t.Errorf("given values replaced: %+v", a)
	}
	if tk := r.Task; tk.Numbers != 4 || tk.MaxNumber != 50 || tk.MaxTarget != 1000 || tk.Digits != 0 {
		t.Errorf("countdown options: %+v", tk)
	}
	if *r.Method.Alpha != 1 || *r.Method.Delta != 0.2 || *r.Method.Window != 5 || *r.Method.KLCoef != 0.001 {
		t.Errorf("hacpo preset: %+v", r.Method)
	}
	if configs["method hacpo"].Method.Alpha != nil || configs["method hacpo"].Agents[0].Template.Kind != "" {
		t.Error("Resolve changed its argument")
	}
	// cross_advantage: the preset's, which the key overrides either way.
	for _, tc := range []struct{ method, want string }{
		{"{name: hacpo}", "all"},
		{"{name: hacpo-capable}", "capable"},
		{"{name: hacpo-capable, cross_advantage: all}", "all"},
		{"{name: hacpo, cross_advantage: capable}", "capable"},
	} {
		c, err := config.Parse([]byte(strings.NewReplacer("%OUT%", t.TempDir(), "{name: %METHOD%}", tc.method).Replace(resolveCase)))
		if err != nil {
			t.Fatal(err)
		}
		r, err := Resolve(c)
		if err != nil {
			t.Fatal(err)
		}
		s, err := methodSettings(c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Method.CrossAdvantage != tc.want || s.CrossNegativeCapable != (tc.want == "capable") {
			t.Errorf("method %s: cross_advantage resolves to %q (capable %v), want %s", tc.method, r.Method.CrossAdvantage, s.CrossNegativeCapable, tc.want)
		}
	}
}

// TestResolvedConfigWritten: OUT/config.yaml is exactly ResolvedYAML.
func TestResolvedConfigWritten(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "hacpo", 1)
	if _, err := New(context.Background(), cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(cfg.Out, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := ResolvedYAML(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("OUT/config.yaml:\n%s\nwant\n%s", got, want)
	}
}
