package model

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/internal/pyenv"
	"github.com/hacrl/hacrl/safetensors"
)

// peftCase is one adapter PEFT writes (testdata/peft_adapters.py): the
// LoraConfig arguments, and either the configuration LoadAdapters must
// read (then the adapter must score as in PEFT) or the text of the error
// that must refuse it.
type peftCase struct {
	name   string
	config map[string]any
	dtype  string // the adapter file's ("": float32)
	want   LoRA   // read from adapter_config.json
	refuse string // or: the error names this
}

// Adapters PEFT itself writes, with the options users choose, load with
// LoadAdapters and score as PEFT's PeftModel.from_pretrained does on both
// engines (within 1e-4, float32 on both sides): on a Qwen3-style and a
// GPT-2 base saved by hacrl and read by transformers, and on a GPT-2 of
// the published config (full vocabulary) that transformers writes (Conv1D
// layers: PEFT's fan_in_fan_out). Those hacrl cannot represent are refused
// by an error naming the file and the field or tensor.
func TestPEFTAdapters(t *testing.T) {
	pyenv.Python(t)
	type tc = map[string]any
	for _, base := range []struct {
		model string
		cases []peftCase
	}{
		{"qwen3-gqa", []peftCase{
			{name: "names", config: tc{"r": 4, "lora_alpha": 8, "target_modules": []string{"q_proj", "v_proj", "up_proj"}, "task_type": "CAUSAL_LM"},
				want: LoRA{Rank: 4, Alpha: 8, Targets: []string{"q_proj", "v_proj", "up_proj"}}},
			{name: "pattern", config: tc{"r": 2, "lora_alpha": 7, "target_modules": `.*\.(k_proj|down_proj)`},
				want: LoRA{Rank: 2, Alpha: 7, Pattern: `.*\.(k_proj|down_proj)`}},
			{name: "gaussian rslora dropout", config: tc{"r": 8, "lora_alpha": 16, "target_modules": "all-linear", "init_lora_weights": "gaussian",
				"lora_dropout": 0.1, "use_rslora": true, "task_type": "CAUSAL_LM"}, want: LoRA{Rank: 8, Alpha: 16, RSLoRA: true}},
			{name: "exclude", config: tc{"r": 8, "lora_alpha": 16, "target_modules": "all-linear", "exclude_modules": []string{"o_proj", "gate_proj"}, "task_type": "CAUSAL_LM"},
				want: LoRA{Rank: 8, Alpha: 16, Exclude: []string{"o_proj", "gate_proj"}}},
			{name: "exclude pattern", config: tc{"r": 4, "lora_alpha": 4, "target_modules": []string{"q_proj", "k_proj", "down_proj"}, "exclude_modules": `model\.layers\.0\..*`},
				want: LoRA{Rank: 4, Alpha: 4, Targets: []string{"q_proj", "k_proj", "down_proj"}, ExcludePattern: `model\.layers\.0\..*`}},
			{name: "layers", config: tc{"r": 4, "lora_alpha": 8, "target_modules": []string{"q_proj", "model.layers.0.mlp.up_proj"}, "layers_to_transform": 1, "layers_pattern": "layers"},
				want: LoRA{Rank: 4, Alpha: 8, Targets: []string{"q_proj", "model.layers.0.mlp.up_proj"}, Layers: []int{1}, LayersPattern: []string{"layers"}}},
			{name: "layers list", config: tc{"r": 4, "lora_alpha": 8, "target_modules": []string{"v_proj", "down_proj"}, "layers_to_transform": []int{0}},
				want: LoRA{Rank: 4, Alpha: 8, Targets: []string{"v_proj", "down_proj"}, Layers: []int{0}}},
			{name: "bfloat16", config: tc{"r": 8, "lora_alpha": 16, "target_modules": "all-linear"}, dtype: "bfloat16", want: LoRA{Rank: 8, Alpha: 16}},
			{name: "dora", config: tc{"r": 4, "target_modules": []string{"q_proj"}, "use_dora": true}, refuse: "use_dora is true"},
			{name: "lora_bias", config: tc{"r": 4, "target_modules": []string{"q_proj"}, "lora_bias": true}, refuse: "lora_bias is true"},
			{name: "bias", config: tc{"r": 4, "target_modules": []string{"q_proj"}, "bias": "all"}, refuse: `bias is "all"`},
			{name: "modules_to_save", config: tc{"r": 4, "target_modules": []string{"q_proj"}, "modules_to_save": []string{"lm_head"}}, refuse: "modules_to_save is"},
			{name: "lm_head", config: tc{"r": 4, "target_modules": []string{"q_proj", "lm_head"}}, refuse: "is of lm_head, outside the blocks"},
			{name: "embedding", config: tc{"r": 4, "target_modules": []string{"embed_tokens", "v_proj"}}, refuse: "is of model.embed_tokens, outside the blocks"},
			{name: "rank_pattern", config: tc{"r": 4, "target_modules": []string{"q_proj", "v_proj"}, "rank_pattern": tc{"v_proj": 2}}, refuse: "rank_pattern is"},
			{name: "alpha_pattern", config: tc{"r": 4, "target_modules": []string{"q_proj", "v_proj"}, "alpha_pattern": tc{"v_proj": 2}}, refuse: "alpha_pattern is"},
			{name: "pissa", config: tc{"r": 4, "target_modules": []string{"q_proj"}, "init_lora_weights": "pissa"}, refuse: `init_lora_weights is "pissa"`},
			{name: "trainable tokens", config: tc{"r": 4, "target_modules": []string{"q_proj"}, "trainable_token_indices": []int{3, 5}}, refuse: "trainable_token_indices is"},
		}},
		{"gpt2-published", []peftCase{
			{name: "all-linear rslora", config: tc{"r": 8, "lora_alpha": 16, "target_modules": "all-linear", "use_rslora": true}, want: LoRA{Rank: 8, Alpha: 16, RSLoRA: true}},
			{name: "names", config: tc{"r": 8, "lora_alpha": 16, "target_modules": []string{"c_attn", "attn.c_proj"}, "init_lora_weights": false}, want: LoRA{Rank: 8, Alpha: 16, Targets: []string{"c_attn", "attn.c_proj"}}},
		}},
		{"gpt-tanh", []peftCase{
			{name: "all-linear", config: tc{"r": 8, "lora_alpha": 16, "target_modules": "all-linear"}, want: LoRA{Rank: 8, Alpha: 16}},
			{name: "names rslora", config: tc{"r": 4, "lora_alpha": 3, "target_modules": []string{"c_attn", "mlp.c_proj"}, "use_rslora": true},
				want: LoRA{Rank: 4, Alpha: 3, Targets: []string{"c_attn", "mlp.c_proj"}, RSLoRA: true}},
			{name: "layers", config: tc{"r": 4, "lora_alpha": 8, "target_modules": []string{"c_attn", "c_fc"}, "layers_to_transform": []int{0}, "layers_pattern": []string{"h"}},
				want: LoRA{Rank: 4, Alpha: 8, Targets: []string{"c_attn", "c_fc"}, Layers: []int{0}, LayersPattern: []string{"h"}}},
		}},
	} {
		t.Run(base.model, func(t *testing.T) {
			ctx := context.Background()
			tmp := t.TempDir()
			baseDir := filepath.Join(tmp, "base")
			req := map[string]any{"base": baseDir}
			if base.model == "gpt2-published" { // transformers writes it
				req["gpt2"] = map[string]int{"n_layer": 2, "n_embd": 64, "n_head": 4}
			} else if err := newTiny(t, base.model, 5).Save(baseDir); err != nil {
				t.Fatal(err)
			}
			seqs, _ := loraSeqs()
			var pseqs []map[string][]int
			for _, s := range seqs {
				pseqs = append(pseqs, map[string][]int{"prompt": s.Prompt, "response": s.Response})
			}
			var cases []map[string]any
			for _, c := range base.cases {
				cases = append(cases, map[string]any{"name": c.name, "out": filepath.Join(tmp, c.name), "config": c.config, "b_std": 0.4, "dtype": c.dtype})
			}
			var res struct {
				Results []struct{ LogProbs [][]float64 }
			}
			req["seqs"], req["cases"] = pseqs, cases
			pyenv.Run(t, "testdata/peft_adapters.py", req, &res)
			if len(res.Results) != len(base.cases) {
				t.Fatalf("peft_adapters.py: %d results for %d cases", len(res.Results), len(base.cases))
			}
			m, err := Load(testBackend(t), baseDir)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := m.Score(ctx, seqs, false)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range base.cases {
				dir := filepath.Join(tmp, c.name)
				if c.dtype == "bfloat16" {
					st, _, err := safetensors.Read(filepath.Join(dir, AdapterWeightsFile))
					for name, v := range st {
						if v.DType != "BF16" {
							t.Errorf("%s: PEFT saved %s as %s, want BF16", c.name, name, v.DType)
						}
					}
					if err != nil || len(st) == 0 {
						t.Errorf("%s: %d tensors (%v)", c.name, len(st), err)
					}
				}
				err := m.LoadAdapters(dir)
				if c.refuse != "" {
					file := filepath.Join(dir, AdapterConfigFile)
					if strings.Contains(c.refuse, "outside the blocks") {
						file = filepath.Join(dir, AdapterWeightsFile)
					}
					if err == nil || !strings.Contains(err.Error(), c.refuse) || !strings.Contains(err.Error(), file) {
						t.Errorf("%s: LoadAdapters: %v, want an error naming %s and %q", c.name, err, file, c.refuse)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: LoadAdapters of PEFT's adapter: %v", c.name, err)
					continue
				}
				got, _ := m.LoRA()
				if want := c.want; got.Rank != want.Rank || got.Alpha != want.Alpha || got.RSLoRA != want.RSLoRA || got.Pattern != want.Pattern ||
					got.ExcludePattern != want.ExcludePattern || !sameSet(got.Exclude, want.Exclude) ||
					!slices.Equal(got.Layers, want.Layers) || !slices.Equal(got.LayersPattern, want.LayersPattern) ||
					(want.Targets != nil && !sameSet(got.Targets, want.Targets)) {
					t.Errorf("%s: read as %+v, want %+v", c.name, got, want)
				}
				for _, engine := range []Engine{EngineNative, EngineGraph} {
					m.SetEngine(engine)
					sc, err := m.Score(ctx, seqs, false)
					if err != nil {
						t.Fatal(err)
					}
					moved, worst := 0.0, 0.0
					for j, lp := range sc.LogProbs {
						if len(lp) != len(res.Results[i].LogProbs[j]) {
							t.Fatalf("%s: sequence %d: %d log-probs, PEFT %d", c.name, j, len(lp), len(res.Results[i].LogProbs[j]))
						}
						for k, v := range lp {
							worst = math.Max(worst, math.Abs(float64(v)-res.Results[i].LogProbs[j][k]))
							moved = math.Max(moved, math.Abs(float64(v)-float64(plain.LogProbs[j][k])))
						}
					}
					t.Logf("%s, %s engine: max |hacrl − PEFT| %.2g (the adapter moves log-probs by up to %.2g)", c.name, engine, worst, moved)
					if !(worst <= 1e-4) {
						t.Errorf("%s, %s engine: LoadAdapters of PEFT's adapter scores %v, PEFT %v (max |Δ| %g > 1e-4)", c.name, engine, sc.LogProbs, res.Results[i].LogProbs, worst)
					}
					if moved < 1e-2 {
						t.Errorf("%s: the adapter moves no log-prob by 1e-2: the check shows nothing", c.name)
					}
				}
				m.SetEngine(EngineNative)
			}
		})
	}
}

// Fields of adapter_config.json that PEFT would read differently from
// hacrl are refused, naming the file and the field: another task, an
// unknown option set, an initialization that is not a name; fields PEFT
// writes that do not change the computation are accepted.
func TestAdapterConfigFields(t *testing.T) {
	m := newTiny(t, "llama-gqa", 1)
	if err := m.AddLoRA(LoRA{Rank: 2, Alpha: 4, Targets: []string{"q_proj"}}, 1); err != nil {
		t.Fatal(err)
	}
	good := t.TempDir()
	if err := m.SaveAdapters(good, ""); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(good, AdapterConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field string
		value any
		want  string // "" : accepted
	}{
		{"task_type", "SEQ_CLS", `task_type is "SEQ_CLS"`},
		{"task_type", nil, ""},
		{"init_lora_weights", "olora", `init_lora_weights is "olora"`},
		{"init_lora_weights", "mica", `init_lora_weights is "mica"`},
		{"init_lora_weights", 3, "init_lora_weights is 3, want a boolean"},
		{"init_lora_weights", "orthogonal", ""},
		{"alora_invocation_tokens", []int{5, 6}, "alora_invocation_tokens is [5,6]"},
		{"layer_replication", [][]int{{0, 2}}, "layer_replication is"},
		{"target_parameters", []string{"mlp.experts.down_proj"}, "target_parameters is"},
		{"use_qalora", true, "use_qalora is true"},
		{"some_new_option", 0.5, "field some_new_option is 0.5: not a PEFT option hacrl knows"},
		{"some_new_option", nil, ""},
		{"exclude_modules", 7, "exclude_modules is 7, want a list"},
		{"layers_to_transform", "x", `layers_to_transform is "x", want a block index`},
		{"layers_to_transform", 5, "match no linear layer"},
		{"layers_pattern", 3, "layers_pattern is 3, want a name"},
		{"exclude_modules", []string{"q_proj"}, "match no linear layer"},
		{"megatron_core", "megatron.core", ""},
		{"auto_mapping", map[string]string{"base_model_class": "LlamaForCausalLM"}, ""},
	} {
		var cfg map[string]any
		if err := json.Unmarshal(data, &cfg); err != nil {
			t.Fatal(err)
		}
		cfg[c.field] = c.value
		dir := t.TempDir()
		edited, _ := json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(dir, AdapterConfigFile), edited, 0o644); err != nil {
			t.Fatal(err)
		}
		weights, _ := os.ReadFile(filepath.Join(good, AdapterWeightsFile))
		if err := os.WriteFile(filepath.Join(dir, AdapterWeightsFile), weights, 0o644); err != nil {
			t.Fatal(err)
		}
		err := newTiny(t, "llama-gqa", 1).LoadAdapters(dir)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s = %v: %v, want it accepted", c.field, c.value, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir)):
			t.Errorf("%s = %v: %v, want an error naming %s and %q", c.field, c.value, err, dir, c.want)
		}
	}
}

