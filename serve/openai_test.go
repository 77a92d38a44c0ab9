package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
)

// serveLoopback serves f's server with Server.Serve on a fresh listener
// at 127.0.0.1:0 (the path hacrl serve takes) and points f.url at it; the
// test's end shuts it down.
func (f *fixture) serveLoopback() {
	f.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	f.serveOn(l)
}

// serveOn serves f's server on l until the test ends.
func (f *fixture) serveOn(l net.Listener) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(ctx, l) }()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.t.Errorf("Serve: %v", err)
		}
	})
	f.url = "http://" + l.Addr().String()
}

// decode is what a lone model.Batch sequence samples from prompt with
// SeedStream(seed, 0): a request's first choice with that seed.
func (f *fixture) decode(prompt []int, opt model.SampleOptions, seed uint64) model.Sample {
	f.t.Helper()
	b, err := f.m.NewBatch(1, f.cfg.MaxContext)
	if err != nil {
		f.t.Fatal(err)
	}
	defer b.Close()
	opt.Stop, opt.Vocab = f.cfg.Sampling.Stop, f.cfg.Sampling.Vocab
	if _, err := b.Add(prompt, opt, model.SeedStream(seed, 0)); err != nil {
		f.t.Fatal(err)
	}
	var s model.Sample
	for b.Len() > 0 {
		toks, err := b.Step(context.Background())
		if err != nil {
			f.t.Fatal(err)
		}
		s.Tokens, s.LogProbs = append(s.Tokens, toks[0].ID), append(s.LogProbs, toks[0].LogProb)
	}
	return s
}

// openaiCall is one call of tokenizer/testdata/npm/openai.js.
type openaiCall struct {
	Kind   string         `json:"kind"`
	Params map[string]any `json:"params,omitempty"`
	APIKey *string        `json:"apiKey,omitempty"`
}

