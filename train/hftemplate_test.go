package train

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/internal/pyenv"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/rollout"
	"github.com/hacrl/hacrl/safetensors"
	"github.com/hacrl/hacrl/task"
	"github.com/hacrl/hacrl/tokenizer"
)

// hfCheckpoint writes a tiny llama-family model whose vocabulary is the real
// tokenizer's (copied in with its tokenizer_config.json) into a temp dir. Its
// weights are rewritten so that greedy decoding emits stop at every step: the
// blocks add nothing to the residual stream, every token embeds to the same
// vector, and only the head's row for stop reads it.
func hfCheckpoint(t *testing.T, b compute.Backend, npmDir, name, stop string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := npmtest.Model(npmDir, name)
	for _, f := range []string{"tokenizer.json", tokenizer.ConfigFile} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	stopID, ok := tok.TokenID(stop)
	if !ok {
		t.Fatalf("%s has no %s", name, stop)
	}
	sp := tok.Special()
	m, err := model.New(b, model.Config{Family: "llama", Vocab: tok.VocabSize(), Dim: 8, Layers: 1, Heads: 2, KVHeads: 1,
		Hidden: 16, MaxSeq: 256, BOS: sp.BOS, EOS: sp.EOS}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, model.WeightsFile)
	tensors, meta, err := safetensors.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	fill := func(name string, f func(row, col int) float32) {
		tt, ok := tensors[name]
		if !ok {
			t.Fatalf("no tensor %s", name)
		}
		cols := tt.Shape[len(tt.Shape)-1]
		data := make([]float32, len(tt.Data)/4)
		for i := range data {
			data[i] = f(i/cols, i%cols)
		}
		tensors[name] = safetensors.FromFloat32(tt.Shape, data)
	}
	zero := func(int, int) float32 { return 0 }
	fill("model.layers.0.self_attn.o_proj.weight", zero)
	fill("model.layers.0.mlp.down_proj.weight", zero)
	fill("model.embed_tokens.weight", func(int, int) float32 { return 1 })
	fill("lm_head.weight", func(row, _ int) float32 {
		if row == stopID {
			return 1
		}
		return 0
	})
	if err := safetensors.Write(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
	return dir
}

// An agent with template kind hf renders its prompt as
// apply_chat_template(tokenize=True) does (@huggingface/jinja +
// @lenml/tokenizers), stops at the template's end-of-turn token, closes
// another agent's re-tokenized response with it, and saves its template.
func TestHFTemplateAgents(t *testing.T) {
	npmDir := npmtest.Dir(t)
	b, err := backend.New(backend.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	question := "Natalia sold clips to 48 of her friends in April. How many clips did she sell?" +
		" Let's think step by step and output the final answer within \\boxed{}."
	cases := []struct {
		name, eot string
		tmpl      config.Template
	}{
		{"qwen3", "<|im_end|>", config.Template{Kind: "hf", Vars: map[string]any{"enable_thinking": false}}},
		{"llama3", "<|eot_id|>", config.Template{Kind: "hf", System: "You are a helpful assistant."}},
	}
	agents := make([]*Agent, len(cases))
	var apply []map[string]any
	for i, tc := range cases {
		dir := hfCheckpoint(t, b, npmDir, tc.name, tc.eot)
		ac := config.Agent{Name: tc.name, Checkpoint: dir, Template: tc.tmpl,
			Optimizer: config.Optimizer{LR: 1e-3, WeightDecay: new(float64)},
			Sampling:  config.Sampling{Temperature: new(0.0), TopP: 1, MaxNewTokens: 8}}
		a, err := loadAgent(b, i, ac, false, func(string) {})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		agents[i] = a
		var msgs []map[string]any
		if tc.tmpl.System != "" {
			msgs = append(msgs, map[string]any{"role": "system", "content": tc.tmpl.System})
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": question})
		ctx := map[string]any{"messages": msgs, "add_generation_prompt": true}
		for k, v := range tc.tmpl.Vars {
			ctx[k] = v
		}
		apply = append(apply, map[string]any{"dir": dir, "contexts": []any{ctx}})
	}

	// The reference: @huggingface/jinja renders, @lenml/tokenizers encodes.
	var res struct {
		Apply []struct {
			Texts []string `json:"texts"`
			IDs   [][]int  `json:"ids"`
		} `json:"apply"`
	}
	npmtest.Run(t, npmDir, "hf.js", map[string]any{"apply": apply}, &res)
	if len(res.Apply) != len(cases) {
		t.Fatalf("node hf.js returned %d results for %d cases", len(res.Apply), len(cases))
	}

	for i, tc := range cases {
		a := agents[i]
		if got := a.Template.RenderFor(a.Tok, question); got != res.Apply[i].Texts[0] {
			t.Errorf("%s: prompt text\n go: %q\n js: %q", tc.name, got, res.Apply[i].Texts[0])
		}
		prompt := renderPrompts(a, []task.Problem{{Question: question}})[0]
		if !slices.Equal(prompt, res.Apply[i].IDs[0]) {
			t.Errorf("%s: prompt ids\n go: %v\n js: %v", tc.name, prompt, res.Apply[i].IDs[0])
		}
		eot, _ := a.Tok.TokenID(tc.eot)
		if a.Stop() != eot || a.Sampling.Stop[0] != eot {
			t.Errorf("%s: stop %d, sampling stops %v, want %s (%d) first", tc.name, a.Stop(), a.Sampling.Stop, tc.eot, eot)
		}
		if eos := a.Tok.Special().EOS; !slices.Contains(a.Sampling.Stop, eos) {
			t.Errorf("%s: sampling stops %v lack eos_token %d", tc.name, a.Sampling.Stop, eos)
		}
		s, err := a.Model.Generate(context.Background(), [][]int{prompt}, a.Sampling, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		if !s[0].Stopped || !slices.Equal(s[0].Tokens, []int{eot}) {
			t.Errorf("%s: generated %v (stopped %v), want to stop at once at %s", tc.name, s[0].Tokens, s[0].Stopped, tc.eot)
		}
	}

	// A response of one agent, re-tokenized for the other, ends with the
	// learner's own end-of-turn token.
	text := "Natalia sold 48/2 = 24 clips in May. So 48+24 = \\boxed{72}."
	pool := &rollout.Pool{Agents: 2, Prompts: 1}
	for j, a := range agents {
		pool.Rollouts = append(pool.Rollouts, rollout.Rollout{Source: j, Text: text, Tokens: append(a.Tok.Encode(text), a.Stop()), Stopped: true})
	}
	for k, l := range agents {
		prompts := renderPrompts(l, []task.Problem{{Question: question}})
		view, err := pool.View(rollout.Learner{Index: k, Tokenizer: l.Tok, Prompts: prompts, Stop: l.Stop(), MaxTokens: l.MaxResponse() * 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range view.Items {
			want := append(l.Tok.Encode(text), l.Stop())
			if !slices.Equal(it.Response, want) || it.Changed {
				t.Errorf("learner %s, source %d: response %v (changed %v), want %v", l.Name, it.Rollout.Source, it.Response, it.Changed, want)
			}
		}
	}

	// Saved and loaded back: the same template, variables and prompt.
	for i, a := range agents {
		a.Trainer, err = model.NewTrainer(a.Model, optimizerConfig(config.Optimizer{LR: 1e-3}))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "saved")
		if err := saveAgent(a, dir, false); err != nil {
			t.Fatal(err)
		}
		back, err := loadAgent(b, i, config.Agent{Name: a.Name, Checkpoint: dir, Optimizer: config.Optimizer{LR: 1e-3},
			Sampling: config.Sampling{TopP: 1, MaxNewTokens: 8}}, false, func(string) {})
		if err != nil {
			t.Fatalf("%s: loading the saved agent: %v", a.Name, err)
		}
		if back.Template.Kind != tokenizer.KindHF || !strings.Contains(back.Template.RenderFor(back.Tok, "q"), "q") ||
			!slices.Equal(back.Template.Prompt(back.Tok, question), a.Template.Prompt(a.Tok, question)) ||
			!slices.Equal(back.Sampling.Stop, a.Sampling.Stop) {
			t.Errorf("%s: saved agent's template %+v differs from %+v", a.Name, back.Template, a.Template)
		}
	}
}

// A checkpoint with a chat template and no agent.json (a downloaded
// Hugging Face model) is prompted with its template by default, as
// apply_chat_template prompts it (the Python oracle), whether the template
// sits in tokenizer_config.json or in a chat_template.jinja (transformers
// 5's layout); it stops at the template's end of turn, the resolved config
// says hf, and a saved agent keeps the template files. template.kind plain
// still gives plain prompts, and is saved as such.
func TestCheckpointChatTemplateIsDefault(t *testing.T) {
	npmDir := npmtest.Dir(t)
	b, err := backend.New(backend.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	inConfig := hfCheckpoint(t, b, npmDir, "qwen3", "<|im_end|>")
	inJinja := copyCheckpoint(t, inConfig)
	jinjaDir := npmtest.TemplateDirs(t, npmDir)[npmtest.Qwen3Jinja]
	for _, f := range []string{tokenizer.ConfigFile, tokenizer.ChatTemplateFile} {
		data, err := os.ReadFile(filepath.Join(jinjaDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(inJinja, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const question = "What is 12+7?"
	var res struct {
		Apply []struct {
			Texts  []string `json:"texts"`
			IDs    [][]int  `json:"ids"`
			Errors []*string
		} `json:"apply"`
	}
	ctx := map[string]any{"messages": []tokenizer.Message{{Role: "user", Content: question}}, "add_generation_prompt": true}
	apply := []map[string]any{{"dir": inConfig, "contexts": []any{ctx}}, {"dir": inJinja, "contexts": []any{ctx}}}
	pyenv.Run(t, filepath.Join("..", "tokenizer", "testdata", "hf_oracle.py"), map[string]any{"apply": apply}, &res)
	if len(res.Apply) != 2 || res.Apply[0].Texts[0] != res.Apply[1].Texts[0] {
		t.Fatalf("apply_chat_template: %+v", res.Apply)
	}
	want, wantIDs := res.Apply[0].Texts[0], res.Apply[0].IDs[0]

	for _, dir := range []string{inConfig, inJinja} {
		if _, err := os.Stat(filepath.Join(dir, "agent.json")); err == nil {
			t.Fatalf("%s has an agent.json", dir)
		}
		ac := config.Agent{Name: "q", Checkpoint: dir, Optimizer: config.Optimizer{LR: 1e-3, WeightDecay: new(float64)},
			Sampling: config.Sampling{Temperature: new(0.0), TopP: 1, MaxNewTokens: 8}}
		var notes []string
		a, err := loadAgent(b, 0, ac, false, func(s string) { notes = append(notes, s) })
		if err != nil {
			t.Fatal(err)
		}
		imEnd, _ := a.Tok.TokenID("<|im_end|>")
		if a.Template.Kind != tokenizer.KindHF || a.Template.RenderFor(a.Tok, question) != want ||
			!slices.Equal(renderPrompts(a, []task.Problem{{Question: question}})[0], wantIDs) || a.Stop() != imEnd {
			t.Errorf("%s: template %s, prompt %q, stop %d; want hf, apply_chat_template's %q, <|im_end|> %d",
				dir, a.Template.Kind, a.Template.RenderFor(a.Tok, question), a.Stop(), want, imEnd)
		}
		if log := strings.Join(notes, "\n"); !strings.Contains(log, "has no agent.json: prompting with the chat template") {
			t.Errorf("%s: log %q does not say the checkpoint's chat template is used", dir, log)
		}
		r, err := Resolve(&config.Config{Method: config.Method{Name: "hacpo"}, Agents: []config.Agent{ac}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Agents[0].Template.Kind != tokenizer.KindHF {
			t.Errorf("%s: resolved template kind %q, want hf", dir, r.Agents[0].Template.Kind)
		}
		s, err := LoadSaved(dir, TemplateChoice{})
		if err != nil || s.Template.Kind != tokenizer.KindHF || s.HasMeta || !slices.Equal(s.Template.Prompt(s.Tok, question), wantIDs) {
			t.Errorf("%s: LoadSaved: %v, kind %s", dir, err, s.Template.Kind)
		}

		// Saved, the agent keeps the template files and says hf; asked
		// for plain, it prompts plain and is saved plain.
		for _, kind := range []string{tokenizer.KindHF, tokenizer.KindPlain} {
			ac := ac
			ac.Template.Kind = kind
			a, err := loadAgent(b, 0, ac, false, func(string) {})
			if err != nil {
				t.Fatal(err)
			}
			if kind == tokenizer.KindPlain && (a.Template.RenderFor(a.Tok, question) != question || a.Stop() != a.Tok.Special().EOS) {
				t.Errorf("%s: kind plain renders %q, stops at %d", dir, a.Template.RenderFor(a.Tok, question), a.Stop())
			}
			if a.Trainer, err = model.NewTrainer(a.Model, optimizerConfig(config.Optimizer{LR: 1e-3})); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "saved")
			if err := saveAgent(a, out, false); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{tokenizer.ConfigFile, tokenizer.ChatTemplateFile} {
				src, err1 := os.ReadFile(filepath.Join(dir, f))
				got, err2 := os.ReadFile(filepath.Join(out, f))
				if (err1 == nil) != (err2 == nil) || string(src) != string(got) {
					t.Errorf("%s kind %s: saved %s differs from the checkpoint's (%v, %v)", dir, kind, f, err1, err2)
				}
			}
			back, err := LoadSaved(out, TemplateChoice{})
			if err != nil || back.Template.Kind != kind || !slices.Equal(back.Template.Prompt(back.Tok, question), a.Template.Prompt(a.Tok, question)) {
				t.Errorf("%s kind %s: loaded back as %s (%v)", dir, kind, back.Template.Kind, err)
			}
		}
	}
}
