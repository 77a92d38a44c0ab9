package tokenizer

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Rendering the conversation a question makes ([system?, user] with the
// generation prompt) gives exactly Prompt's ids and RenderFor's text, for
// every plain and chat form: a tokenizer with the ChatML tokens and one
// without, with and without a system text and a format.
func TestPromptMessagesMatchesPrompt(t *testing.T) {
	toks := map[string]Tokenizer{}
	for _, name := range []string{"gpt-char", "llama-bpe"} { // llama-bpe has <|im_start|>/<|im_end|>
		tok, err := Load(filepath.Join("..", "examples", "agents", name, "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		toks[name] = tok
	}
	if !hasChatML(toks["llama-bpe"]) || hasChatML(toks["gpt-char"]) {
		t.Fatal("the shipped tokenizers no longer cover both chat forms")
	}
	questions := []string{"12+7=", "What is 3 - 5?\nThink.", ""}
	for tokName, tok := range toks {
		for _, kind := range []string{"", KindPlain, KindChat} {
			for _, system := range []string{"", "You add numbers."} {
				for _, format := range []string{"", "Q: {question}\nA:"} {
					tmpl := Template{Kind: kind, System: system, Format: format}
					for _, q := range questions {
						want := tmpl.Prompt(tok, q)
						got, err := tmpl.PromptMessages(tok, tmpl.Messages(q), true)
						if err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(got, want) {
							t.Errorf("%s %+v %q: PromptMessages %v, Prompt %v", tokName, tmpl, q, got, want)
						}
						text, _ := tmpl.RenderMessages(tok, tmpl.Messages(q), true)
						if text != tmpl.RenderFor(tok, q) {
							t.Errorf("%s %+v %q: RenderMessages %q, RenderFor %q", tokName, tmpl, q, text, tmpl.RenderFor(tok, q))
						}
					}
				}
			}
		}
	}
}

// Multi-turn conversations render turn by turn; the generation prompt is
// the only difference add_generation_prompt makes; an unknown role is an
// error naming the message.
func TestRenderMessagesTurns(t *testing.T) {
	chatTok, err := Load(filepath.Join("..", "examples", "agents", "llama-bpe", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	plainTok, err := Load(filepath.Join("..", "examples", "agents", "gpt-char", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	conv := []Message{{"system", "S"}, {"user", "1+1="}, {"assistant", "2"}, {"user", "2+2="}}
	tests := []struct {
		kind    string
		tok     Tokenizer
		gen     bool
		want    string
		wantErr string
	}{
		{KindPlain, plainTok, true, "S\n1+1=2\n2+2=", ""},
		{KindPlain, plainTok, false, "S\n1+1=2\n2+2=", ""},
		{KindChat, plainTok, true, "S\nUser: 1+1=\nAssistant: 2\nUser: 2+2=\nAssistant: ", ""},
		{KindChat, plainTok, false, "S\nUser: 1+1=\nAssistant: 2\nUser: 2+2=\n", ""},
		{KindChat, chatTok, true, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n1+1=<|im_end|>\n<|im_start|>assistant\n2<|im_end|>\n<|im_start|>user\n2+2=<|im_end|>\n<|im_start|>assistant\n", ""},
		{KindChat, chatTok, false, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n1+1=<|im_end|>\n<|im_start|>assistant\n2<|im_end|>\n<|im_start|>user\n2+2=<|im_end|>\n", ""},
	}
	for _, tt := range tests {
		got, err := Template{Kind: tt.kind}.RenderMessages(tt.tok, conv, tt.gen)
		if err != nil || got != tt.want {
			t.Errorf("%s gen=%v: %q, %v; want %q", tt.kind, tt.gen, got, err, tt.want)
		}
	}
	for _, kind := range []string{KindPlain, KindChat} {
		_, err := Template{Kind: kind}.RenderMessages(chatTok, []Message{{"user", "x"}, {"tool", "y"}}, true)
		if err == nil || !strings.Contains(err.Error(), `message 1: role "tool"`) {
			t.Errorf("%s: unknown role gave %v", kind, err)
		}
	}
	if _, err := (Template{Kind: KindHF}).RenderMessages(chatTok, conv, true); err == nil || !strings.Contains(err.Error(), "LoadChat") {
		t.Errorf("hf without a loaded chat template: %v", err)
	}
}
