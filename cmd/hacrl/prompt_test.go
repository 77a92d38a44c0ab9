package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
	"github.com/hacrl/hacrl/train"
)

// writeMessages writes a conversation file for --messages.
func writeMessages(t *testing.T, msgs ...tokenizer.Message) string {
	t.Helper()
	data, _ := json.Marshal(msgs)
	path := filepath.Join(t.TempDir(), "messages.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runPrompt runs hacrl prompt and returns its one JSON object.
func runPrompt(t *testing.T, args ...string) (map[string]any, string) {
	t.Helper()
	stdout, stderr, code := runHacrl(t, append([]string{"prompt"}, args...)...)
	if code != 0 {
		t.Fatalf("prompt %v: exit status %d: %s", args, code, stderr)
	}
	out := jsonObjects(t, stdout)
	if len(out) != 1 {
		t.Fatalf("prompt %v: %d JSON lines, want one object", args, len(out))
	}
	return out[0], stderr
}

// The ids hacrl prompt prints for [user] and [system, user] are exactly the
// prompt the agent trains and evaluates with (Template.Prompt), and the
// text is its rendering; without the generation prompt the chat text lacks
// the assistant header; --template replaces the kind and says so.
func TestPromptMatchesTemplate(t *testing.T) {
	const q, system = "12+7=", "Add the numbers."
	for _, dir := range lookAgents {
		s, err := train.LoadSaved(dir, train.TemplateChoice{})
		if err != nil {
			t.Fatal(err)
		}
		withSystem := s.Template
		withSystem.System = system
		tests := []struct {
			msgs []tokenizer.Message
			tmpl tokenizer.Template
		}{
			{[]tokenizer.Message{{Role: "user", Content: q}}, s.Template},
			{[]tokenizer.Message{{Role: "system", Content: system}, {Role: "user", Content: q}}, withSystem},
		}
		for _, tt := range tests {
			out, stderr := runPrompt(t, dir, "--messages", writeMessages(t, tt.msgs...))
			if got, want := intsOf(t, out["ids"]), tt.tmpl.Prompt(s.Tok, q); !slices.Equal(got, want) {
				t.Errorf("%s %v: ids %v, Template.Prompt %v", dir, tt.msgs, got, want)
			}
			if out["text"] != tt.tmpl.RenderFor(s.Tok, q) {
				t.Errorf("%s %v: text %q, want %q", dir, tt.msgs, out["text"], tt.tmpl.RenderFor(s.Tok, q))
			}
			if out["template"] != s.Meta.Template.Kind || out["source"] != filepath.Join(dir, "agent.json") || stderr != "" {
				t.Errorf("%s: template %v from %v (stderr %q)", dir, out["template"], out["source"], stderr)
			}
		}
	}
	chat := lookAgents[1]
	msgs := writeMessages(t, tokenizer.Message{Role: "user", Content: q})
	gen, _ := runPrompt(t, chat, "--messages", msgs)
	noGen, _ := runPrompt(t, chat, "--messages", msgs, "--no-generation-prompt")
	if gen["text"] != noGen["text"].(string)+"<|im_start|>assistant\n" {
		t.Errorf("--no-generation-prompt: %q, with it %q", noGen["text"], gen["text"])
	}
	plain, stderr := runPrompt(t, chat, "--messages", msgs, "--template", "plain")
	if plain["text"] != q || plain["template"] != "plain" || plain["source"] != "--template" ||
		!strings.Contains(stderr, "--template plain replaces the checkpoint's chat") {
		t.Errorf("--template plain: %v, stderr %q", plain, stderr)
	}
}

// Bad flags are usage errors (2); a bad messages file is a failure (1)
// naming the file and the message.
func TestPromptRejectsBadInput(t *testing.T) {
	dir := lookAgents[0]
	good := writeMessages(t, tokenizer.Message{Role: "user", Content: "1+1="})
	badJSON := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(badJSON, []byte(`{"role":"user"}`), 0o644)
	noRole := filepath.Join(t.TempDir(), "norole.json")
	os.WriteFile(noRole, []byte(`[{"role":"user","content":"a"},{"content":"b"}]`), 0o644)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "--messages FILE is required"},
		{[]string{"--messages", good, "--template", "x"}, 2, `--template must be plain, chat or hf, got "x"`},
		{[]string{"--messages", good, "--var", "a=1"}, 2, "--var applies to an hf template"},
		{[]string{"--messages", good, "--system", "S"}, 2, "unknown flag: --system"},
		{[]string{"--messages", badJSON}, 1, badJSON + `: want a JSON list of {"role": ..., "content": ...}`},
		{[]string{"--messages", noRole}, 1, noRole + `: message 1: no "role"`},
		{[]string{"--messages", writeMessages(t, tokenizer.Message{Role: "tool", Content: "x"})}, 1, `message 0: role "tool"`},
		{[]string{"--messages", filepath.Join(t.TempDir(), "none.json")}, 1, "none.json"},
	}
	for _, tt := range tests {
		stdout, stderr, code := runHacrl(t, append([]string{"prompt", dir}, tt.args...)...)
		if code != tt.code || !strings.Contains(stderr, tt.want) || stdout != "" {
			t.Errorf("prompt %v: exit status %d, stderr %q, stdout %q; want %d and %q", tt.args, code, stderr, stdout, tt.code, tt.want)
		}
	}
}

