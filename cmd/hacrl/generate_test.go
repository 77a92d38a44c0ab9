package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/task"
	"github.com/hacrl/hacrl/train"
)

// The shipped checkpoints: gpt-char prompts with the plain template,
// llama-bpe with ChatML (chat).
var lookAgents = []string{
	filepath.Join("..", "..", "examples", "agents", "gpt-char"),
	filepath.Join("..", "..", "examples", "agents", "llama-bpe"),
}

// runHacrl runs hacrl in process and returns its standard output, standard
// error and exit status.
func runHacrl(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := execute(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

// jsonObjects parses stdout as JSON objects, one per line, failing the test
// on anything else.
func jsonObjects(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		if line == "" && stdout == "" {
			break
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line %d is not a JSON object: %v\n%q", i+1, err, line)
		}
		out = append(out, m)
	}
	return out
}

func intsOf(t *testing.T, v any) []int {
	t.Helper()
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not a list", v)
	}
	out := make([]int, len(list))
	for i, x := range list {
		out[i] = int(x.(float64))
	}
	return out
}

func floatsOf(t *testing.T, v any) []float64 {
	t.Helper()
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not a list", v)
	}
	out := make([]float64, len(list))
	for i, x := range list {
		out[i] = x.(float64)
	}
	return out
}

// closeLogProb reports whether two log-probs agree within 1e-6, relative
// beyond magnitude 1: the commands print float32 values, whose spacing near
// −12 is 1e-6, and generate's incremental decoding and score's full pass
// round differently.
func closeLogProb(a, b float64) bool {
	return math.Abs(a-b) <= 1e-6*max(1, math.Abs(a))
}

