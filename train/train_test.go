package train

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/task"
	"github.com/hacrl/hacrl/tokenizer"
)

// writeTokenizers writes a char-level and a byte-level BPE tokenizer for the
// arith task into dir and returns their paths.
func writeTokenizers(t *testing.T, dir string) (char, bpe string) {
	t.Helper()
	tk, err := task.New("arith", task.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var corpus []string
	for i := range 200 {
		p := tk.Problem(task.Train, i)
		corpus = append(corpus, p.Question, p.Solution)
	}
	c, err := tokenizer.NewChar(Alphabet(corpus), Specials("plain"))
	if err != nil {
		t.Fatal(err)
	}
	char = filepath.Join(dir, "char.json")
	if err := c.Save(char); err != nil {
		t.Fatal(err)
	}
	b, err := tokenizer.TrainBPE(context.Background(), corpus, 290, Specials("chat"))
	if err != nil {
		t.Fatal(err)
	}
	bpe = filepath.Join(dir, "bpe.json")
	if err := b.Save(bpe); err != nil {
		t.Fatal(err)
	}
	return char, bpe
}

// tinyConfig is a fast run of three heterogeneous agents: two char-level
// (gpt and llama) and one byte-level BPE llama with a chat template.
func tinyConfig(t *testing.T, dir, method string, steps int) *config.Config {
	char, bpe := writeTokenizers(t, dir)
	src := fmt.Sprintf(`
seed: 7
out: %s
steps: %d
method: {name: %s}
task: {name: arith, digits: 1}
batch: {prompts_per_step: 4, responses_per_prompt: 2, mini_batch: 8, micro_batch: 4}
backend: go:ops_sequential
agents:
  - name: gpt-char
    model: {family: gpt, dim: 16, layers: 1, heads: 2, max_seq: 48, seed: 1}
    tokenizer: %s
    optimizer: {lr: 0.003}
    sampling: {max_new_tokens: 24}
  - name: llama-char
    model: {family: llama, dim: 16, layers: 1, heads: 2, kv_heads: 1, max_seq: 48, seed: 2}
    tokenizer: %s
    optimizer: {lr: 0.003, schedule: cosine, warmup_steps: 1}
    sampling: {max_new_tokens: 24, top_k: 20}
  - name: llama-bpe
    model: {family: llama, dim: 16, layers: 1, heads: 2, max_seq: 48, seed: 3}
    tokenizer: %s
    template: {kind: chat}
    optimizer: {lr: 0.003}
    sampling: {max_new_tokens: 16, top_p: 0.95}
eval:
  every: 2
  sets: [{name: test, split: test, problems: 4, samples: 2}]
checkpoint: {every: 1, keep: 2}
`, filepath.Join(dir, "out"), steps, method, char, char, bpe)
	cfg, err := config.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestThreeAgentRun(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "hacpo", 2)
	run, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan := run.Plan()
	for _, want := range []string{"method hacpo (shared rollouts), 3 agents", "4 prompts × 2 responses = 8 rollouts per agent",
		"trains on 24 sequences in 3 updates", "m=2: 0 self + 8 cross, cross lower bound 0.85"} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan lacks %q:\n%s", want, plan)
		}
	}
	sum, err := run.Train(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Steps != 2 || len(sum.Last) != 3 || !strings.Contains(sum.String(), "test/greedy_acc") {
		t.Errorf("summary: %+v\n%s", sum, sum)
	}
	recs, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	checkSchema(t, recs, []string{"gpt-char", "llama-char", "llama-bpe"}, true)
	for _, name := range []string{"gpt-char", "llama-char", "llama-bpe"} {
		for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "agent.json"} {
			if _, err := os.Stat(filepath.Join(cfg.Out, "final", name, f)); err != nil {
				t.Errorf("final checkpoint: %v", err)
			}
		}
	}
	cks, err := listCheckpoints(cfg.Out)
	if err != nil || len(cks) != 2 || filepath.Base(cks[1]) != "step-00000002" {
		t.Errorf("checkpoints %v (%v), want the last 2", cks, err)
	}
}

