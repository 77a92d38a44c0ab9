package train

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/task"
	"github.com/hacrl/hacrl/tokenizer"
)

// copyCheckpoint copies the files of checkpoint directory src into a new
// directory and returns it.
func copyCheckpoint(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// editMeta rewrites dir/agent.json through edit.
func editMeta(t *testing.T, dir string, edit func(*Meta)) {
	t.Helper()
	m, err := ReadMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	edit(&m)
	if err := writeJSON(filepath.Join(dir, "agent.json"), m); err != nil {
		t.Fatal(err)
	}
}

// An agent whose config names no template kind takes the one saved with its
// checkpoint; a kind the config does give wins, with a note in the log.
func TestTemplateInheritedFromCheckpoint(t *testing.T) {
	examples := filepath.Join("..", "examples", "agents")
	chatCopy := copyCheckpoint(t, filepath.Join(examples, "gpt-char"))
	editMeta(t, chatCopy, func(m *Meta) { m.Template = config.Template{Kind: "chat", System: "Be brief."} })
	bare := copyCheckpoint(t, filepath.Join(examples, "gpt-char"))
	if err := os.Remove(filepath.Join(bare, "agent.json")); err != nil {
		t.Fatal(err)
	}
	badKind := copyCheckpoint(t, filepath.Join(examples, "gpt-char"))
	editMeta(t, badKind, func(m *Meta) { m.Template.Kind = "chatml" })
	char, _ := writeTokenizers(t, t.TempDir())

	b, err := backend.New(backend.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		checkpoint string // "" for a new model
		cfg        config.Template
		wantKind   string
		wantSystem string
		wantNote   string // fragment of the log; "" for none
		wantErr    string
	}{
		{"shipped chat checkpoint, no kind", filepath.Join(examples, "llama-bpe"), config.Template{}, "chat", "", "", ""},
		{"shipped plain checkpoint, no kind", filepath.Join(examples, "gpt-char"), config.Template{}, "plain", "", "", ""},
		{"chat copy, no kind", chatCopy, config.Template{}, "chat", "Be brief.", "", ""},
		{"chat copy, system only", chatCopy, config.Template{System: "Think."}, "chat", "Think.", `system "Think."`, ""},
		{"chat copy, same kind", chatCopy, config.Template{Kind: "chat", System: "Be brief."}, "chat", "Be brief.", "", ""},
		{"chat copy, config says plain", chatCopy, config.Template{Kind: "plain"}, "plain", "", "the config's template (kind plain) replaces the one saved in " + filepath.Join(chatCopy, "agent.json") + ` (kind chat, system "Be brief.")`, ""},
		{"shipped chat checkpoint, config says plain", filepath.Join(examples, "llama-bpe"), config.Template{Kind: "plain"}, "plain", "", "(kind plain) replaces", ""},
		{"no agent.json, no kind", bare, config.Template{}, "plain", "", "", ""},
		{"no agent.json, chat", bare, config.Template{Kind: "chat"}, "chat", "", "", ""},
		{"new model, no kind", "", config.Template{}, "plain", "", "", ""},
		{"bad saved kind", badKind, config.Template{}, "", "", "", `template.kind must be plain, chat or hf, got "chatml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ac := config.Agent{Name: "a", Checkpoint: tt.checkpoint, Template: tt.cfg,
				Optimizer: config.Optimizer{LR: 1e-3, WeightDecay: new(float64)},
				Sampling:  config.Sampling{Temperature: new(1.0), TopP: 1, MaxNewTokens: 8}}
			if tt.checkpoint == "" {
				ac.Model = &config.NewModel{Family: "gpt", Dim: 8, Layers: 1, Heads: 2, KVHeads: 2, MaxSeq: 32, Activation: "gelu"}
				ac.Tokenizer = char
			}
			var notes []string
			a, err := loadAgent(b, 0, ac, false, func(s string) { notes = append(notes, s) })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), filepath.Join(badKind, "agent.json")) {
					t.Fatalf("error %v, want one naming the file and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Template.Kind != tt.wantKind || a.Template.System != tt.wantSystem {
				t.Errorf("template %+v, want kind %q system %q", a.Template, tt.wantKind, tt.wantSystem)
			}
			log := strings.Join(notes, "\n")
			if tt.wantNote == "" && log != "" {
				t.Errorf("unexpected log %q", log)
			}
			if tt.wantNote != "" && !strings.Contains(log, tt.wantNote) {
				t.Errorf("log %q lacks %q", log, tt.wantNote)
			}
		})
	}
}

// A run whose agent inherits a chat template from its checkpoint trains with
// it and saves it: agent.json of the step checkpoint and of the final agent
// say chat, with the system text, as the checkpoint did.
func TestRunKeepsInheritedTemplate(t *testing.T) {
	dir := t.TempDir()
	ckpt := copyCheckpoint(t, filepath.Join("..", "examples", "agents", "gpt-char"))
	editMeta(t, ckpt, func(m *Meta) { m.Template = config.Template{Kind: "chat", System: "Add."} })
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
seed: 1
out: %s
steps: 1
method: {name: grpo}
task: {name: arith, digits: 2, operators: "+-"}
batch: {prompts_per_step: 2, responses_per_prompt: 2, mini_batch: 4}
backend: go:ops_sequential
agents:
  - name: warm
    checkpoint: %s
    optimizer: {lr: 0.0001}
    sampling: {max_new_tokens: 24}
`, filepath.Join(dir, "out"), ckpt)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Agents[0].Template = config.Template{} // as a config that omits the template decodes
	obs := &recorder{}
	run, err := New(context.Background(), cfg, Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	a := run.Agents()[0]
	if a.Template.Kind != "chat" || a.Template.System != "Add." {
		t.Fatalf("template %+v, want the checkpoint's chat template", a.Template)
	}
	if got := renderPrompts(a, []task.Problem{{Question: "1+1"}})[0]; a.Tok.Decode(got[1:]) != "Add.\nUser: 1+1\nAssistant: " {
		t.Errorf("prompt %q, want the chat template's plain-text form", a.Tok.Decode(got[1:]))
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(cfg.Out, "final", "warm"), filepath.Join(checkpointDir(cfg.Out, 1), "agents", "warm")} {
		data, err := os.ReadFile(filepath.Join(d, "agent.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m Meta
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		if m.Template.Kind != "chat" || m.Template.System != "Add." {
			t.Errorf("%s/agent.json: template %+v, want chat with the system text", d, m.Template)
		}
	}
	if strings.Contains(obs.String(), "replaces") {
		t.Errorf("an inherited template was logged as replaced:\n%s", obs)
	}

	// The checkpoint's template changes (as a checkpoint without agent.json
	// did when its chat template became the default): the config hash is
	// the same, but a resumed run would prompt otherwise, and is refused.
	editMeta(t, ckpt, func(m *Meta) { m.Template = config.Template{Kind: "plain"} })
	more := *cfg
	more.Steps = 2
	_, err = New(context.Background(), &more, Options{Resume: true, Observer: &recorder{}})
	if err == nil || !strings.Contains(err.Error(), "was trained with template kind chat") || !strings.Contains(err.Error(), "agents[0].template") {
		t.Errorf("resume with the checkpoint's template changed: %v, want a refusal naming the template", err)
	}
}

// writeLines writes a JSONL dataset of the questions (answer "1") and
// returns its path.
func writeLines(t *testing.T, dir string, questions []string) string {
	t.Helper()
	var b strings.Builder
	for _, q := range questions {
		fmt.Fprintf(&b, "{\"question\": %q, \"answer\": \"1\"}\n", q)
	}
	path := filepath.Join(dir, "train.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every training problem too long for some agent is found before the first
// step: all counted per agent, the first five named. With too_long: drop
// those problems leave every agent's training set, with a count in the log.
func TestTrainPromptsTooLong(t *testing.T) {
	dir := t.TempDir()
	var qs []string
	long := map[string]bool{}
	for i := range 12 {
		q := fmt.Sprintf("%d+%d", i, i)
		if i%3 != 0 { // 8 of 12: far beyond any agent's 48-token context
			q = strings.Repeat(q+"+", 40) + "1"
			long[fmt.Sprintf("train/%d", i)] = true
		}
		qs = append(qs, q)
	}
	// Problem 9 fits the char agents (24 free tokens of 48 after
	// max_new_tokens) but not llama-bpe's chat prompt, with 16 new tokens.
	qs[9] = "1+2+3+4+5+6+7+8"
	cfg := tinyConfig(t, dir, "gspo", 1)
	cfg.Eval.Sets = nil
	cfg.Task, cfg.Dataset = nil, &config.Dataset{Path: writeLines(t, dir, qs), TooLong: "error"}

	_, err := New(context.Background(), cfg, Options{})
	if err == nil {
		t.Fatal("a dataset with prompts too long for the agents was accepted")
	}
	msg := err.Error()
	for _, want := range []string{"dataset " + cfg.Dataset.Path, "dataset.too_long: drop",
		"agent gpt-char: 8 of 12 problems", "agent llama-char: 8 of 12", "exceeds the model's context of 48",
		"train/1 (", "train/2 (", "train/4 (", "train/5 (", "train/7 (", "and 3 more"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "train/3 (") || strings.Contains(msg, "train/0 (") {
		t.Errorf("error names a problem that fits:\n%s", msg)
	}
	if _, err := os.Stat(filepath.Join(cfg.Out, "metrics.jsonl")); err == nil {
		t.Error("a run that could not fit its prompts wrote metrics")
	}

	// Which problems some agent cannot fit, measured here from the rendered
	// prompts: those are what drop mode must leave out.
	cfg.Dataset.TooLong = "drop"
	obs := &recorder{}
	run, err := New(context.Background(), cfg, Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	unfit := map[string]bool{}
	for i, q := range qs {
		for _, a := range run.Agents() {
			if len(a.Template.Prompt(a.Tok, q))+a.MaxResponse() > a.Model.Config().MaxSeq {
				unfit[fmt.Sprintf("train/%d", i)] = true
			}
		}
	}
	if !unfit["train/9"] || len(unfit) != 9 {
		t.Fatalf("the test wants problem 9 too long for one agent only, and 9 too long in all; got %v", unfit)
	}
	if log := obs.String(); !strings.Contains(log, fmt.Sprintf("dataset %s: dropped 9 of 12 training problems", cfg.Dataset.Path)) {
		t.Errorf("log lacks the dropped count:\n%s", log)
	}
	if run.data.n != 3 {
		t.Errorf("training set of %d problems, want 3", run.data.n)
	}
	seen := map[string]bool{}
	for pos := range 30 { // ten epochs
		p := run.data.at(pos)
		if unfit[p.ID] {
			t.Fatalf("position %d draws %s, which was dropped", pos, p.ID)
		}
		seen[p.ID] = true
	}
	if len(seen) != 3 {
		t.Errorf("ten epochs drew %v, want the 3 kept problems", seen)
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Nothing left: an error, not an empty training set.
	for i := range qs {
		qs[i] = strings.Repeat("9+", 30) + "9"
	}
	cfg.Dataset.Path = writeLines(t, t.TempDir(), qs)
	cfg.Out = filepath.Join(t.TempDir(), "out")
	if _, err := New(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "all 12 training problems are too long") {
		t.Errorf("a dataset with no problem short enough: %v", err)
	}
}

// A generated task is checked on the problems the run will draw, before the
// first step.
func TestGeneratedPromptsTooLong(t *testing.T) {
	cfg := tinyConfig(t, t.TempDir(), "gspo", 3)
	cfg.Eval.Sets = nil
	cfg.Task.Digits, cfg.Task.Ops = 6, 4 // questions of ~35 characters, 48-token contexts
	_, err := New(context.Background(), cfg, Options{})
	if err == nil {
		t.Fatal("a task whose prompts do not fit was accepted")
	}
	// The count, measured here: gpt-char's plain prompts of the 3 steps × 4
	// problems the run draws that leave fewer than its 24 new tokens.
	tk, err2 := BuildTask(cfg)
	if err2 != nil {
		t.Fatal(err2)
	}
	tok, err2 := tokenizer.Load(cfg.Agents[0].Tokenizer)
	if err2 != nil {
		t.Fatal(err2)
	}
	n, first := 0, ""
	for pos := range 12 {
		p := tk.Problem(task.Train, pos)
		if len(tokenizer.Template{Kind: "plain"}.Prompt(tok, p.Question))+24 > 48 {
			if n++; first == "" {
				first = p.ID
			}
		}
	}
	if n == 0 {
		t.Fatal("no prompt is too long; the test proves nothing")
	}
	for _, want := range []string{"task arith: training problems this run would draw do not fit",
		fmt.Sprintf("agent gpt-char: %d of 12 problems", n), "exceeds the model's context of 48: " + first + " ("} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// An empty training dataset is an error naming the file, not a panic.
func TestEmptyTrainingDataset(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "gspo", 1)
	cfg.Eval.Sets = nil
	for name, content := range map[string]string{"empty": "", "blank lines": "\n \n", "byte-order mark only": "\uFEFF\n"} {
		path := filepath.Join(dir, "empty.jsonl")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg.Task, cfg.Dataset = nil, &config.Dataset{Path: path}
		if _, err := New(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming %s", name, err, path)
		}
	}
	// A split without problems, however it came about, is refused too.
	if _, err := newProblems(task.Task(emptyTask{}), 1, "dataset x.jsonl"); err == nil || !strings.Contains(err.Error(), "dataset x.jsonl: no training problems") {
		t.Errorf("newProblems of an empty split: %v", err)
	}
}

// emptyTask is a finite task without problems.
type emptyTask struct{}

func (emptyTask) Name() string                         { return "empty" }
func (emptyTask) Problem(task.Split, int) task.Problem { panic("no problems") }
func (emptyTask) Reward(task.Problem, string) float64  { return 0 }
func (emptyTask) Len(task.Split) int                   { return 0 }

// A warm start counts and names every example whose prompt and solution do
// not fit the context; with too_long: drop it trains on the others.
func TestSFTExamplesTooLong(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 10 {
		sol := fmt.Sprintf("#### %d", i)
		if i%2 == 1 {
			sol = strings.Repeat("1+", 40) + sol
		}
		fmt.Fprintf(&b, "{\"question\": \"%d+0\", \"answer\": \"%d\", \"solution\": %q}\n", i, i, sol)
	}
	data := filepath.Join(dir, "sft.jsonl")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &config.SFT{Out: filepath.Join(dir, "agent"), Seed: 1, Engine: "auto", Backend: "go:ops_sequential",
		Model:     &config.NewModel{Family: "gpt", Dim: 16, Layers: 1, Heads: 2, KVHeads: 2, MaxSeq: 32, Activation: "gelu"},
		Tokenizer: config.SFTTokenizer{Kind: "char"},
		Dataset:   &config.Dataset{Path: data, SolutionField: "solution", TooLong: "error"},
		Steps:     2, BatchSize: 4, Optimizer: config.Optimizer{LR: 1e-3, WeightDecay: new(float64), Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, MaxGradNorm: new(1.0), Schedule: "constant"}}
	var log strings.Builder
	_, err := SFT(context.Background(), cfg, &log)
	if err == nil || !strings.Contains(err.Error(), "5 of 10 examples") || !strings.Contains(err.Error(), "sft/1 (") ||
		!strings.Contains(err.Error(), "sft/9 (") || !strings.Contains(err.Error(), "dataset.too_long: drop") {
		t.Fatalf("error %v, want all 5 long examples counted and named", err)
	}
	cfg.Dataset.TooLong = "drop"
	if _, err := SFT(context.Background(), cfg, &log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "sft: dropped 5 of 10 examples") {
		t.Errorf("log lacks the dropped count:\n%s", log.String())
	}
	raw, err := os.ReadFile(filepath.Join(cfg.Out, "sft.json"))
	if err != nil || !strings.Contains(string(raw), `"examples": 5`) {
		t.Errorf("sft.json %s (%v), want 5 examples", raw, err)
	}
}

// A tokenizer smaller than the model's vocabulary makes the extra rows
// padding that the agent never samples; a larger one is an error.
func TestTokenizerSmallerThanVocabulary(t *testing.T) {
	ckpt := filepath.Join("..", "examples", "agents", "gpt-char") // 100 rows
	small, err := tokenizer.NewChar("0123456789+-= #\n", Specials("plain"))
	if err != nil {
		t.Fatal(err)
	}
	smallPath := filepath.Join(t.TempDir(), "small.json")
	if err := small.Save(smallPath); err != nil {
		t.Fatal(err)
	}
	b, err := backend.New(backend.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	ac := config.Agent{Name: "a", Checkpoint: ckpt, Tokenizer: smallPath, Template: config.Template{Kind: "plain"},
		Optimizer: config.Optimizer{LR: 1e-3, WeightDecay: new(float64)},
		Sampling:  config.Sampling{Temperature: new(3.0), TopP: 1, MaxNewTokens: 20}}
	a, err := loadAgent(b, 0, ac, false, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	V := small.VocabSize()
	if a.Sampling.Vocab != V || V >= a.Model.Config().Vocab {
		t.Fatalf("sampling limited to %d ids, tokenizer has %d, model %d", a.Sampling.Vocab, V, a.Model.Config().Vocab)
	}
	prompts := renderPrompts(a, []task.Problem{{Question: "12+34"}, {Question: "9-8"}})
	batch := [][]int{}
	for range 16 {
		batch = append(batch, prompts...)
	}
	for _, opt := range []model.SampleOptions{a.Sampling, {MaxNewTokens: 20, Temperature: 3}} {
		s, err := a.Model.Generate(context.Background(), batch, opt, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		beyond := 0
		for _, x := range s {
			for _, tok := range x.Tokens {
				if tok >= V {
					beyond++
				}
			}
		}
		if opt.Vocab == V && beyond > 0 {
			t.Errorf("the agent sampled %d padding ids", beyond)
		}
		if opt.Vocab == 0 && beyond == 0 {
			t.Error("without the limit no id beyond the tokenizer was sampled either; the test proves nothing")
		}
	}
	ac.Tokenizer = filepath.Join("..", "examples", "agents", "llama-bpe", "tokenizer.json") // 320 tokens
	if _, err := loadAgent(b, 0, ac, false, func(string) {}); err == nil || !strings.Contains(err.Error(), "has 320 tokens but the model's vocabulary is 100") {
		t.Errorf("a tokenizer larger than the vocabulary: %v", err)
	}
}

// The end tokens a checkpoint's generation_config.json declares stop an
// agent's sampling too (Llama 3 Instruct lists <|end_of_text|> and
// <|eot_id|>); an end token the tokenizer lacks is an error naming it.
func TestGenerationConfigEndTokensStop(t *testing.T) {
	b, err := backend.New(backend.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	ac := config.Agent{Name: "a", Optimizer: config.Optimizer{LR: 1e-3},
		Sampling: config.Sampling{MaxNewTokens: 8}}
	for _, tc := range []struct {
		name, gen, wantErr string
		wantStop           int
	}{
		{"a list", `{"eos_token_id": [5, 7]}`, "", 7},
		{"one id", `{"eos_token_id": 9}`, "", 9},
		{"not a token", `{"eos_token_id": [5, 100000]}`, "eos_token_id 100000 is not a token", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyCheckpoint(t, filepath.Join("..", "examples", "agents", "gpt-char"))
			if err := os.WriteFile(filepath.Join(dir, model.GenerationConfigFile), []byte(tc.gen), 0o644); err != nil {
				t.Fatal(err)
			}
			ac.Checkpoint = dir
			a, err := loadAgent(b, 0, ac, false, func(string) {})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			stops := a.Sampling.Stop
			if !slices.Contains(stops, tc.wantStop) || stops[0] != a.Tok.Special().EOS {
				t.Errorf("stop tokens %v, want the tokenizer's EOS %d first and %d among them", stops, a.Tok.Special().EOS, tc.wantStop)
			}
		})
	}
}

// A saved agent keeps the tokenizer_config.json that sat beside its
// tokenizer (special tokens, chat template) whatever template it prompted
// with, so that a Hugging Face checkpoint stays one after training.
func TestSavedAgentKeepsTokenizerConfig(t *testing.T) {
	b, err := backend.New(backend.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	dir := copyCheckpoint(t, filepath.Join("..", "examples", "agents", "gpt-char"))
	want := []byte(`{"eos_token": "</s>", "model_max_length": 64}`)
	if err := os.WriteFile(filepath.Join(dir, tokenizer.ConfigFile), want, 0o644); err != nil {
		t.Fatal(err)
	}
	ac := config.Agent{Name: "a", Checkpoint: dir, Template: config.Template{Kind: "plain"},
		Optimizer: config.Optimizer{LR: 1e-3}, Sampling: config.Sampling{MaxNewTokens: 8}}
	a, err := loadAgent(b, 0, ac, false, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := saveAgent(a, out, false); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, tokenizer.ConfigFile))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("saved %s = %q (%v), want the checkpoint's %q", tokenizer.ConfigFile, got, err, want)
	}
	// Without one beside the tokenizer, the one that makes transformers'
	// AutoTokenizer take tokenizer.json as it is (cmd/hacrl's
	// TestTransformersLoadsHacrl checks that it does), and hacrl reads the
	// agent back as before.
	ac.Checkpoint = filepath.Join("..", "examples", "agents", "gpt-char")
	if a, err = loadAgent(b, 0, ac, false, func(string) {}); err != nil {
		t.Fatal(err)
	}
	out = t.TempDir()
	if err := saveAgent(a, out, false); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(out, tokenizer.ConfigFile)); err != nil || !bytes.Equal(got, plainTokenizerConfig) {
		t.Errorf("saved %s = %q (%v) for a checkpoint without one, want %q", tokenizer.ConfigFile, got, err, plainTokenizerConfig)
	}
	if back, err := LoadSaved(out, TemplateChoice{}); err != nil || back.Template.Kind != tokenizer.KindPlain {
		t.Errorf("the saved agent loads back as %v (%v), want template plain", back, err)
	}
}
