package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/train"
)

var shippedAgent = filepath.Join("..", "..", "examples", "agents", "gpt-char")

// runEval runs `hacrl eval args…` in process and returns the JSON object it
// printed on standard output (nil on failure), standard error and the exit
// status.
func runEval(t *testing.T, args ...string) (map[string]any, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := execute(context.Background(), append([]string{"eval"}, args...), strings.NewReader(""), &out, &errOut)
	var res map[string]any
	if code == 0 {
		if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s", jerr, out.String())
		}
	}
	return res, errOut.String(), code
}

// Every flag value eval cannot honour is a usage error: exit status 2 and a
// message naming the flag, before any model is loaded.
func TestEvalRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--samples", "-2"}, "--samples must be >= 0"},
		{[]string{"--template", "xyz"}, `--template must be plain, chat or hf, got "xyz"`},
		{[]string{"--problems", "-1"}, "--problems must be >= 0"},
		{[]string{"--max-new-tokens", "-5"}, "--max-new-tokens must be >= 0"},
		{[]string{"--samples", "2", "--temperature", "-0.5"}, "--temperature must be a finite number >= 0"},
		{[]string{"--samples", "2", "--temperature", "NaN"}, "--temperature must be a finite number >= 0"},
		{[]string{"--samples", "2", "--temperature", "+Inf"}, "--temperature must be a finite number >= 0"},
		{[]string{"--temperature", "0.7"}, "--temperature applies to the --samples"},
		{[]string{"--set", ""}, "--set is empty"},
		{[]string{"--samples", "two"}, `invalid argument "two" for "--samples"`},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"--compute-dtype", "fp16"}, `--compute-dtype: compute dtype "fp16": want float32 or bfloat16`},
		{[]string{"--problems", "2", "--compute-dtype", "bfloat16"}, "--compute-dtype: model: compute dtype bfloat16 needs the XLA backend"},
		{[]string{"--set", "gsm8kk"}, "--set gsm8kk: no such split, benchmark or data file; want test or train (the splits of the agent's task), a benchmark (aime24, aime25, amc23, gsm8k, math, "},
		{[]string{"--set", "gsm8kk"}, "or a .jsonl/.parquet file (did you mean gsm8k?)"},
		{[]string{"--set", "tset"}, "(did you mean test?)"},
		{[]string{"--set", "sampling.temperature=0.7"}, "--set sampling.temperature=0.7: eval's --set names what to evaluate on (test or train, a benchmark, or a .jsonl/.parquet file), not a config key (hacrl train --set KEY=VALUE"},
		{[]string{"--set", "eval_test.go"}, "--set eval_test.go: a data file must be named .jsonl (one JSON object a line) or .parquet"},
	}
	for _, tt := range tests {
		_, stderr, code := runEval(t, append([]string{shippedAgent}, tt.args...)...)
		if code != 2 {
			t.Errorf("eval %v: exit status %d, want 2", tt.args, code)
		}
		if !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "hacrl eval --help") {
			t.Errorf("eval %v: stderr %q lacks %q", tt.args, stderr, tt.want)
		}
	}
	// The checkpoint argument is required, once.
	for _, args := range [][]string{{}, {shippedAgent, shippedAgent}} {
		if _, stderr, code := runEval(t, args...); code != 2 || !strings.Contains(stderr, "accepts 1 arg") {
			t.Errorf("eval %v: exit status %d, %q; want a usage error", args, code, stderr)
		}
	}
	// A failure of the work is not a usage error.
	if _, _, code := runEval(t, filepath.Join(t.TempDir(), "missing"), "--problems", "2"); code != 1 {
		t.Errorf("eval of a missing checkpoint: exit status %d, want 1 (a failure, not a usage error)", code)
	}
}

// --temperature 0 is greedy: every one of the k draws is the greedy answer,
// so avg@k, maj@k and pass@k all equal the greedy accuracy; at temperature
// 1 they do not.
func TestEvalTemperatureZeroIsGreedy(t *testing.T) {
	base := []string{shippedAgent, "--set", "test", "--problems", "40", "--samples", "3", "--seed", "5"}
	greedy, _, code := runEval(t, append(base, "--temperature", "0")...)
	if code != 0 {
		t.Fatalf("exit status %d", code)
	}
	acc := greedy["greedy_acc"].(float64)
	for _, k := range []string{"avg@3", "maj@3", "pass@3"} {
		if greedy[k] != acc {
			t.Errorf("temperature 0: %s = %v, greedy_acc %v", k, greedy[k], acc)
		}
	}
	if s := greedy["sampling"].(map[string]any); s["temperature"] != 0.0 {
		t.Errorf("sampling reported as %v", s)
	}
	sampled, _, code := runEval(t, append(base, "--temperature", "1")...)
	if code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if sampled["greedy_acc"] != acc || (sampled["avg@3"] == acc && sampled["pass@3"] == acc) {
		t.Errorf("temperature 1 gave %v; the draws should differ from greedy (greedy_acc %v)", sampled, acc)
	}
}