// checkSchema asserts the metric keys every step record carries.
func checkSchema(t *testing.T, recs []metrics.Record, agents []string, shared bool) {
	t.Helper()
	want := []string{"reward/mean", "accuracy/train", "capability", "ratio/self_mean", "clip/self_frac",
		"loss/policy", "loss/kl", "entropy", "grad_norm", "length/mean", "length/truncated_frac",
		"tokens_per_s", "time/sample", "time/score", "time/update", "lr", "updates"}
	if shared {
		want = append(want, "ratio/cross_mean", "clip/cross_lower_frac", "clip/cross_upper_frac", "retokenize/changed_frac")
	}
	steps := map[string]int{}
	for _, r := range recs {
		if r.Agent == "" {
			if _, ok := r.Values["time/step"]; !ok {
				t.Errorf("run-wide record at step %d lacks time/step: %v", r.Step, r.Values)
			}
			continue
		}
		if !slices.Contains(agents, r.Agent) {
			t.Errorf("record of unknown agent %q", r.Agent)
		}
		if _, ok := r.Values["eval/test/greedy_acc"]; ok {
			for _, k := range []string{"eval/test/avg@2", "eval/test/pass@2", "eval/test/maj@2"} {
				if v, ok := r.Values[k]; !ok || v < 0 || v > 1 {
					t.Errorf("eval record of %s at step %d: %s = %v", r.Agent, r.Step, k, v)
				}
			}
			continue
		}
		steps[r.Agent]++
		for _, k := range want {
			v, ok := r.Values[k]
			if !ok {
				t.Errorf("step %d %s: missing %s", r.Step, r.Agent, k)
			} else if math.IsNaN(v) {
				t.Errorf("step %d %s: %s is NaN", r.Step, r.Agent, k)
			}
		}
		if shared {
			others := 0
			for k := range r.Values {
				if strings.HasPrefix(k, "omega/") {
					others++
				}
			}
			if others != len(agents)-1 {
				t.Errorf("step %d %s: %d omega/ keys, want %d", r.Step, r.Agent, others, len(agents)-1)
			}
		}
	}
	for _, a := range agents {
		if steps[a] == 0 {
			t.Errorf("no step records for %s", a)
		}
	}
}

func TestEvalPromptsMustFit(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "gspo", 1)
	cfg.Eval.Sets = []config.EvalSet{{Name: "gsm8k", Benchmark: "gsm8k", Problems: 5}}
	_, err := New(context.Background(), cfg, Options{})
	if err == nil {
		t.Fatal("evaluation prompts longer than the context were accepted")
	}
	for _, want := range []string{"eval.sets[0] (line 28): set gsm8k: agent gpt-char: 5 of 5 problems", "exceeds the model's context of 48", "gsm8k/0 (", "gsm8k/4 ("} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q: want one naming the set, the agent, the count and the problems", err, want)
		}
	}
}

// TestEveryMethodRunsAStep runs one real step of every preset on three
// heterogeneous agents.
func TestEveryMethodRunsAStep(t *testing.T) {
	for _, m := range []string{"grpo", "gspo", "gspo2x", "gspo3x", "naive", "no-adv", "no-omega", "no-stepwise", "no-cross-clip", "hacpo-capable"} {
		t.Run(m, func(t *testing.T) {
			preset, mult := m, 0
			if m == "gspo3x" { // GSPO×n for n = 3 agents: as many sequences per learner as 3-agent HACPO
				preset, mult = "gspo2x", 3
			}
			cfg := tinyConfig(t, t.TempDir(), preset, 1)
			cfg.Method.ResponsesMultiplier = mult
			cfg.Eval.Sets = nil
			run := mustTrain(t, cfg)
			recs, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			shared := run.algo.SharesRollouts
			checkSchema(t, recs, []string{"gpt-char", "llama-char", "llama-bpe"}, shared)
			for _, r := range recs {
				if r.Agent == "" {
					continue
				}
				// 4 prompts × 2 responses (×2 for gspo2x, ×3 for gspo3x) per agent, 8 per mini-batch.
				want := 1.0
				switch {
				case shared, m == "gspo3x":
					want = 3
				case m == "gspo2x":
					want = 2
				}
				if r.Values["updates"] != want {
					t.Errorf("%s: %v updates, want %v", r.Agent, r.Values["updates"], want)
				}
			}
		})
	}
}

// TestDatasetTraining: a JSONL dataset trains like a generated task, and an
// evaluation split it lacks fails before any work.
func TestDatasetTraining(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "gspo", 1)
	path := filepath.Join(dir, "train.jsonl")
	if err := os.WriteFile(path, []byte(`{"question": "1+1", "answer": "2"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Task, cfg.Dataset = nil, &config.Dataset{Path: path}
	_, err := New(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "eval.sets[0].split (line 28): the test split of train has no problems") {
		t.Fatalf("error %v", err)
	}
	// Without the impossible evaluation, a dataset trains like a task.
	cfg.Eval.Sets = nil
	mustTrain(t, cfg)
}

// mustTrain builds a run of cfg and trains it to the end, failing the test on
// any error.
func mustTrain(t *testing.T, cfg *config.Config) *Run {
	t.Helper()
	run, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	return run
}

// The run's engine setting reaches every agent, and a step trains on either
// engine.
func TestEngineSetting(t *testing.T) {
	for _, e := range []string{"native", "graph"} {
		t.Run(e, func(t *testing.T) {
			cfg := tinyConfig(t, t.TempDir(), "hacpo", 1)
			cfg.Eval.Sets = nil
			cfg.Engine = e
			run := mustTrain(t, cfg)
			for _, a := range run.Agents() {
				if got := a.Model.EngineName(); got != e {
					t.Errorf("%s runs on %q, want %q", a.Name, got, e)
				}
			}
			recs, err := metrics.ReadFile(filepath.Join(cfg.Out, "metrics.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			checkSchema(t, recs, []string{"gpt-char", "llama-char", "llama-bpe"}, true)
		})
	}
}
