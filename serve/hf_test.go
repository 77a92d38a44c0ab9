package serve

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/hacrl/hacrl/internal/hfstandin"
	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
)

// A Qwen3-0.6B stand-in (its real tokenizer and Jinja chat template, a
// vocabulary padded beyond the tokenizer's): chat renders the checkpoint's
// template (chat_template_kwargs reaching it), samples as Generate does,
// ends at a request's stop_token_ids and never samples an id past the
// tokenizer.
func TestChatHFTemplate(t *testing.T) {
	npmDir := npmtest.Dir(t)
	dir := t.TempDir()
	if err := hfstandin.Write(testBackend(t), dir, npmtest.Model(npmDir, "qwen3"), hfstandin.Small(hfstandin.Qwen3_0_6B, 3)); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	tokPath := filepath.Join(dir, "tokenizer.json")
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := tokenizer.Template{Kind: tokenizer.KindHF}
	if err := tmpl.LoadChat(tokPath, tok); err != nil {
		t.Fatal(err)
	}
	stops := tmpl.StopTokens(tok)
	if tok.VocabSize() >= m.Config().Vocab {
		t.Fatalf("the stand-in's vocabulary %d is not padded beyond the tokenizer's %d", m.Config().Vocab, tok.VocabSize())
	}
	f := newFixture(t, func(c *Config) {
		c.Model, c.Tok, c.Template, c.MaxContext = m, tok, tmpl, 256
		c.Sampling = model.SampleOptions{MaxNewTokens: 16, Stop: stops, Vocab: tok.VocabSize()}
	})
	f.m, f.tok, f.tmpl = m, tok, tmpl
	msgs := []tokenizer.Message{{Role: "user", Content: "What is 2+3?"}}
	var prompts [][]int
	for _, thinking := range []any{nil, false} {
		req := map[string]any{"messages": msgs, "max_tokens": 16, "seed": rowSeed(4), "return_token_ids": true,
			"temperature": 1.5, "logprobs": true, "top_logprobs": 20}
		t2 := tmpl
		if thinking != nil {
			req["chat_template_kwargs"] = map[string]any{"enable_thinking": thinking}
			t2.Vars = map[string]any{"enable_thinking": thinking}
		}
		ids, err := t2.PromptMessages(tok, msgs, true)
		if err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, ids)
		var got chatCompletion
		f.post("/v1/chat/completions", req, &got)
		if !slices.Equal(got.PromptTokenIDs, ids) {
			t.Errorf("enable_thinking %v: prompt %v, the template renders %v", thinking, got.PromptTokenIDs, ids)
		}
		want := f.generate(m, ids, model.SampleOptions{MaxNewTokens: 16, Temperature: 1.5}, 4)
		c := got.Choices[0]
		if !slices.Equal(c.TokenIDs, want.Tokens) {
			t.Errorf("enable_thinking %v: %v, Generate %v", thinking, c.TokenIDs, want.Tokens)
		}
		for i, e := range c.Logprobs.Content {
			for _, top := range e.TopLogprobs {
				if id, ok := tok.TokenID(top.Token); ok && id >= tok.VocabSize() {
					t.Errorf("token %d: top log-prob of id %d past the tokenizer", i, id)
				}
			}
		}
		for _, id := range c.TokenIDs {
			if id >= tok.VocabSize() {
				t.Errorf("sampled id %d past the tokenizer's %d", id, tok.VocabSize())
			}
		}
	}
	if slices.Equal(prompts[0], prompts[1]) {
		t.Errorf("enable_thinking false renders the prompt as the default does: %v", prompts[0])
	}
	// stop_token_ids naming the first sampled token end the response there.
	var first chatCompletion
	f.post("/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 5, "seed": 1, "return_token_ids": true}, &first)
	var cut chatCompletion
	f.post("/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 5, "seed": 1, "return_token_ids": true,
		"stop_token_ids": []int{first.Choices[0].TokenIDs[0]}}, &cut)
	if c := cut.Choices[0]; len(c.TokenIDs) != 1 || c.FinishReason != "stop" {
		t.Errorf("stop_token_ids at the first token: %v %q", c.TokenIDs, c.FinishReason)
	}
}
