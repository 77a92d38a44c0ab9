package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/model"
)

// trainedAdapter trains LoRA adapters on the shipped agent base for a few
// AdamW steps (so that they change its outputs) and saves them in dir,
// naming base; it returns the adapted model.
func trainedAdapter(t *testing.T, base, dir string, targets []string) *model.Model {
	t.Helper()
	ctx := context.Background()
	b := must(backend.New(backend.Choose("")))
	m := must(model.Load(b, base))
	if err := m.AddLoRA(model.LoRA{Rank: 4, Alpha: 8, Targets: targets}, 11); err != nil {
		t.Fatal(err)
	}
	tr := must(model.NewTrainer(m, model.OptimizerConfig{LearningRate: 0.02}))
	seqs := []model.Sequence{{Prompt: []int{1, 5, 6, 7}, Response: []int{8, 9, 10, 2}}, {Prompt: []int{1, 12}, Response: []int{13, 2}}}
	w := [][]float32{{1, -0.5, 0.5, 1}, {-1, 0.7}}
	for range 3 {
		if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Apply(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.SaveAdapters(dir, base); err != nil {
		t.Fatal(err)
	}
	return m
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// hacrl eval, generate and score take a base plus an adapter — the base
// with --adapter, the adapter directory alone (its base from
// adapter_config.json), or the adapter with --base — and all three give
// what the adapted model computes; hacrl merge writes a plain checkpoint
// that scores like base + adapter within 1e-5.
func TestAdapterCommands(t *testing.T) {
	for _, c := range []struct {
		agent   string
		targets []string
	}{
		{lookAgents[0], []string{model.AllLinear}},                 // gpt-2: fused c_attn, Conv1D layout
		{lookAgents[1], []string{"q_proj", "v_proj", "down_proj"}}, // llama
	} {
		t.Run(filepath.Base(c.agent), func(t *testing.T) {
			dir := t.TempDir()
			base := must(filepath.Abs(c.agent))
			adapter := filepath.Join(dir, "adapter")
			m := trainedAdapter(t, base, adapter, c.targets)

			seqs := []model.Sequence{{Prompt: []int{1, 5, 6, 7}, Response: []int{8, 9, 10}}, {Prompt: []int{1, 20, 21}, Response: []int{22, 23, 2}}}
			var lines []string
			for _, s := range seqs {
				lines = append(lines, string(must(json.Marshal(map[string]any{"prompt_ids": s.Prompt, "response_ids": s.Response}))))
			}
			in := filepath.Join(dir, "in.jsonl")
			if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			want := must(m.Score(context.Background(), seqs, false)).LogProbs
			// score returns the log-probs hacrl score prints (float32 values, in
			// their shortest decimal form).
			score := func(args ...string) [][]float64 {
				t.Helper()
				stdout, stderr, code := runHacrl(t, append([]string{"score", "--jsonl", in}, args...)...)
				if code != 0 {
					t.Fatalf("score %v: exit status %d: %s", args, code, stderr)
				}
				var lps [][]float64
				for _, o := range jsonObjects(t, stdout) {
					var lp []float64
					for _, v := range o["logprobs"].([]any) {
						lp = append(lp, v.(float64))
					}
					lps = append(lps, lp)
				}
				return lps
			}
			exact := make([][]float64, len(want))
			for i, lp := range want {
				for _, v := range lp {
					exact[i] = append(exact[i], float64(v))
				}
			}
			same := func(got [][]float64) bool {
				if len(got) != len(want) {
					return false
				}
				for i := range got {
					if len(got[i]) != len(want[i]) {
						return false
					}
					for j := range got[i] {
						if float32(got[i][j]) != want[i][j] {
							return false
						}
					}
				}
				return true
			}
			for _, args := range [][]string{{c.agent, "--adapter", adapter}, {adapter}, {adapter, "--base", c.agent}} {
				if got := score(args...); !same(got) {
					t.Errorf("score %v: %v, the adapted model %v", args, got, exact)
				}
			}
			if same(score(c.agent)) {
				t.Error("the adapter does not change the base's scores: the test shows nothing")
			}

			// generate: the adapter directory alone and the base with --adapter agree.
			gen := func(args ...string) string {
				t.Helper()
				stdout, stderr, code := runHacrl(t, append([]string{"generate", "--json", "--max-new-tokens", "8"}, append(args, "12+7=", "40-3=")...)...)
				if code != 0 {
					t.Fatalf("generate %v: exit status %d: %s", args, code, stderr)
				}
				return stdout
			}
			if a, b := gen(adapter), gen(c.agent, "--adapter", adapter); a != b || a == "" {
				t.Errorf("generate: the adapter directory gives\n%s\nthe base with --adapter\n%s", a, b)
			}

			// eval: the same, and the output names both.
			r1, stderr, code := runEval(t, adapter, "--set", "test", "--problems", "5", "--max-new-tokens", "16")
			if code != 0 {
				t.Fatalf("eval: %s", stderr)
			}
			r2, stderr, code := runEval(t, c.agent, "--adapter", adapter, "--set", "test", "--problems", "5", "--max-new-tokens", "16")
			if code != 0 {
				t.Fatalf("eval --adapter: %s", stderr)
			}
			if r1["adapter"] != adapter || r1["checkpoint"] != base || r2["adapter"] != adapter || r1["greedy_acc"] != r2["greedy_acc"] || r1["greedy_acc"] == nil {
				t.Errorf("eval of the adapter %v, of the base with --adapter %v", r1, r2)
			}

			// merge: a plain checkpoint that scores as base + adapter.
			merged := filepath.Join(dir, "merged")
			if stdout, stderr, code := runHacrl(t, "merge", "--adapter", adapter, "--out", merged); code != 0 || !strings.Contains(stdout, "merged") {
				t.Fatalf("merge: exit status %d: %s%s", code, stdout, stderr)
			}
			for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "agent.json"} {
				if _, err := os.Stat(filepath.Join(merged, f)); err != nil {
					t.Errorf("merged checkpoint: %v", err)
				}
			}
			if model.IsAdapterDir(merged) {
				t.Error("the merged checkpoint is an adapter directory")
			}
			got := score(merged)
			for i := range got {
				for j := range got[i] {
					if d := math.Abs(got[i][j] - exact[i][j]); !(d <= 1e-5) {
						t.Errorf("merged checkpoint: log-prob [%d][%d] %v, base + adapter %v (|Δ| %g > 1e-5)", i, j, got[i][j], exact[i][j], d)
					}
				}
			}
			if _, stderr, code := runHacrl(t, "merge", "--adapter", adapter, "--out", merged); code != 1 || !strings.Contains(stderr, "exists") {
				t.Errorf("merge over an existing directory: exit status %d: %s", code, stderr)
			}
		})
	}
}

// Misused adapter flags and adapters without a base are errors that say
// what to give.
func TestAdapterErrors(t *testing.T) {
	dir := t.TempDir()
	base := lookAgents[0]
	noBase := filepath.Join(dir, "no-base")
	trainedAdapter(t, must(filepath.Abs(base)), noBase, []string{"c_attn"})
	cfg := filepath.Join(noBase, model.AdapterConfigFile)
	data := strings.Replace(string(must(os.ReadFile(cfg))), must(filepath.Abs(base)), filepath.Join(dir, "moved"), 1)
	if err := os.WriteFile(cfg, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"prompt_ids": [1, 5], "response_ids": [6]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"score", noBase, "--jsonl", in}, 1, "is not a model directory here: give its base (--base DIR)"},
		{[]string{"score", base, "--adapter", noBase, "--base", base, "--jsonl", in}, 2, "not both"},
		{[]string{"score", base, "--adapter", base, "--jsonl", in}, 1, "is not a LoRA adapter: it has no adapter_config.json"},
		{[]string{"score", noBase, "--base", noBase, "--jsonl", in}, 1, "is a LoRA adapter, not a model"},
		{[]string{"merge", "--out", filepath.Join(dir, "m")}, 2, "--adapter DIR is required"},
		{[]string{"merge", "--adapter", noBase}, 2, "--out DIR is required"},
		{[]string{"merge", "--adapter", noBase, "--base", base, "--out", filepath.Join(dir, "m"), "--dtype", "fp8"}, 2, `--dtype must be float32, bfloat16 or float16, got "fp8"`},
		{[]string{"merge", "--adapter", noBase, "--out", filepath.Join(dir, "m")}, 1, "give its base (--base DIR)"},
	}
	for _, tt := range tests {
		_, stderr, code := runHacrl(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit status %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
	// With --base the adapter merges, in bfloat16 when asked.
	out := filepath.Join(dir, "m")
	if _, stderr, code := runHacrl(t, "merge", "--adapter", noBase, "--base", base, "--out", out, "--dtype", "bfloat16"); code != 0 {
		t.Fatalf("merge --base: %s", stderr)
	}
	var c map[string]any
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(out, "config.json"))), &c); err != nil || c["torch_dtype"] != "bfloat16" {
		t.Errorf("merged --dtype bfloat16: config.json torch_dtype %v (%v)", c["torch_dtype"], err)
	}
}
