package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
)

// A prompt and response given as text, as a conversation or as the ids the
// template and tokenizer make of them score the same, and as model.Score
// scores those ids; --raw scores the text without the template.
func TestScoreTextAndIDsAgree(t *testing.T) {
	for _, dir := range lookAgents {
		a := loadLookAgent(t, dir)
		type pair struct{ q, r string }
		pairs := []pair{{"12+7=", "19\n#### 19"}, {"40-3=", "#### 37"}, {"8+8=", ""}}
		var lines []string
		var seqs []model.Sequence
		add := func(v map[string]any, s model.Sequence) {
			data, _ := json.Marshal(v)
			lines = append(lines, string(data))
			seqs = append(seqs, s)
		}
		for _, p := range pairs {
			prompt, resp := a.Template.Prompt(a.Tok, p.q), a.Tok.Encode(p.r)
			s := model.Sequence{Prompt: prompt, Response: resp}
			add(map[string]any{"prompt": p.q, "response": p.r, "id": "text"}, s)
			add(map[string]any{"prompt_ids": prompt, "response_ids": resp, "id": "ids"}, s)
			add(map[string]any{"messages": []tokenizer.Message{{Role: "user", Content: p.q}}, "response": p.r}, s)
			// Ids win over text.
			add(map[string]any{"prompt": "ignored", "prompt_ids": prompt, "response": "ignored", "response_ids": resp}, s)
		}
		file := filepath.Join(t.TempDir(), "in.jsonl")
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runHacrl(t, "score", dir, "--jsonl", file)
		if code != 0 || stderr != "" {
			t.Fatalf("%s: exit status %d: %s", dir, code, stderr)
		}
		out := jsonObjects(t, stdout)
		if len(out) != len(seqs) {
			t.Fatalf("%s: %d lines out for %d in", dir, len(out), len(seqs))
		}
		var nonEmpty []model.Sequence
		for _, s := range seqs {
			if len(s.Response) > 0 {
				nonEmpty = append(nonEmpty, s)
			}
		}
		direct, err := a.Model.Score(context.Background(), nonEmpty, false)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for i, o := range out {
			var in map[string]any
			json.Unmarshal([]byte(lines[i]), &in)
			for key, v := range in {
				if fmt.Sprint(o[key]) != fmt.Sprint(v) {
					t.Errorf("%s line %d: field %s %v, was %v", dir, i+1, key, o[key], v)
				}
			}
			lp := floatsOf(t, o["logprobs"])
			if len(lp) != len(seqs[i].Response) {
				t.Fatalf("%s line %d: %d log-probs for %d response tokens", dir, i+1, len(lp), len(seqs[i].Response))
			}
			sum := 0.0
			for j, v := range lp {
				if float32(v) != direct.LogProbs[k][j] {
					t.Errorf("%s line %d token %d: %v, model.Score %v", dir, i+1, j, v, direct.LogProbs[k][j])
				}
				sum += v
			}
			if len(lp) > 0 {
				k++
			}
			if d := sum - o["sum_logprob"].(float64); d > 1e-6 || d < -1e-6 {
				t.Errorf("%s line %d: sum_logprob %v, the sum %v", dir, i+1, o["sum_logprob"], sum)
			}
		}
		// --raw encodes the prompt text as it is.
		raw := filepath.Join(t.TempDir(), "raw.jsonl")
		os.WriteFile(raw, []byte(`{"prompt":"12+7=","response":"19"}`+"\n"), 0o644)
		stdout, _, code = runHacrl(t, "score", dir, "--jsonl", raw, "--raw")
		want, err := a.Model.Score(context.Background(), []model.Sequence{{Prompt: a.Tok.Encode("12+7="), Response: a.Tok.Encode("19")}}, false)
		if err != nil || code != 0 {
			t.Fatalf("raw: exit status %d, %v", code, err)
		}
		if lp := floatsOf(t, jsonObjects(t, stdout)[0]["logprobs"]); float32(lp[0]) != want.LogProbs[0][0] {
			t.Errorf("%s --raw: %v, want %v", dir, lp, want.LogProbs[0])
		}
	}
}