// An agent whose checkpoint carries the real Qwen3 tokenizer and chat
// template (kind hf, enable_thinking false saved in agent.json): prompt
// renders Qwen3's own format and --var overrides the saved variable;
// generate stops at <|im_end|> and its log-probs equal score's.
func TestLookHFTemplate(t *testing.T) {
	npmDir := npmtest.Dir(t)
	dir := filepath.Join(t.TempDir(), "qwen3")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tokenizer.json", tokenizer.ConfigFile} {
		data, err := os.ReadFile(filepath.Join(npmtest.Model(npmDir, "qwen3"), f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tok := saveTinyLlama(t, dir, 128)
	meta := `{"name":"qwen3","template":{"kind":"hf","vars":{"enable_thinking":false}},"sampling":{"temperature":1,"top_p":1,"max_new_tokens":6}}`
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}

	msgs := writeMessages(t, tokenizer.Message{Role: "user", Content: "What is 2+3?"})
	out, _ := runPrompt(t, dir, "--messages", msgs)
	want := "<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if out["text"] != want || out["template"] != "hf" || out["chat_template"] != filepath.Join(dir, tokenizer.ConfigFile) {
		t.Errorf("prompt: %v; want text %q", out, want)
	}
	if got := intsOf(t, out["ids"]); !slices.Equal(got, tok.Encode(want)) {
		t.Errorf("ids %v, want %v", got, tok.Encode(want))
	}
	thinking, _ := runPrompt(t, dir, "--messages", msgs, "--var", "enable_thinking=true")
	if thinking["text"] != strings.TrimSuffix(want, "<think>\n\n</think>\n\n") {
		t.Errorf("--var enable_thinking=true: %q", thinking["text"])
	}

	s, err := train.LoadSaved(dir, train.TemplateChoice{})
	if err != nil {
		t.Fatal(err)
	}
	imEnd, _ := tok.TokenID("<|im_end|>")
	if !slices.Contains(s.Template.StopTokens(tok), imEnd) {
		t.Fatalf("stop tokens %v lack <|im_end|> %d", s.Template.StopTokens(tok), imEnd)
	}
	stdout, stderr, code := runHacrl(t, "generate", dir, "What is 2+3?", "--json", "--logprobs", "--temperature", "1", "--samples", "4", "--seed", "1")
	if code != 0 {
		t.Fatalf("generate: exit status %d: %s", code, stderr)
	}
	lines := jsonObjects(t, stdout)
	file := filepath.Join(t.TempDir(), "gen.jsonl")
	os.WriteFile(file, []byte(stdout), 0o644)
	scored, stderr, code := runHacrl(t, "score", dir, "--jsonl", file)
	if code != 0 {
		t.Fatalf("score: exit status %d: %s", code, stderr)
	}
	for i, l := range jsonObjects(t, scored) {
		if got := intsOf(t, l["prompt_ids"]); !slices.Equal(got, tok.Encode(want)) {
			t.Errorf("line %d: prompt_ids %v, the rendered prompt %v", i, got, tok.Encode(want))
		}
		ids, gen, sc := intsOf(t, l["response_ids"]), floatsOf(t, lines[i]["logprobs"]), floatsOf(t, l["logprobs"])
		for j := range ids {
			if !closeLogProb(gen[j], sc[j]) {
				t.Errorf("line %d token %d: generate %v, score %v", i, j, gen[j], sc[j])
			}
			if ids[j] == imEnd && (j != len(ids)-1 || l["stop"] != "eos") {
				t.Errorf("line %d: <|im_end|> at %d of %v did not stop it", i, j, ids)
			}
		}
	}
}

// saveTinyLlama saves a one-layer llama-family model with the vocabulary
// and special tokens of dir/tokenizer.json into dir: a checkpoint that
// loads in seconds beside real tokenizer files. It returns the tokenizer.
func saveTinyLlama(t *testing.T, dir string, maxSeq int) tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := backend.New(backend.Choose(""))
	if err != nil {
		t.Fatal(err)
	}
	sp := tok.Special()
	m, err := model.New(b, model.Config{Family: "llama", Vocab: tok.VocabSize(), Dim: 8, Layers: 1, Heads: 2, KVHeads: 1,
		Hidden: 16, MaxSeq: maxSeq, BOS: sp.BOS, EOS: sp.EOS}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	return tok
}