// sameSet reports whether a and b hold the same strings, in any order
// (PEFT saves target_modules from a set).
func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}

// Exclusions and block subsets survive SaveAdapters and LoadAdapters: the
// adapter written lists them as PEFT's exclude_modules, layers_to_transform
// and layers_pattern, and loads back as it was.
func TestAdapterSubsetsRoundTrip(t *testing.T) {
	ctx := context.Background()
	seqs, _ := loraSeqs()
	for _, c := range []struct {
		l    LoRA
		mods []string // the adapted modules, in block order
	}{
		{LoRA{Rank: 2, Alpha: 4, Targets: []string{AllLinear}, Exclude: []string{"o_proj", "gate_proj", "model.layers.1.mlp.up_proj", "down_proj"}},
			[]string{"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj", "model.layers.0.mlp.up_proj",
				"model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.k_proj", "model.layers.1.self_attn.v_proj"}},
		{LoRA{Rank: 2, Alpha: 4, Targets: []string{"q_proj", "down_proj"}, ExcludePattern: `.*\.0\..*`},
			[]string{"model.layers.1.self_attn.q_proj", "model.layers.1.mlp.down_proj"}},
		{LoRA{Rank: 2, Alpha: 4, Targets: []string{"q_proj", "model.layers.0.mlp.up_proj"}, Layers: []int{1}, LayersPattern: []string{"layers"}},
			[]string{"model.layers.0.mlp.up_proj", "model.layers.1.self_attn.q_proj"}},
		{LoRA{Rank: 2, Alpha: 4, Targets: []string{"v_proj"}, Layers: []int{0}},
			[]string{"model.layers.0.self_attn.v_proj"}},
	} {
		m := newTiny(t, "llama-gqa", 2)
		if err := m.AddLoRA(c.l, 3); err != nil {
			t.Fatal(err)
		}
		randomizeB(m, 4)
		var mods []string
		for _, mod := range m.lora.mods {
			mods = append(mods, mod.path)
		}
		if !slices.Equal(mods, c.mods) {
			t.Errorf("%+v: adapts %v, want %v", c.l, mods, c.mods)
		}
		dir := t.TempDir()
		if err := m.SaveAdapters(dir, ""); err != nil {
			t.Fatal(err)
		}
		back := newTiny(t, "llama-gqa", 2)
		if err := back.LoadAdapters(dir); err != nil {
			t.Fatal(err)
		}
		got, _ := back.LoRA()
		if !sameSet(got.Exclude, c.l.Exclude) || got.ExcludePattern != c.l.ExcludePattern || !slices.Equal(got.Layers, c.l.Layers) ||
			!slices.Equal(got.LayersPattern, c.l.LayersPattern) || len(back.lora.mods) != len(c.mods) {
			t.Errorf("%+v: loads back as %+v with %d modules, want %d", c.l, got, len(back.lora.mods), len(c.mods))
		}
		a, _ := m.Score(ctx, seqs, false)
		b, _ := back.Score(ctx, seqs, false)
		if !slices.EqualFunc(a.LogProbs, b.LogProbs, slices.Equal) {
			t.Errorf("%+v: reloaded adapters score %v, saved %v", c.l, b.LogProbs, a.LogProbs)
		}
	}
}