// eval prompts with the template saved in agent.json; --template replaces
// it and says so on standard error.
func TestEvalTemplateFromCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "chat-copy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "agent.json"} {
		data, err := os.ReadFile(filepath.Join(shippedAgent, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := train.ReadMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	meta.Template = config.Template{Kind: "chat"}
	data, _ := json.Marshal(meta)
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	res, stderr, code := runEval(t, dir, "--problems", "20")
	if code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if tmpl := res["sampling"].(map[string]any)["template"]; tmpl != "chat" || stderr != "" {
		t.Errorf("template %v (stderr %q), want the saved chat", tmpl, stderr)
	}
	plain, stderr, code := runEval(t, dir, "--problems", "20", "--template", "plain")
	if code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if tmpl := plain["sampling"].(map[string]any)["template"]; tmpl != "plain" || !strings.Contains(stderr, "--template plain replaces the checkpoint's chat") {
		t.Errorf("template %v, stderr %q", tmpl, stderr)
	}
	// The agent learned plain prompts: the template changes its answers.
	if res["greedy_acc"] == plain["greedy_acc"] {
		t.Errorf("greedy accuracy %v with either template; the template did not reach the prompts", res["greedy_acc"])
	}
}

// verify writes through the command's streams, so it runs in process:
// answers on the command line and a JSONL stream from standard input.
func TestVerifyInProcess(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		stdin      string
		code       int
		wantStdout string
	}{
		{[]string{"verify", "-3", "-3"}, "", 0, "equal\n"},
		{[]string{"verify", `\frac{1}{2}`, "0.6"}, "", 1, "not equal\n"},
		{[]string{"verify", "--jsonl", "-"}, `{"answer":"0.5","reference":"\\frac12"}` + "\n", 0, `{"answer":"0.5","reference":"\\frac12","equal":true}` + "\n"},
	} {
		var out, errOut bytes.Buffer
		code := execute(context.Background(), tc.args, strings.NewReader(tc.stdin), &out, &errOut)
		if code != tc.code || out.String() != tc.wantStdout {
			t.Errorf("%v: exit %d, stdout %q (stderr %q); want %d, %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.wantStdout)
		}
	}
}

// --prompt-suffix is appended to a dataset's questions: a suffix that makes
// the prompts longer than the agent's context is refused as too long,
// while the same set without it evaluates; on a generated task's split it
// is a usage error.
func TestEvalPromptSuffix(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sums.jsonl")
	if err := os.WriteFile(file, []byte("{\"question\": \"12+30\", \"answer\": \"42\"}\n{\"question\": \"7+5\", \"answer\": \"12\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runEval(t, shippedAgent, "--set", file); code != 0 {
		t.Fatalf("without a suffix: exit %d, %s", code, stderr)
	}
	long := strings.Repeat(" Think step by step.", 4)
	if _, stderr, code := runEval(t, shippedAgent, "--set", file, "--prompt-suffix", long); code != 1 || !strings.Contains(stderr, "exceeds the model's context") {
		t.Errorf("with a long suffix: exit %d, %s; want the prompts refused as too long", code, stderr)
	}
	if _, stderr, code := runEval(t, shippedAgent, "--set", "test", "--problems", "2", "--prompt-suffix", "x"); code != 2 || !strings.Contains(stderr, "--prompt-suffix applies to a benchmark or a dataset") {
		t.Errorf("suffix on a task split: exit %d, %s", code, stderr)
	}
}

// The README's eval of a shipped agent needs no flags: a generated task's
// split takes 200 problems and the agent's agent.json the response length
// it was trained with (32). A length that overflows the context is refused
// with the largest that fits, and that one fits.
func TestEvalShippedDefaults(t *testing.T) {
	bpe := filepath.Join("..", "..", "examples", "agents", "llama-bpe")
	res, stderr, code := runEval(t, bpe, "--set", "test")
	if code != 0 {
		t.Fatalf("hacrl eval %s --set test: exit %d, %s", bpe, code, stderr)
	}
	if res["problems"] != 200.0 || res["sampling"].(map[string]any)["max_new_tokens"] != 32.0 {
		t.Errorf("defaults: %v problems, sampling %v; want 200 problems and the agent's 32 new tokens", res["problems"], res["sampling"])
	}
	_, stderr, code = runEval(t, bpe, "--set", "test", "--max-new-tokens", "40")
	want := "Give --max-new-tokens 39 or less: the longest prompt has 25 of the context's 64 tokens."
	if code != 1 || !strings.Contains(stderr, "34 of 200 problems have a prompt that + 40 new tokens exceeds the model's context of 64") || !strings.Contains(stderr, want) {
		t.Fatalf("--max-new-tokens 40: exit %d, %s; want the overflow refused with %q", code, stderr, want)
	}
	if strings.Contains(stderr, "agent.json max_new_tokens") {
		t.Errorf("the hint speaks of agent.json when --max-new-tokens was given: %s", stderr)
	}
	if _, stderr, code := runEval(t, bpe, "--set", "test", "--max-new-tokens", "39"); code != 0 {
		t.Errorf("the suggested --max-new-tokens 39 does not fit: exit %d, %s", code, stderr)
	}
}