// openaiOut is what openai.js prints for one call.
type openaiOut struct {
	Result json.RawMessage   `json:"result"`
	Chunks []json.RawMessage `json:"chunks"`
	Error  *struct {
		Status  *int    `json:"status"`
		Message string  `json:"message"`
		Type    *string `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// streamChunk is a streamed chunk of either endpoint, as the client yields it.
type streamChunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Index    int                      `json:"index"`
		Text     string                   `json:"text"`
		Delta    struct{ Content string } `json:"delta"`
		Finish   *string                  `json:"finish_reason"`
		Logprobs *struct {
			Tokens        []string      `json:"tokens"`
			TokenLogprobs []*float32    `json:"token_logprobs"`
			Content       []chatLogprob `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// The official OpenAI client (npm openai, pinned) drives hacrl serve on
// loopback with an API key: completions (text and token-id prompts, n,
// logprobs, echo scoring, seeds), chat, streaming of both, the model list,
// and the errors as the client raises them.
func TestOpenAIClient(t *testing.T) {
	npmDir := npmtest.Dir(t)
	f := newFixture(t, func(c *Config) { c.APIKey = "test-key" })
	f.serveLoopback()

	ids := f.prompt("12+7=")
	msgs := []tokenizer.Message{{Role: "system", Content: "Add."}, {Role: "user", Content: "2+2?"}}
	chatIDs, err := f.tmpl.PromptMessages(f.tok, msgs, true)
	if err != nil {
		t.Fatal(err)
	}
	scored := f.prompt("21-4=17")
	wrong, long := "wrong-key", slices.Repeat([]int{5}, 70)
	cmpl := map[string]any{"model": "tiny", "prompt": "12+7=", "max_tokens": 20, "seed": 1, "logprobs": 2, "return_token_ids": true}
	with := func(base map[string]any, kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	chat := map[string]any{"model": "tiny", "messages": msgs, "max_tokens": 12, "seed": 9, "logprobs": true, "top_logprobs": 3, "return_token_ids": true}
	usageOn := map[string]any{"include_usage": true}
	calls := []openaiCall{
		0:  {Kind: "completions", Params: cmpl},
		1:  {Kind: "completions", Params: with(cmpl, "prompt", ids)},
		2:  {Kind: "completions", Params: map[string]any{"model": "tiny", "prompt": "3+4=", "max_tokens": 15, "n": 3, "seed": 5, "return_token_ids": true}},
		3:  {Kind: "completions", Params: map[string]any{"model": "tiny", "prompt": "3+4=", "max_tokens": 15, "seed": 5, "return_token_ids": true}},
		4:  {Kind: "completions", Params: map[string]any{"model": "tiny", "prompt": "3+4=", "max_tokens": 15, "seed": 5, "return_token_ids": true}},
		5:  {Kind: "completions", Params: map[string]any{"model": "tiny", "prompt": scored, "max_tokens": 0, "echo": true, "logprobs": 0}},
		6:  {Kind: "chat", Params: chat},
		7:  {Kind: "completions", Params: with(cmpl, "stream", true, "stream_options", usageOn)},
		8:  {Kind: "chat", Params: with(chat, "stream", true, "stream_options", usageOn)},
		9:  {Kind: "models"},
		10: {Kind: "completions", Params: cmpl, APIKey: &wrong},
		11: {Kind: "completions", Params: with(cmpl, "temperature", -1)},
		12: {Kind: "chat", Params: with(chat, "model", "gpt-4o")},
		13: {Kind: "completions", Params: with(cmpl, "prompt", long)},
		14: {Kind: "chat", Params: with(chat, "stream", true, "top_logprobs", 99)},
	}
	var outs []openaiOut
	npmtest.Run(t, npmDir, "openai.js", map[string]any{"baseURL": f.url + "/v1", "apiKey": "test-key", "calls": calls}, &outs)
	if len(outs) != len(calls) {
		t.Fatalf("openai.js answered %d calls of %d", len(outs), len(calls))
	}
	result := func(i int, v any) {
		t.Helper()
		if o := outs[i]; o.Error != nil || o.Result == nil {
			t.Fatalf("call %d (%s): the client got %+v", i, calls[i].Kind, o.Error)
		}
		if err := json.Unmarshal(outs[i].Result, v); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	var res [6]completion
	for _, i := range []int{0, 1, 2, 3, 4, 5} {
		result(i, &res[i])
	}

	// A text prompt and its token ids sample what the seed's stream samples.
	// (Seeds stay below 2⁵³: JavaScript numbers hold no more.)
	want := f.decode(ids, model.SampleOptions{MaxNewTokens: 20, Temperature: 1}, 1)
	for _, i := range []int{0, 1} {
		c := res[i].Choices[0]
		if !slices.Equal(c.TokenIDs, want.Tokens) || !slices.Equal(logprobs32(t, c.Logprobs.TokenLogprobs), want.LogProbs) {
			t.Errorf("call %d: tokens %v log-probs %v, the seed's stream %v %v", i, c.TokenIDs, c.Logprobs.TokenLogprobs, want.Tokens, want.LogProbs)
		}
		for k, top := range c.Logprobs.TopLogprobs {
			if len(top) < 2 || len(top) > 3 || top[c.Logprobs.Tokens[k]] != want.LogProbs[k] {
				t.Errorf("call %d token %d: top log-probs %v, want 2 (3 with the sampled token) holding %q: %v", i, k, top, c.Logprobs.Tokens[k], want.LogProbs[k])
			}
		}
		if res[i].Object != "text_completion" || res[i].Model != "tiny" || res[i].Usage.PromptTokens != len(ids) || res[i].Usage.CompletionTokens != len(want.Tokens) {
			t.Errorf("call %d: object %q model %q usage %+v", i, res[i].Object, res[i].Model, res[i].Usage)
		}
	}
	if res[0].Choices[0].Text != res[1].Choices[0].Text || res[0].Choices[0].Text == "" {
		t.Errorf("text prompt gave %q, its token ids %q", res[0].Choices[0].Text, res[1].Choices[0].Text)
	}
	// n 3: choice 0 is the seed's lone choice; the same seed gives the same text.
	if n := res[2].Choices; len(n) != 3 || n[0].Index != 0 || n[2].Index != 2 || !slices.Equal(n[0].TokenIDs, res[3].Choices[0].TokenIDs) {
		t.Errorf("n 3 seed 5: %+v; want 3 choices, the first %v", n, res[3].Choices[0].TokenIDs)
	}
	if a, b := res[3].Choices[0], res[4].Choices[0]; a.Text != b.Text || !slices.Equal(a.TokenIDs, b.TokenIDs) {
		t.Errorf("seed 5 twice: %q then %q", a.Text, b.Text)
	}
	// Echo with max_tokens 0 scores the prompt as Model.Score does.
	sc, err := f.m.Score(context.Background(), []model.Sequence{{Prompt: scored[:1], Response: scored[1:]}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if lp := res[5].Choices[0].Logprobs; lp == nil || len(lp.TokenLogprobs) != len(scored) || lp.TokenLogprobs[0] != nil ||
		!slices.Equal(logprobs32(t, lp.TokenLogprobs[1:]), sc.LogProbs[0]) || res[5].Usage.CompletionTokens != 0 {
		t.Errorf("echo scoring: %+v usage %+v, Score %v", lp, res[5].Usage, sc.LogProbs[0])
	}

	// Chat: the template's prompt, Generate's tokens, the chat log-prob shape.
	var ch chatCompletion
	result(6, &ch)
	wantChat := f.decode(chatIDs, model.SampleOptions{MaxNewTokens: 12, Temperature: 1}, 9)
	c := ch.Choices[0]
	if ch.Object != "chat.completion" || c.Message.Role != "assistant" || !slices.Equal(ch.PromptTokenIDs, chatIDs) ||
		!slices.Equal(c.TokenIDs, wantChat.Tokens) || c.Logprobs == nil || len(c.Logprobs.Content) != len(wantChat.Tokens) {
		t.Fatalf("chat: %+v; want prompt %v tokens %v", ch, chatIDs, wantChat.Tokens)
	}
	for i, e := range c.Logprobs.Content {
		if e.Logprob != wantChat.LogProbs[i] || len(e.TopLogprobs) != 3 || string(intsToBytes(e.Bytes)) != e.Token {
			t.Errorf("chat token %d: %+v, want log-prob %v and 3 top", i, e, wantChat.LogProbs[i])
		}
	}

	// Streams concatenate to the whole responses, usage last.
	type streamed struct {
		text, finish string
		tokens       []string
		use          *usage
	}
	collect := func(i int) streamed {
		var s streamed
		if outs[i].Error != nil || len(outs[i].Chunks) == 0 {
			t.Fatalf("stream %d: %+v", i, outs[i].Error)
		}
		for k, raw := range outs[i].Chunks {
			var ck streamChunk
			if err := json.Unmarshal(raw, &ck); err != nil {
				t.Fatalf("stream %d chunk %d: %v", i, k, err)
			}
			if ck.Usage != nil {
				if k != len(outs[i].Chunks)-1 || len(ck.Choices) != 0 {
					t.Errorf("stream %d: usage in chunk %d of %d with %d choices; want it last, alone", i, k, len(outs[i].Chunks), len(ck.Choices))
				}
				s.use = ck.Usage
			}
			for _, x := range ck.Choices {
				s.text += x.Text + x.Delta.Content
				if x.Finish != nil {
					s.finish = *x.Finish
				}
				if x.Logprobs != nil {
					s.tokens = append(s.tokens, x.Logprobs.Tokens...)
					for _, e := range x.Logprobs.Content {
						s.tokens = append(s.tokens, e.Token)
					}
				}
			}
		}
		if s.use == nil {
			t.Errorf("stream %d: no usage chunk with include_usage", i)
			s.use = &usage{}
		}
		return s
	}
	sc7 := collect(7)
	if w := res[0].Choices[0]; sc7.text != w.Text || sc7.finish != w.FinishReason || !slices.Equal(sc7.tokens, w.Logprobs.Tokens) || *sc7.use != res[0].Usage {
		t.Errorf("streamed completion %q %q %q %+v, whole %q %q %q %+v", sc7.text, sc7.finish, sc7.tokens, *sc7.use, w.Text, w.FinishReason, w.Logprobs.Tokens, res[0].Usage)
	}
	sc8 := collect(8)
	var chatTokens []string
	for _, e := range c.Logprobs.Content {
		chatTokens = append(chatTokens, e.Token)
	}
	if sc8.text != c.Message.Content || sc8.finish != c.FinishReason || !slices.Equal(sc8.tokens, chatTokens) || *sc8.use != ch.Usage {
		t.Errorf("streamed chat %q %q %q %+v, whole %q %q %q %+v", sc8.text, sc8.finish, sc8.tokens, *sc8.use, c.Message.Content, c.FinishReason, chatTokens, ch.Usage)
	}

	var models struct {
		Data []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	result(9, &models)
	if len(models.Data) != 1 || models.Data[0].ID != "tiny" || models.Data[0].Object != "model" {
		t.Errorf("models.list: %+v", models)
	}

	// Errors as the client raises them: status, param, code.
	for _, tc := range []struct {
		call   int
		status int
		param  string
		code   string
	}{
		{10, 401, "", "invalid_api_key"},
		{11, 400, "temperature", ""},
		{12, 404, "model", "model_not_found"},
		{13, 400, "prompt", "context_length_exceeded"},
		{14, 400, "top_logprobs", ""}, // refused before the stream begins
	} {
		e := outs[tc.call].Error
		if e == nil || e.Status == nil {
			t.Errorf("call %d: the client got %s, want an APIError %d", tc.call, outs[tc.call].Result, tc.status)
			continue
		}
		param, code := "", ""
		if e.Param != nil {
			param = *e.Param
		}
		if e.Code != nil {
			code = *e.Code
		}
		if *e.Status != tc.status || param != tc.param || code != tc.code || e.Type == nil || *e.Type == "" ||
			(tc.param != "" && !strings.Contains(e.Message, tc.param)) {
			t.Errorf("call %d: status %d param %q code %q type %v %q, want %d %q %q", tc.call, *e.Status, param, code, e.Type, e.Message, tc.status, tc.param, tc.code)
		}
	}
}