// A bad line is reported on standard error with its number, the good lines
// are still scored, and the exit status is 1; standard output holds only
// JSON lines. Bad flags are usage errors.
func TestScoreBadLinesAndFlags(t *testing.T) {
	dir := lookAgents[0]
	long := make([]int, 300)
	for i := range long {
		long[i] = 5
	}
	longJSON, _ := json.Marshal(long)
	input := strings.Join([]string{
		`{"prompt":"1+1=","response":"2"}`,
		`{"prompt":"1+1=","response":`,
		`{"prompt":"1+1="}`,
		`{"prompt_ids":[1,2,"x"],"response_ids":[3]}`,
		`{"prompt_ids":[1,2],"response_ids":[99999]}`,
		`{"prompt_ids":` + string(longJSON) + `,"response_ids":[3]}`,
		`{"response":"2"}`,
		`[1,2]`,
		`{"messages":[{"role":"tool","content":"x"}],"response":"2"}`,
		`{"prompt_ids":[],"response_ids":[3]}`,
		`{"prompt":"2+2=","response":"4","logprobs":[0],"sum_logprob":1}`,
	}, "\n")
	file := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(file, []byte(input), 0o644)
	stdout, stderr, code := runHacrl(t, "score", dir, "--jsonl", file)
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	out := jsonObjects(t, stdout)
	if len(out) != 2 || out[0]["response"] != "2" || out[1]["response"] != "4" || len(floatsOf(t, out[1]["logprobs"])) != 1 {
		t.Errorf("the good lines 1 and 11 should be written, scored afresh: %v", out)
	}
	for _, want := range []string{
		"line 2: invalid JSON",
		`line 3: expected "response_ids" or "response"`,
		`line 4: field "prompt_ids" must be a list of token ids`,
		"line 5: response token 0 is 99999, outside the vocabulary",
		"line 6: 300 prompt + 1 response tokens exceed the model's",
		`line 7: expected "prompt_ids", "messages" or "prompt"`,
		"line 8: expected a JSON object",
		`line 9: tokenizer: message 0: role "tool"`,
		"line 10: the prompt has no tokens",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "line 1:") || strings.Contains(stderr, "line 11:") {
		t.Errorf("a good line reported bad:\n%s", stderr)
	}
	flags := []struct {
		args []string
		want string
	}{
		{[]string{}, "--jsonl FILE is required"},
		{[]string{"--jsonl", file, "--raw", "--template", "chat"}, "--raw scores the prompt text as it is"},
		{[]string{"--jsonl", file, "--template", "jinja"}, `--template must be plain, chat or hf, got "jinja"`},
		{[]string{"--jsonl", file, "--var", "=1"}, `--var "=1": want NAME=VALUE`},
		{[]string{"--jsonl", file, "--var", "x=1"}, "--var applies to an hf template; the template here is plain"},
		{[]string{"--jsonl", file, "--bogus"}, "unknown flag: --bogus"},
		{[]string{"--jsonl", file, "--compute-dtype", "float16"}, `--compute-dtype: compute dtype "float16": want float32 or bfloat16`},
		{[]string{"--jsonl", file, "--compute-dtype", "bfloat16"}, "--compute-dtype: model: compute dtype bfloat16"},
	}
	for _, tt := range flags {
		stdout, stderr, code := runHacrl(t, append([]string{"score", dir}, tt.args...)...)
		if code != 2 || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "hacrl score --help") || stdout != "" {
			t.Errorf("score %v: exit status %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
	if _, stderr, code := runHacrl(t, "score", dir, "--jsonl", filepath.Join(t.TempDir(), "none.jsonl")); code != 1 || !strings.Contains(stderr, "none.jsonl") {
		t.Errorf("a missing file: exit status %d, %q", code, stderr)
	}
}
