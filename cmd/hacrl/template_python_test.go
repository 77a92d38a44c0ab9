package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/internal/pyenv"
	"github.com/hacrl/hacrl/tokenizer"
)

// applyResult is tokenizer/testdata/hf_oracle.py's answer to "apply".
type applyResult struct {
	Apply []struct {
		Texts  []*string `json:"texts"`
		IDs    [][]int   `json:"ids"`
		Errors []*string `json:"errors"`
	} `json:"apply"`
}

// promptCase is one hacrl prompt call and the apply_chat_template call it
// must equal.
type promptCase struct {
	layout string
	msgs   []tokenizer.Message
	gen    bool
	flags  []string       // --var flags
	vars   map[string]any // apply_chat_template's template variables
}

// hacrl prompt on a checkpoint with a chat template and no agent.json
// (the real Qwen3 files, Qwen3 with its template in chat_template.jinja,
// and a dated Llama 3.2 style template) renders with that template by
// default, and its text and ids equal transformers' apply_chat_template:
// Qwen3 with enable_thinking unset, true and false (--var), the dated
// template with --var date_string and without (hacrl's fixed date), with
// the generation prompt on and off. --template plain still renders plain.
// hacrl generate, score and eval on such a checkpoint prompt the same way.
func TestPromptEqualsApplyChatTemplate(t *testing.T) {
	npmDir := npmtest.Dir(t)
	dirs := npmtest.TemplateDirs(t, npmDir)
	u := func(s string) tokenizer.Message { return tokenizer.Message{Role: "user", Content: s} }
	// The question generate is given, then a multi-turn conversation (each
	// hacrl call loads the 151,669-token vocabulary: a few calls).
	q := "What is 12+7?"
	cases := []promptCase{{npmtest.Qwen3Jinja, []tokenizer.Message{u(q)}, true, nil, nil}}
	convs := [][]tokenizer.Message{
		{{Role: "system", Content: "You are a careful mathematician."}, u("Natalia sold clips to 48 of her friends.\nHow many?"),
			{Role: "assistant", Content: "<think>\nhalf of 48\n</think>\n\nThe answer is \\boxed{72}."}, u("  And in June? ")},
	}
	for _, msgs := range convs {
		for _, gen := range []bool{true, false} {
			cases = append(cases,
				promptCase{npmtest.Qwen3, msgs, gen, nil, nil},
				promptCase{npmtest.Qwen3, msgs, gen, []string{"--var", "enable_thinking=true"}, map[string]any{"enable_thinking": true}},
				promptCase{npmtest.Qwen3, msgs, gen, []string{"--var", "enable_thinking=false"}, map[string]any{"enable_thinking": false}},
				promptCase{npmtest.Qwen3Jinja, msgs, gen, []string{"--var", "enable_thinking=false"}, map[string]any{"enable_thinking": false}},
				promptCase{npmtest.Llama3Dated, msgs, gen, []string{"--var", "date_string=01 Jan 2025"}, map[string]any{"date_string": "01 Jan 2025"}},
				promptCase{npmtest.Llama3Dated, msgs, gen, nil, map[string]any{"date_string": "26 Jul 2024"}})
		}
	}
	var apply []map[string]any
	for _, c := range cases {
		ctx := map[string]any{"messages": c.msgs, "add_generation_prompt": c.gen, "vars": c.vars}
		apply = append(apply, map[string]any{"dir": dirs[c.layout], "contexts": []any{ctx}})
	}
	var res applyResult
	pyenv.Run(t, filepath.Join("..", "..", "tokenizer", "testdata", "hf_oracle.py"), map[string]any{"apply": apply}, &res)
	if len(res.Apply) != len(cases) {
		t.Fatalf("hf_oracle.py: %d results for %d cases", len(res.Apply), len(cases))
	}
	for i, c := range cases {
		py := res.Apply[i]
		if py.Errors[0] != nil {
			t.Fatalf("%s: apply_chat_template: %s", c.layout, *py.Errors[0])
		}
		args := append([]string{dirs[c.layout], "--messages", writeMessages(t, c.msgs...)}, c.flags...)
		if !c.gen {
			args = append(args, "--no-generation-prompt")
		}
		out, stderr := runPrompt(t, args...)
		if out["text"] != *py.Texts[0] || !slices.Equal(intsOf(t, out["ids"]), py.IDs[0]) {
			t.Errorf("prompt %v:\n text %q\n ids  %v\napply_chat_template:\n text %q\n ids  %v", args[1:], out["text"], out["ids"], *py.Texts[0], py.IDs[0])
		}
		if out["template"] != tokenizer.KindHF || out["source"] != "default (no agent.json; the checkpoint's chat template)" || stderr != "" {
			t.Errorf("prompt %s: template %v from %v (stderr %q), want hf by default", c.layout, out["template"], out["source"], stderr)
		}
	}

	dir := dirs[npmtest.Qwen3Jinja]
	plain, _ := runPrompt(t, dir, "--messages", writeMessages(t, u(q)), "--template", "plain")
	if plain["text"] != q || plain["template"] != tokenizer.KindPlain || plain["source"] != "--template" {
		t.Errorf("--template plain: %v", plain)
	}

	// generate and eval: a tiny model with the Qwen3 vocabulary beside the
	// files; the question's prompt is apply_chat_template's.
	saveTinyLlama(t, dir, 512)
	if _, err := os.Stat(filepath.Join(dir, "agent.json")); err == nil {
		t.Fatal("the checkpoint has an agent.json")
	}
	want := res.Apply[0] // [user q] with the generation prompt, no vars
	stdout, stderr, code := runHacrl(t, "generate", dir, q, "--json", "--max-new-tokens", "2")
	if code != 0 {
		t.Fatalf("generate: exit status %d: %s", code, stderr)
	}
	if lines := jsonObjects(t, stdout); len(lines) != 1 || !slices.Equal(intsOf(t, lines[0]["prompt_ids"]), want.IDs[0]) {
		t.Errorf("generate: %s\nwant prompt_ids %v", stdout, want.IDs[0])
	}
	// score: the question's prompt scores as apply_chat_template's ids do.
	ids, _ := json.Marshal(want.IDs[0])
	lines := fmt.Sprintf("{\"prompt\": %q, \"response\": \"19\"}\n{\"prompt_ids\": %s, \"response\": \"19\"}\n", q, ids)
	file := filepath.Join(t.TempDir(), "score.jsonl")
	if err := os.WriteFile(file, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runHacrl(t, "score", dir, "--jsonl", file)
	if code != 0 {
		t.Fatalf("score: exit status %d: %s", code, stderr)
	}
	if sc := jsonObjects(t, stdout); len(sc) != 2 || sc[0]["sum_logprob"] == nil || sc[0]["sum_logprob"] != sc[1]["sum_logprob"] {
		t.Errorf("score: the question and apply_chat_template's ids score differently:\n%s", stdout)
	}
	ev, stderr, code := runEval(t, dir, "--set", "gsm8k", "--problems", "1", "--max-new-tokens", "2")
	if code != 0 {
		t.Fatalf("eval: exit status %d: %s", code, stderr)
	}
	if tmpl := ev["sampling"].(map[string]any)["template"]; tmpl != tokenizer.KindHF {
		t.Errorf("eval: template %v, want hf", tmpl)
	}
}