// loadLookAgent loads a checkpoint as the commands do, for direct comparison.
func loadLookAgent(t *testing.T, dir string) *train.Agent {
	t.Helper()
	s, err := train.LoadSaved(dir, train.TemplateChoice{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := backend.New(backend.Choose(""))
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Agent(b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Greedy generate gives, for the task's own questions, the prompts the
// template renders and the tokens greedy decoding gives, and its answers
// score the greedy accuracy hacrl eval reports on the same problems.
func TestGenerateGreedyMatchesEval(t *testing.T) {
	const n = 24
	for _, dir := range lookAgents {
		a := loadLookAgent(t, dir)
		tk, err := train.BuildTask(&config.Config{Task: a.Task})
		if err != nil {
			t.Fatal(err)
		}
		probs := make([]task.Problem, n)
		// 32 new tokens fit the llama-bpe context after every prompt.
		args := []string{"generate", dir, "--json", "--max-new-tokens", "32"}
		prompts := make([][]int, n)
		for i := range probs {
			probs[i] = tk.Problem(task.Test, i)
			args = append(args, probs[i].Question)
			prompts[i] = a.Template.Prompt(a.Tok, probs[i].Question)
		}
		stdout, stderr, code := runHacrl(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit status %d: %s", dir, code, stderr)
		}
		lines := jsonObjects(t, stdout)
		if len(lines) != n {
			t.Fatalf("%s: %d lines for %d prompts", dir, len(lines), n)
		}
		opt := a.Sampling
		opt.Greedy, opt.MaxNewTokens = true, 32
		want, err := a.Model.Generate(context.Background(), prompts, opt, nil)
		if err != nil {
			t.Fatal(err)
		}
		correct := 0
		for i, l := range lines {
			if l["index"] != float64(i) || l["sample"] != 0.0 || l["prompt"] != probs[i].Question {
				t.Errorf("%s line %d: index/sample/prompt %v %v %q", dir, i, l["index"], l["sample"], l["prompt"])
			}
			if got := intsOf(t, l["prompt_ids"]); !slices.Equal(got, prompts[i]) {
				t.Errorf("%s line %d: prompt_ids %v, the template's prompt %v", dir, i, got, prompts[i])
			}
			if got := intsOf(t, l["response_ids"]); !slices.Equal(got, want[i].Tokens) {
				t.Errorf("%s line %d: response_ids %v, greedy decoding %v", dir, i, got, want[i].Tokens)
			}
			if stop := map[bool]string{true: "eos", false: "length"}[want[i].Stopped]; l["stop"] != stop {
				t.Errorf("%s line %d: stop %v, want %s", dir, i, l["stop"], stop)
			}
			if _, ok := l["logprobs"]; ok {
				t.Errorf("%s line %d: logprobs without --logprobs", dir, i)
			}
			if tk.Reward(probs[i], l["response"].(string)) >= 1 {
				correct++
			}
		}
		res, _, code := runEval(t, dir, "--set", "test", "--problems", "24", "--max-new-tokens", "32")
		if code != 0 {
			t.Fatalf("%s: eval exit status %d", dir, code)
		}
		if got := float64(correct) / n; got != res["greedy_acc"] {
			t.Errorf("%s: generate's greedy answers score %v, eval's greedy_acc %v", dir, got, res["greedy_acc"])
		}
		if correct == 0 {
			t.Errorf("%s: no greedy answer is correct; the trained agent should solve some", dir)
		}
	}
}

// generate --logprobs reports what model.Score and hacrl score give for the
// same prompt and response, sampled or greedy; the human form prints the
// texts only.
func TestGenerateLogprobsMatchScore(t *testing.T) {
	for _, dir := range lookAgents {
		a := loadLookAgent(t, dir)
		for _, sampling := range [][]string{{}, {"--temperature", "1", "--samples", "3", "--seed", "4", "--top-k", "20"}} {
			args := append([]string{"generate", dir, "12+7=", "40-3=", "--json", "--logprobs", "--max-new-tokens", "12"}, sampling...)
			stdout, stderr, code := runHacrl(t, args...)
			if code != 0 {
				t.Fatalf("%v: exit status %d: %s", args, code, stderr)
			}
			lines := jsonObjects(t, stdout)
			want := 2
			if len(sampling) > 0 {
				want = 6 // 2 prompts × 3 samples
			}
			if len(lines) != want {
				t.Fatalf("%v: %d lines, want %d", args, len(lines), want)
			}
			file := filepath.Join(t.TempDir(), "gen.jsonl")
			if err := os.WriteFile(file, []byte(stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			scored, stderr, code := runHacrl(t, "score", dir, "--jsonl", file)
			if code != 0 {
				t.Fatalf("score of generate's output: exit status %d: %s", code, stderr)
			}
			slines := jsonObjects(t, scored)
			if len(slines) != len(lines) {
				t.Fatalf("score wrote %d lines for %d", len(slines), len(lines))
			}
			var seqs []model.Sequence
			for _, l := range lines {
				seqs = append(seqs, model.Sequence{Prompt: intsOf(t, l["prompt_ids"]), Response: intsOf(t, l["response_ids"])})
			}
			direct, err := a.Model.Score(context.Background(), seqs, false)
			if err != nil {
				t.Fatal(err)
			}
			distinct := map[string]bool{}
			for i, l := range lines {
				gen, sc := floatsOf(t, l["logprobs"]), floatsOf(t, slines[i]["logprobs"])
				if len(gen) != len(seqs[i].Response) || len(sc) != len(gen) || len(direct.LogProbs[i]) != len(gen) {
					t.Fatalf("line %d: %d generate, %d score, %d model.Score log-probs for %d tokens", i, len(gen), len(sc), len(direct.LogProbs[i]), len(seqs[i].Response))
				}
				sum := 0.0
				for j := range gen {
					if !closeLogProb(gen[j], sc[j]) {
						t.Errorf("%v line %d token %d: generate %v, score %v", args, i, j, gen[j], sc[j])
					}
					if float32(sc[j]) != direct.LogProbs[i][j] {
						t.Errorf("line %d token %d: score %v, model.Score %v", i, j, sc[j], direct.LogProbs[i][j])
					}
					sum += gen[j]
				}
				if math.Abs(sum-l["sum_logprob"].(float64)) > 1e-6 {
					t.Errorf("line %d: sum_logprob %v, the sum %v", i, l["sum_logprob"], sum)
				}
				// score keeps generate's fields, in order.
				for _, k := range []string{"index", "sample", "prompt", "response", "stop"} {
					if slines[i][k] != l[k] {
						t.Errorf("line %d: score changed %s: %v → %v", i, k, l[k], slines[i][k])
					}
				}
				distinct[l["response"].(string)] = true
			}
			if len(sampling) > 0 && len(distinct) < 3 {
				t.Errorf("%v: only %d distinct responses among %d samples", args, len(distinct), len(lines))
			}
			// The same seed draws the same responses.
			again, _, _ := runHacrl(t, args...)
			if again != stdout {
				t.Errorf("%v: a second run differs", args)
			}
		}
		// The human form prints each response's text and nothing else.
		stdout, _, code := runHacrl(t, "generate", dir, "12+7=")
		line, _, _ := runHacrl(t, "generate", dir, "12+7=", "--json")
		if code != 0 || stdout != jsonObjects(t, line)[0]["response"].(string)+"\n" {
			t.Errorf("%s: human form %q", dir, stdout)
		}
	}
}

// Prompts come from a text file (one a line) or a .jsonl file ("prompt" or
// "messages"); --raw sends the text without the template; --system
// replaces the system text.
func TestGeneratePromptSources(t *testing.T) {
	dir := lookAgents[1] // chat
	a := loadLookAgent(t, dir)
	tmp := t.TempDir()
	txt := filepath.Join(tmp, "prompts.txt")
	os.WriteFile(txt, []byte("12+7=\n\n40-3=\n"), 0o644)
	jl := filepath.Join(tmp, "prompts.jsonl")
	os.WriteFile(jl, []byte(`{"prompt":"12+7="}`+"\n"+`{"messages":[{"role":"system","content":"Add."},{"role":"user","content":"40-3="}]}`+"\n"), 0o644)
	system := "Add."
	withSystem := a.Template
	withSystem.System = system
	tests := []struct {
		args    []string
		prompts [][]int
	}{
		{[]string{"--file", txt}, [][]int{a.Template.Prompt(a.Tok, "12+7="), a.Template.Prompt(a.Tok, "40-3=")}},
		{[]string{"--file", jl}, [][]int{a.Template.Prompt(a.Tok, "12+7="), withSystem.Prompt(a.Tok, "40-3=")}},
		{[]string{"12+7=", "--raw"}, [][]int{a.Tok.Encode("12+7=")}},
		{[]string{"40-3=", "--system", system}, [][]int{withSystem.Prompt(a.Tok, "40-3=")}},
		// A prompt that starts with '-' is a prompt, not a flag.
		{[]string{"-3+5=", "--max-new-tokens", "3"}, [][]int{a.Template.Prompt(a.Tok, "-3+5=")}},
	}
	for _, tt := range tests {
		stdout, stderr, code := runHacrl(t, append([]string{"generate", dir, "--json", "--max-new-tokens", "4"}, tt.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit status %d: %s", tt.args, code, stderr)
		}
		lines := jsonObjects(t, stdout)
		if len(lines) != len(tt.prompts) {
			t.Fatalf("%v: %d lines, want %d", tt.args, len(lines), len(tt.prompts))
		}
		for i, l := range lines {
			if got := intsOf(t, l["prompt_ids"]); !slices.Equal(got, tt.prompts[i]) {
				t.Errorf("%v line %d: prompt_ids %v, want %v", tt.args, i, got, tt.prompts[i])
			}
		}
	}
}

// Every flag value generate cannot honour is a usage error naming the
// flag; a bad prompt file is a failure naming the file and line.
func TestGenerateRejectsBadInput(t *testing.T) {
	dir := lookAgents[0]
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"prompt":"1+1="}`+"\n"+`{"prompt": 3}`+"\n"), 0o644)
	msgs := filepath.Join(tmp, "msgs.jsonl")
	os.WriteFile(msgs, []byte(`{"messages":[{"role":"user"}]}`+"\n"), 0o644)
	goodMsgs := filepath.Join(tmp, "good.jsonl")
	os.WriteFile(goodMsgs, []byte(`{"messages":[{"role":"user","content":"1+1="}]}`+"\n"), 0o644)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "give a PROMPT or --file FILE"},
		{[]string{"x", "--file", bad}, 2, "not both"},
		{[]string{"x", "--samples", "0"}, 2, "--samples must be >= 1"},
		{[]string{"x", "--max-new-tokens", "-1"}, 2, "--max-new-tokens must be >= 0"},
		{[]string{"x", "--temperature", "-1"}, 2, "--temperature must be a finite number >= 0"},
		{[]string{"x", "--temperature", "1", "--top-p", "0"}, 2, "--top-p must be within (0, 1]"},
		{[]string{"x", "--temperature", "1", "--top-p", "1.5"}, 2, "--top-p must be within (0, 1]"},
		{[]string{"x", "--temperature", "1", "--top-k", "-1"}, 2, "--top-k must be >= 0"},
		{[]string{"x", "--top-k", "5"}, 2, "--top-p and --top-k apply to sampling"},
		{[]string{"x", "--template", "xyz"}, 2, `--template must be plain, chat or hf, got "xyz"`},
		{[]string{"x", "--var", "novalue"}, 2, `--var "novalue": want NAME=VALUE`},
		{[]string{"x", "--var", "messages=[]"}, 2, "--var messages: the renderer sets messages itself"},
		{[]string{"x", "--var", "enable_thinking=false"}, 2, "--var applies to an hf template; the template here is plain"},
		{[]string{"x", "--raw", "--template", "chat"}, 2, "--raw sends the text as it is"},
		{[]string{"x", "--samples", "two"}, 2, `invalid argument "two" for "--samples"`},
		{[]string{"x", "--compute-dtype", "float16"}, 2, `--compute-dtype: compute dtype "float16": want float32 or bfloat16`},
		{[]string{"x", "--compute-dtype", "bfloat16"}, 2, "--compute-dtype: model: compute dtype bfloat16 needs the XLA backend"},
		{[]string{"--file", bad}, 1, bad + `:2: "prompt" must be a string`},
		{[]string{"--file", msgs}, 1, msgs + `:1: "messages": message 0: no "content"`},
		{[]string{"--file", filepath.Join(tmp, "missing.txt")}, 1, "missing.txt"},
		{[]string{"--raw", "--file", goodMsgs}, 1, goodMsgs + ":1: messages need a template"},
		{[]string{strings.Repeat("1+", 200)}, 1, "argument 1: the prompt has"},
	}
	for _, tt := range tests {
		stdout, stderr, code := runHacrl(t, append([]string{"generate", dir}, tt.args...)...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("generate %v: exit status %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
		if tt.code == 2 && !strings.Contains(stderr, "hacrl generate --help") {
			t.Errorf("generate %v: stderr %q lacks the pointer to the help", tt.args, stderr)
		}
		if stdout != "" {
			t.Errorf("generate %v: wrote %q on standard output", tt.args, stdout)
		}
	}
}

// --var values are JSON when they parse as JSON, strings otherwise.
func TestParseVars(t *testing.T) {
	got, err := parseVars([]string{"enable_thinking=false", "n=3", `s="x y"`, "name=Ada", "list=[1,2]", "empty=", "eq=a=b"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"enable_thinking": false, "n": 3.0, "s": "x y", "name": "Ada", "list": []any{1.0, 2.0}, "empty": "", "eq": "a=b"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		g, _ := json.Marshal(got[k])
		w, _ := json.Marshal(v)
		if string(g) != string(w) {
			t.Errorf("%s: %s, want %s", k, g, w)
		}
	}
}
