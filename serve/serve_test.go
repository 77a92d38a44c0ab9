package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
)

// agentDir is the tiny chat agent the tests serve (a Llama with a BPE
// tokenizer, 64 positions).
const agentDir = "../examples/agents/llama-bpe"

var (
	backendOnce sync.Once
	testB       compute.Backend
	backendErr  error
)

func testBackend(t testing.TB) compute.Backend {
	t.Helper()
	backendOnce.Do(func() { testB, backendErr = backend.New(backend.Sequential) })
	if backendErr != nil {
		t.Fatal(backendErr)
	}
	return testB
}

// fixture is a server of the tiny agent on a loopback httptest server.
type fixture struct {
	t    *testing.T
	srv  *Server
	url  string
	m    *model.Model
	tok  tokenizer.Tokenizer
	tmpl tokenizer.Template
	cfg  Config
}

func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	m, err := model.Load(testBackend(t), agentDir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(agentDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := tokenizer.Template{Kind: tokenizer.KindChat}
	cfg := Config{Model: m, Tok: tok, Template: tmpl, Name: "tiny",
		Sampling: model.SampleOptions{MaxNewTokens: 40, Stop: tmpl.StopTokens(tok), Vocab: tok.VocabSize()},
		Load:     func(_ context.Context, dir string) (*model.Model, error) { return model.Load(testBackend(t), dir) },
		Logf:     func(string, ...any) {}}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &fixture{t: t, srv: srv, url: hs.URL, m: m, tok: tok, tmpl: tmpl, cfg: srv.Config()}
}

// do sends a request and returns the status and body.
func (f *fixture) do(method, path, body string, header ...string) (int, []byte) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, data
}

// post sends v as JSON and decodes a 200 reply into out.
func (f *fixture) post(path string, v any, out any) {
	f.t.Helper()
	if err := f.tryPost(path, v, out); err != nil {
		f.t.Fatal(err)
	}
}

// tryPost is post for goroutines other than the test's: it returns the error.
func (f *fixture) tryPost(path string, v any, out any) error {
	body, _ := json.Marshal(v)
	resp, err := http.Post(f.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s %s: %d %s", path, body, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("POST %s: %v in %s", path, err, data)
	}
	return nil
}

type legacyLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float32           `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type completion struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index          int             `json:"index"`
		Text           string          `json:"text"`
		FinishReason   string          `json:"finish_reason"`
		TokenIDs       []int           `json:"token_ids"`
		PromptTokenIDs []int           `json:"prompt_token_ids"`
		Logprobs       *legacyLogprobs `json:"logprobs"`
	} `json:"choices"`
	Usage         usage  `json:"usage"`
	WeightVersion string `json:"weight_version"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type chatCompletion struct {
	Object  string `json:"object"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
		TokenIDs     []int  `json:"token_ids"`
		Logprobs     *struct {
			Content []chatLogprob `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
	PromptTokenIDs []int  `json:"prompt_token_ids"`
	Usage          usage  `json:"usage"`
	WeightVersion  string `json:"weight_version"`
}

// prompt is the ids a completion request's text prompt encodes to.
func (f *fixture) prompt(text string) []int {
	return append([]int{f.tok.Special().BOS}, f.tok.Encode(text)...)
}

// generate is what model.Generate gives prompt alone with rng seed
// (PCG(seed, 0)), under the server's stop tokens and vocabulary.
func (f *fixture) generate(m *model.Model, prompt []int, opt model.SampleOptions, seed uint64) model.Sample {
	f.t.Helper()
	opt.Stop, opt.Vocab = f.cfg.Sampling.Stop, f.cfg.Sampling.Vocab
	s, err := m.Generate(context.Background(), [][]int{prompt}, opt, rand.New(rand.NewPCG(seed, 0)))
	if err != nil {
		f.t.Fatal(err)
	}
	return s[0]
}

// rowSeed is the request seed that samples as Generate's lone row with rng
// PCG(seed, 0).
func rowSeed(seed uint64) uint64 { return model.RowSeeds(rand.New(rand.NewPCG(seed, 0)), 1)[0] }

// logprobs32 reads token_logprobs without nulls.
func logprobs32(t *testing.T, lp []*float32) []float32 {
	t.Helper()
	out := make([]float32, len(lp))
	for i, v := range lp {
		if v == nil {
			t.Fatalf("token_logprobs[%d] is null", i)
		}
		out[i] = *v
	}
	return out
}

// A request with seed RowSeeds(rng, 1)[0] gets exactly the tokens and
// log-probs in-process Generate gives with rng, for every sampling setting;
// choice k of n samples from SeedStream(seed, k).
func TestSeedsMatchGenerate(t *testing.T) {
	f := newFixture(t, nil)
	ids := f.prompt("12+7=")
	for _, tc := range []struct {
		name string
		opt  model.SampleOptions
		req  map[string]any
	}{
		{"temperature 1", model.SampleOptions{MaxNewTokens: 20, Temperature: 1}, map[string]any{}},
		{"top_k top_p", model.SampleOptions{MaxNewTokens: 20, Temperature: 0.8, TopK: 5, TopP: 0.9}, map[string]any{"temperature": 0.8, "top_k": 5, "top_p": 0.9}},
		{"hot", model.SampleOptions{MaxNewTokens: 30, Temperature: 1.7}, map[string]any{"temperature": 1.7}},
		{"greedy", model.SampleOptions{MaxNewTokens: 15, Greedy: true}, map[string]any{"temperature": 0}},
	} {
		for _, seed := range []uint64{1, 42} {
			want := f.generate(f.m, ids, tc.opt, seed)
			req := map[string]any{"model": "tiny", "prompt": ids, "max_tokens": tc.opt.MaxNewTokens, "seed": rowSeed(seed),
				"logprobs": 0, "return_token_ids": true}
			for k, v := range tc.req {
				req[k] = v
			}
			var got completion
			f.post("/v1/completions", req, &got)
			c := got.Choices[0]
			if !slices.Equal(c.TokenIDs, want.Tokens) || !slices.Equal(logprobs32(t, c.Logprobs.TokenLogprobs), want.LogProbs) {
				t.Errorf("%s seed %d: served %v %v, Generate %v %v", tc.name, seed, c.TokenIDs, c.Logprobs.TokenLogprobs, want.Tokens, want.LogProbs)
			}
			wantFinish := map[bool]string{true: "stop", false: "length"}[want.Stopped]
			body := want.Tokens
			if want.Stopped {
				body = body[:len(body)-1]
			}
			if c.FinishReason != wantFinish || c.Text != f.tok.Decode(body) || !slices.Equal(c.PromptTokenIDs, ids) {
				t.Errorf("%s seed %d: finish %q text %q prompt ids %v, want %q %q %v", tc.name, seed, c.FinishReason, c.Text, c.PromptTokenIDs, wantFinish, f.tok.Decode(body), ids)
			}
		}
	}
	// Choice k of n: SeedStream(seed, k), as a lone Batch sequence.
	var got completion
	f.post("/v1/completions", map[string]any{"prompt": ids, "max_tokens": 20, "n": 3, "seed": 5, "return_token_ids": true}, &got)
	if len(got.Choices) != 3 {
		t.Fatalf("n 3: %d choices", len(got.Choices))
	}
	for k, c := range got.Choices {
		b, err := f.m.NewBatch(1, f.cfg.MaxContext)
		if err != nil {
			t.Fatal(err)
		}
		opt := model.SampleOptions{MaxNewTokens: 20, Temperature: 1, Stop: f.cfg.Sampling.Stop, Vocab: f.cfg.Sampling.Vocab}
		if _, err := b.Add(ids, opt, model.SeedStream(5, k)); err != nil {
			t.Fatal(err)
		}
		var want []int
		for b.Len() > 0 {
			toks, err := b.Step(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, toks[0].ID)
		}
		b.Close()
		if c.Index != k || !slices.Equal(c.TokenIDs, want) {
			t.Errorf("choice %d (index %d): %v, SeedStream(5, %d) gives %v", k, c.Index, c.TokenIDs, k, want)
		}
	}
}

// Several prompts (texts or token-id lists) give prompts × n choices, choice
// i of prompt i/n, each prompt counted once in the usage.
func TestSeveralPrompts(t *testing.T) {
	f := newFixture(t, nil)
	a, b := f.prompt("1+2="), f.prompt("30-4=")
	for _, p := range []any{[]string{"1+2=", "30-4="}, [][]int{a, b}} {
		var got completion
		f.post("/v1/completions", map[string]any{"prompt": p, "n": 2, "max_tokens": 6, "seed": 9, "return_token_ids": true}, &got)
		if len(got.Choices) != 4 {
			t.Fatalf("prompt %v: %d choices, want 4", p, len(got.Choices))
		}
		toks := 0
		for i, c := range got.Choices {
			want := [][]int{a, b}[i/2]
			if c.Index != i || !slices.Equal(c.PromptTokenIDs, want) {
				t.Errorf("prompt %v choice %d: index %d prompt %v, want %v", p, i, c.Index, c.PromptTokenIDs, want)
			}
			toks += len(c.TokenIDs)
		}
		if got.Usage.PromptTokens != len(a)+len(b) || got.Usage.CompletionTokens != toks {
			t.Errorf("prompt %v: usage %+v, want %d prompt and %d completion tokens", p, got.Usage, len(a)+len(b), toks)
		}
	}
}

// Requests that arrive together share decoding steps, and each gets what
// it gets alone.
func TestConcurrentRequestsDecodeTogether(t *testing.T) {
	var want atomic.Int32
	want.Store(1)
	f := newFixture(t, func(c *Config) {
		c.MaxBatch = 4 // fewer rows than sequences: some wait for a row
		c.hooks = func(s *scheduler) { s.admitWhen = func(n int) bool { return n >= int(want.Load()) } }
	})
	var reqs []map[string]any
	for i := range 6 {
		r := map[string]any{"prompt": fmt.Sprintf("%d+%d=", i, 2*i), "max_tokens": 10 + 3*i, "seed": i, "return_token_ids": true,
			"temperature": 0.5 + 0.2*float64(i), "logprobs": 1}
		if i == 2 {
			r["n"] = 2
		}
		if i == 4 {
			r["temperature"] = 0
		}
		reqs = append(reqs, r)
	}
	alone := make([]completion, len(reqs))
	for i, r := range reqs {
		f.post("/v1/completions", r, &alone[i])
	}
	before := f.srv.Stats()
	want.Store(int32(len(reqs)))
	together := make([]completion, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			if err := f.tryPost("/v1/completions", r, &together[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	after := f.srv.Stats()
	// The first step fills the 4 rows, and no request has more than 2 choices.
	if after.SharedSteps-before.SharedSteps == 0 || after.MaxRequests < 3 {
		t.Errorf("concurrent requests: %d shared steps, at most %d requests in a step; want them decoded together", after.SharedSteps-before.SharedSteps, after.MaxRequests)
	}
	for i := range reqs {
		if !reflect.DeepEqual(alone[i].Choices, together[i].Choices) {
			t.Errorf("request %d: together %+v, alone %+v", i, together[i].Choices, alone[i].Choices)
		}
	}
}

// Streamed chunks add up to the response a plain request gets, for both
// endpoints, with usage and [DONE] last.
func TestStreaming(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/completions", map[string]any{"prompt": "3+4=", "max_tokens": 25, "seed": 3, "n": 2, "logprobs": 2, "return_token_ids": true}},
		{"/v1/completions", map[string]any{"prompt": "3+4=", "max_tokens": 25, "seed": 3, "echo": true}},
		{"/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": "3+4?"}}, "max_tokens": 25, "seed": 8, "n": 2, "logprobs": true, "top_logprobs": 2}},
	} {
		plain, _ := json.Marshal(tc.body)
		status, whole := f.do(http.MethodPost, tc.path, string(plain))
		if status != 200 {
			t.Fatalf("%s: %d %s", tc.path, status, whole)
		}
		tc.body["stream"] = true
		tc.body["stream_options"] = map[string]any{"include_usage": true}
		streamed, _ := json.Marshal(tc.body)
		status, data := f.do(http.MethodPost, tc.path, string(streamed))
		if status != 200 {
			t.Fatalf("%s stream: %d %s", tc.path, status, data)
		}
		chunks := sseEvents(t, data)
		if chunks[len(chunks)-1] != "[DONE]" {
			t.Fatalf("%s: last event %q, want [DONE]", tc.path, chunks[len(chunks)-1])
		}
		texts, finish, tokens := map[int]string{}, map[int]string{}, map[int][]string{}
		var use usage
		for _, c := range chunks[:len(chunks)-1] {
			var ch struct {
				Object  string `json:"object"`
				Choices []struct {
					Index int                      `json:"index"`
					Text  string                   `json:"text"`
					Delta struct{ Content string } `json:"delta"`
					Fin   *string                  `json:"finish_reason"`
					LP    *struct {
						Tokens  []string      `json:"tokens"`
						Content []chatLogprob `json:"content"`
					} `json:"logprobs"`
				} `json:"choices"`
				Usage *usage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(c), &ch); err != nil {
				t.Fatalf("%s: chunk %q: %v", tc.path, c, err)
			}
			if !strings.HasSuffix(ch.Object, "chunk") && ch.Object != "text_completion" {
				t.Errorf("%s: chunk object %q", tc.path, ch.Object)
			}
			if ch.Usage != nil {
				use = *ch.Usage
			}
			for _, x := range ch.Choices {
				texts[x.Index] += x.Text + x.Delta.Content
				if x.Fin != nil {
					finish[x.Index] = *x.Fin
				}
				if x.LP != nil {
					tokens[x.Index] = append(tokens[x.Index], x.LP.Tokens...)
					for _, e := range x.LP.Content {
						tokens[x.Index] = append(tokens[x.Index], e.Token)
					}
				}
			}
		}
		if strings.Contains(tc.path, "chat") {
			var w chatCompletion
			json.Unmarshal(whole, &w) //nolint:errcheck
			for i, c := range w.Choices {
				var wt []string
				for _, e := range c.Logprobs.Content {
					wt = append(wt, e.Token)
				}
				if texts[i] != c.Message.Content || finish[i] != c.FinishReason || !slices.Equal(tokens[i], wt) {
					t.Errorf("chat choice %d: streamed %q %q %q, whole %q %q %q", i, texts[i], finish[i], tokens[i], c.Message.Content, c.FinishReason, wt)
				}
			}
			if use != w.Usage {
				t.Errorf("chat: streamed usage %+v, whole %+v", use, w.Usage)
			}
			continue
		}
		var w completion
		json.Unmarshal(whole, &w) //nolint:errcheck
		for i, c := range w.Choices {
			var wt []string
			if c.Logprobs != nil {
				wt = c.Logprobs.Tokens
			}
			if texts[i] != c.Text || finish[i] != c.FinishReason || !slices.Equal(tokens[i], wt) {
				t.Errorf("completion choice %d: streamed %q %q %q, whole %q %q %q", i, texts[i], finish[i], tokens[i], c.Text, c.FinishReason, wt)
			}
		}
		if use != w.Usage || use.TotalTokens != use.PromptTokens+use.CompletionTokens || use.CompletionTokens == 0 {
			t.Errorf("completions: streamed usage %+v, whole %+v", use, w.Usage)
		}
	}
}

// sseEvents splits a server-sent event stream into its data payloads.
func sseEvents(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, "data: "):
			out = append(out, strings.TrimPrefix(line, "data: "))
		default:
			t.Fatalf("not an SSE line: %q", line)
		}
	}
	if len(out) == 0 {
		t.Fatal("no events")
	}
	return out
}

// A stop string cuts the text before it and ends the choice with "stop";
// the tokens end with the one that completed it.
func TestStopStrings(t *testing.T) {
	f := newFixture(t, nil)
	base := map[string]any{"prompt": "5+5=", "max_tokens": 40, "seed": 11, "return_token_ids": true, "ignore_eos": true}
	var full completion
	f.post("/v1/completions", base, &full)
	text := full.Choices[0].Text
	if len([]rune(text)) < 6 {
		t.Fatalf("text %q too short to cut", text)
	}
	stop := string([]rune(text)[3:5])
	cut := text[:strings.Index(text, stop)]
	for _, stream := range []bool{false, true} {
		req := map[string]any{}
		for k, v := range base {
			req[k] = v
		}
		req["stop"] = []string{"never-there", stop}
		if !stream {
			var got completion
			f.post("/v1/completions", req, &got)
			c := got.Choices[0]
			if c.Text != cut || c.FinishReason != "stop" || !slices.Equal(c.TokenIDs, full.Choices[0].TokenIDs[:len(c.TokenIDs)]) ||
				!strings.Contains(f.tok.Decode(c.TokenIDs), stop) || strings.Contains(f.tok.Decode(c.TokenIDs[:len(c.TokenIDs)-1]), stop) {
				t.Errorf("stop %q in %q: text %q finish %q tokens %v (full %v), want %q", stop, text, c.Text, c.FinishReason, c.TokenIDs, full.Choices[0].TokenIDs, cut)
			}
			continue
		}
		req["stream"] = true
		body, _ := json.Marshal(req)
		_, data := f.do(http.MethodPost, "/v1/completions", string(body))
		streamed := ""
		for _, ev := range sseEvents(t, data) {
			var ch completion
			if ev != "[DONE]" && json.Unmarshal([]byte(ev), &ch) == nil && len(ch.Choices) > 0 {
				streamed += ch.Choices[0].Text
			}
		}
		if streamed != cut {
			t.Errorf("streamed with stop %q: %q, want %q", stop, streamed, cut)
		}
	}
}

// Echo with max_tokens 0 scores the prompt (first token null), as
// Model.Score does; echo with generation puts the prompt first.
func TestEchoScoresPrompt(t *testing.T) {
	f := newFixture(t, nil)
	ids := f.prompt("21-4=17")
	sc, err := f.m.Score(context.Background(), []model.Sequence{{Prompt: ids[:1], Response: ids[1:]}}, false)
	if err != nil {
		t.Fatal(err)
	}
	var got completion
	f.post("/v1/completions", map[string]any{"prompt": ids, "max_tokens": 0, "echo": true, "logprobs": 1, "return_tokens_as_token_ids": true}, &got)
	c := got.Choices[0]
	lp := c.Logprobs
	if c.Text != f.tok.Decode(ids) || len(lp.Tokens) != len(ids) || lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil {
		t.Fatalf("echo: %+v", c)
	}
	if !slices.Equal(logprobs32(t, lp.TokenLogprobs[1:]), sc.LogProbs[0]) {
		t.Errorf("echo log-probs %v, Score %v", lp.TokenLogprobs[1:], sc.LogProbs[0])
	}
	for i, tk := range lp.Tokens {
		if tk != fmt.Sprintf("token_id:%d", ids[i]) {
			t.Errorf("token %d: %q, want token_id:%d", i, tk, ids[i])
		}
	}
	if got.Usage.CompletionTokens != 0 || got.Usage.PromptTokens != len(ids) {
		t.Errorf("echo usage %+v", got.Usage)
	}
	var gen completion
	f.post("/v1/completions", map[string]any{"prompt": "9+9=", "max_tokens": 5, "echo": true, "seed": 2, "logprobs": 0}, &gen)
	g := gen.Choices[0]
	if !strings.HasPrefix(g.Text, "9+9=") || len(g.Logprobs.Tokens) != len(f.prompt("9+9="))+gen.Usage.CompletionTokens {
		t.Errorf("echo with generation: %q, %d log-prob tokens", g.Text, len(g.Logprobs.Tokens))
	}
}

// Chat renders the messages with the template, reports the chat log-prob
// shape and the generation's tokens.
func TestChat(t *testing.T) {
	f := newFixture(t, nil)
	msgs := []tokenizer.Message{{Role: "system", Content: "Add."}, {Role: "user", Content: "2+2?"}}
	ids, err := f.tmpl.PromptMessages(f.tok, msgs, true)
	if err != nil {
		t.Fatal(err)
	}
	want := f.generate(f.m, ids, model.SampleOptions{MaxNewTokens: 12, Temperature: 1}, 9)
	var got chatCompletion
	f.post("/v1/chat/completions", map[string]any{"model": "tiny", "messages": []any{
		map[string]any{"role": "system", "content": "Add."},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "2+"}, map[string]any{"type": "text", "text": "2?"}}},
	}, "max_completion_tokens": 12, "seed": rowSeed(9), "logprobs": true, "top_logprobs": 3, "return_token_ids": true}, &got)
	c := got.Choices[0]
	if got.Object != "chat.completion" || c.Message.Role != "assistant" || !slices.Equal(got.PromptTokenIDs, ids) || !slices.Equal(c.TokenIDs, want.Tokens) {
		t.Fatalf("chat: %+v; want prompt %v tokens %v", got, ids, want.Tokens)
	}
	for i, e := range c.Logprobs.Content {
		if e.Logprob != want.LogProbs[i] || len(e.TopLogprobs) != 3 || string(intsToBytes(e.Bytes)) != e.Token {
			t.Errorf("token %d: %+v, want log-prob %v and 3 top", i, e, want.LogProbs[i])
		}
		for j := 1; j < len(e.TopLogprobs); j++ {
			if e.TopLogprobs[j].Logprob > e.TopLogprobs[j-1].Logprob {
				t.Errorf("token %d: top log-probs out of order %+v", i, e.TopLogprobs)
			}
		}
	}
	if got.Usage.PromptTokens != len(ids) || got.Usage.CompletionTokens != len(want.Tokens) {
		t.Errorf("usage %+v", got.Usage)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func intsToBytes(v []int) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

// Every bad request gets its 4xx in OpenAI's error shape, naming the field.
func TestErrors(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxBodyBytes = 2000; c.MaxN = 4 })
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		method, path, body string
		status             int
		param              string
	}{
		{"POST", "/v1/completions", `{"prompt":"1+1=",`, 400, ""},
		{"POST", "/v1/completions", `[1,2]`, 400, ""},
		{"POST", "/v1/completions", ``, 400, ""},
		{"POST", "/v1/completions", `{"max_tokens":3}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":[]}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":[1,"a"]}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":[1,99999]}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":[-1]}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":[1,null]}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":[[1],[2,null]]}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":[[1],null]}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":["1+1=",null]}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":"x","max_tokens":9223372036854775807}`, 400, "max_tokens"},
		{"POST", "/v1/completions", `{"prompt":"x","seed":"abc"}`, 400, "seed"},
		{"POST", "/v1/completions", `{"prompt":"x","seed":true}`, 400, "seed"},
		{"POST", "/v1/completions", `{"prompt":"x","max_tokens":-1}`, 400, "max_tokens"},
		{"POST", "/v1/completions", `{"prompt":"x","max_tokens":0}`, 400, "max_tokens"},
		{"POST", "/v1/completions", `{"prompt":"x","max_tokens":1000000}`, 400, "max_tokens"},
		{"POST", "/v1/completions", `{"prompt":"x","max_tokens":"5"}`, 400, "max_tokens"},
		{"POST", "/v1/completions", `{"prompt":"x","temperature":-0.5}`, 400, "temperature"},
		{"POST", "/v1/completions", `{"prompt":"x","temperature":1e9}`, 400, "temperature"},
		{"POST", "/v1/completions", `{"prompt":"x","top_p":0}`, 400, "top_p"},
		{"POST", "/v1/completions", `{"prompt":"x","top_p":1.5}`, 400, "top_p"},
		{"POST", "/v1/completions", `{"prompt":"x","top_k":-2}`, 400, "top_k"},
		{"POST", "/v1/completions", `{"prompt":"x","n":0}`, 400, "n"},
		{"POST", "/v1/completions", `{"prompt":"x","n":5}`, 400, "n"},
		{"POST", "/v1/completions", `{"prompt":["a","b","c"],"n":2}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":"x","logprobs":21}`, 400, "logprobs"},
		{"POST", "/v1/completions", `{"prompt":"x","logprobs":-1}`, 400, "logprobs"},
		{"POST", "/v1/completions", `{"prompt":"x","stop":[""]}`, 400, "stop"},
		{"POST", "/v1/completions", `{"prompt":"x","stop":5}`, 400, "stop"},
		{"POST", "/v1/completions", `{"prompt":"x","stop_token_ids":[100000]}`, 400, "stop_token_ids"},
		{"POST", "/v1/completions", `{"prompt":"x","seed":1.5}`, 400, "seed"},
		{"POST", "/v1/completions", `{"prompt":"x","stream_options":{"include_usage":true}}`, 400, "stream_options"},
		{"POST", "/v1/completions", `{"prompt":"x","model":"gpt-4"}`, 404, "model"},
		{"POST", "/v1/completions", `{"prompt":"` + strings.Repeat("1+", 40) + `"}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":"` + strings.Repeat("1+", 40) + `","max_tokens":2}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":` + jsonOf(slices.Repeat([]int{5}, 64)) + `,"max_tokens":1}`, 400, "prompt"},
		{"POST", "/v1/completions", `{"prompt":[5,5],"max_tokens":63}`, 400, "max_tokens"},
		{"POST", "/v1/completions", `{"prompt":"` + strings.Repeat("x", 3000) + `"}`, 413, ""},
		{"POST", "/v1/completions", `{"prompt":"x","frequency_penalty":0.5}`, 400, "frequency_penalty"},
		{"POST", "/v1/completions", `{"prompt":"x","logit_bias":{"5":-100}}`, 400, "logit_bias"},
		{"POST", "/v1/completions", `{"prompt":"x","best_of":3}`, 400, "best_of"},
		{"POST", "/v1/chat/completions", `{"messages":[]}`, 400, "messages"},
		{"POST", "/v1/chat/completions", `{"messages":[{"content":"hi"}]}`, 400, "messages[0].role"},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "messages[0].content"},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"tool","content":"x"}]}`, 400, "messages"},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"top_logprobs":2}`, 400, "top_logprobs"},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"logprobs":true,"top_logprobs":50}`, 400, "top_logprobs"},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"max_tokens":0}`, 400, "max_tokens"},
		{"POST", "/v1/chat/completions", `{` + msgs + `,"chat_template_kwargs":{"x":1}}`, 400, "chat_template_kwargs"},
		{"GET", "/v1/completions", ``, 405, ""},
		{"GET", "/v1/nothing", ``, 404, ""},
		{"GET", "/v1/models/other", ``, 404, "model"},
	} {
		status, data := f.do(tc.method, tc.path, tc.body)
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Errorf("%s %s %.80s: not an OpenAI error: %s", tc.method, tc.path, tc.body, data)
			continue
		}
		param := ""
		if e.Error.Param != nil {
			param = *e.Error.Param
		}
		if status != tc.status || param != tc.param {
			t.Errorf("%s %s %.80s: %d param %q (%s), want %d param %q", tc.method, tc.path, tc.body, status, param, e.Error.Message, tc.status, tc.param)
		}
	}
	// Bodies of another encoding get 415; JSON with parameters, no type, or
	// curl's and fetch's defaults are read as JSON.
	for _, tc := range []struct {
		ctype  string
		status int
	}{{"multipart/form-data; boundary=x", 415}, {"application/xml", 415}, {"application/octet-stream", 415}, {"json", 415},
		{"application/json; charset=utf-8", 200}, {"application/vnd.api+json", 200}, {"", 200},
		{"application/x-www-form-urlencoded", 200}, {"text/plain;charset=UTF-8", 200}} {
		var header []string
		if tc.ctype != "" {
			header = []string{"Content-Type", tc.ctype}
		}
		status, data := f.do("POST", "/v1/completions", `{"prompt":"1+1=","max_tokens":2}`, header...)
		if status != tc.status || status == 415 && !strings.Contains(string(data), "application/json") {
			t.Errorf("Content-Type %q: %d %s, want %d", tc.ctype, status, data, tc.status)
		}
	}
	// A prompt filling the context can be scored.
	var scored completion
	f.post("/v1/completions", map[string]any{"prompt": slices.Repeat([]int{5}, 64), "max_tokens": 0, "echo": true, "logprobs": 0}, &scored)
	if n := len(scored.Choices[0].Logprobs.Tokens); n != 64 {
		t.Errorf("scoring a prompt of the whole context: %d tokens", n)
	}
	// Unknown fields are ignored; the server still answers.
	var ok completion
	f.post("/v1/completions", map[string]any{"prompt": "1+1=", "max_tokens": 2, "frobnicate": map[string]any{"x": 1}, "user": "u",
		"presence_penalty": 0, "frequency_penalty": 0, "best_of": 1}, &ok)
	if len(ok.Choices) != 1 || ok.Object != "text_completion" || ok.Model != "tiny" {
		t.Errorf("with unknown fields: %+v", ok)
	}
}

// With an API key every route needs the bearer token.
func TestAPIKey(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.APIKey = "sekrit" })
	for _, route := range []struct{ method, path, body string }{
		{"GET", "/v1/models", ""}, {"GET", "/health", ""}, {"GET", "/get_weight_version", ""},
		{"POST", "/v1/completions", `{"prompt":"1","max_tokens":1}`},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"1"}],"max_tokens":1}`},
		{"POST", "/update_weights_from_disk", `{}`}, {"GET", "/nowhere", ""},
	} {
		for _, tc := range []struct {
			header []string
			ok     bool
		}{
			{nil, false},
			{[]string{"Authorization", "Bearer wrong"}, false},
			{[]string{"Authorization", "sekrit"}, false},
			{[]string{"Authorization", "Bearer sekrit"}, true},
		} {
			status, data := f.do(route.method, route.path, route.body, tc.header...)
			if (status == http.StatusUnauthorized) == tc.ok {
				t.Errorf("%s %s with %v: %d %s", route.method, route.path, tc.header, status, data)
			}
		}
	}
}

// More requests than the concurrency bound get 429, and the server answers
// again once they finish.
func TestConcurrencyBound(t *testing.T) {
	release := make(chan struct{})
	f := newFixture(t, func(c *Config) {
		c.MaxConcurrent = 2
		c.hooks = func(s *scheduler) {
			s.beforeStep = func() { <-release }
		}
	})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			var c completion
			if err := f.tryPost("/v1/completions", map[string]any{"prompt": "1+1=", "max_tokens": 3}, &c); err != nil {
				t.Error(err)
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(f.srv.slots) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	status, data := f.do("POST", "/v1/completions", `{"prompt":"1+1=","max_tokens":3}`)
	if status != http.StatusTooManyRequests || !strings.Contains(string(data), "rate_limit") {
		t.Errorf("over the bound: %d %s, want 429", status, data)
	}
	close(release)
	wg.Wait()
	if status, data := f.do("POST", "/v1/completions", `{"prompt":"1+1=","max_tokens":3}`); status != 200 {
		t.Errorf("after the bound freed: %d %s", status, data)
	}
}

// A client that disconnects mid-stream frees its row: its sequence leaves
// the batch, and the goroutines return to their number before.
func TestDisconnectFreesSlot(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.hooks = func(s *scheduler) { s.beforeStep = func() { time.Sleep(5 * time.Millisecond) } }
	})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var c completion
	f.post("/v1/completions", map[string]any{"prompt": "1", "max_tokens": 1}, &c) // warm up the server's goroutines
	runtime.GC()
	baseline := runtime.NumGoroutine()
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		body := `{"prompt":"1+1=","max_tokens":55,"ignore_eos":true,"stream":true,"seed":` + fmt.Sprint(i) + `}`
		req, _ := http.NewRequestWithContext(ctx, "POST", f.url+"/v1/completions", strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		if _, err := r.ReadString('\n'); err != nil { // the first chunk: decoding has begun
			t.Fatal(err)
		}
		cancel()
		resp.Body.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := f.srv.Stats()
		n := runtime.NumGoroutine()
		if st.Live == 0 && st.Cancelled == 3 && st.InFlight == 0 && n <= baseline {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("after 3 disconnects: %+v, %d goroutines (baseline %d)\n%s", st, n, baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status, _ := f.do("POST", "/v1/completions", `{"prompt":"1+1=","max_tokens":3}`); status != 200 {
		t.Errorf("after disconnects: %d", status)
	}
}

// A weight update under traffic drops nothing: every response is the old
// or the new weights' tokens for its seed, as its weight_version says, and
// responses after the update are the new weights'. An update to another
// architecture fails and changes nothing.
func TestUpdateWeightsUnderTraffic(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.hooks = func(s *scheduler) { s.beforeStep = func() { time.Sleep(200 * time.Microsecond) } }
	})
	newM, err := model.New(testBackend(t), f.m.Config(), 77)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := newM.Save(dir); err != nil {
		t.Fatal(err)
	}
	loaded, err := model.Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := f.prompt("4+4=")
	opt := model.SampleOptions{MaxNewTokens: 20, Temperature: 1}
	want := map[string]map[uint64][]int{"0": {}, "7": {}}
	for seed := range uint64(8) {
		want["0"][seed] = f.generate(f.m, ids, opt, seed).Tokens
		want["7"][seed] = f.generate(loaded, ids, opt, seed).Tokens
	}

	var st, data = f.do("POST", "/update_weights_from_disk", `{"model_path":"`+filepath.Join("..", "examples", "agents", "gpt-char")+`"}`)
	var rep struct {
		Success bool   `json:"success"`
		Message string `json:"message"`
		Paused  *int   `json:"num_paused_requests"`
	}
	if json.Unmarshal(data, &rep) != nil || st != 400 || rep.Success || !strings.Contains(rep.Message, "architecture") || rep.Paused == nil {
		t.Fatalf("update to another architecture: %d %s", st, data)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				seed := uint64((w + i) % 8)
				var c completion
				if err := f.tryPost("/v1/completions", map[string]any{"prompt": ids, "max_tokens": 20, "seed": rowSeed(seed), "return_token_ids": true}, &c); err != nil {
					t.Error(err) // a dropped request
					return
				}
				if w := want[c.WeightVersion]; w == nil || !slices.Equal(c.Choices[0].TokenIDs, w[seed]) {
					t.Errorf("weight version %q seed %d: %v, want %v", c.WeightVersion, seed, c.Choices[0].TokenIDs, w[seed])
				}
				mu.Lock()
				seen[c.WeightVersion]++
				mu.Unlock()
			}
		})
	}
	// waitSeen waits until n responses of version v came back.
	waitSeen := func(v string, n int) {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			k := seen[v]
			mu.Unlock()
			if k >= n {
				return
			}
		}
		t.Errorf("no %d responses of version %s in 30 s", n, v)
	}
	waitSeen("0", 8)
	st, data = f.do("POST", "/update_weights_from_disk", `{"model_path":"`+dir+`","weight_version":"7"}`)
	if json.Unmarshal(data, &rep) != nil || st != 200 || !rep.Success {
		t.Fatalf("update: %d %s", st, data)
	}
	waitSeen("7", 8)
	close(stop)
	wg.Wait()
	if seen["0"] == 0 || seen["7"] == 0 {
		t.Errorf("responses by weight version %v: want some on each", seen)
	}
	var v struct {
		WeightVersion string `json:"weight_version"`
	}
	_, data = f.do("GET", "/get_weight_version", "")
	if json.Unmarshal(data, &v) != nil || v.WeightVersion != "7" {
		t.Errorf("/get_weight_version after the update: %s", data)
	}
	var c completion
	f.post("/v1/completions", map[string]any{"prompt": ids, "max_tokens": 20, "seed": rowSeed(3), "return_token_ids": true}, &c)
	if c.WeightVersion != "7" || !slices.Equal(c.Choices[0].TokenIDs, want["7"][3]) {
		t.Errorf("after the update: version %q tokens %v, want 7 %v", c.WeightVersion, c.Choices[0].TokenIDs, want["7"][3])
	}
	// Without weight_version an integer version counts up.
	if st, data := f.do("POST", "/update_weights_from_disk", `{"model_path":"`+dir+`"}`); st != 200 || f.srv.WeightVersion() != "8" {
		t.Errorf("update without a version: %d %s, version %q", st, data, f.srv.WeightVersion())
	}
	if f.srv.Stats().Swaps != 2 {
		t.Errorf("%d swaps, want 2", f.srv.Stats().Swaps)
	}
}

// The informational routes.
func TestInfoRoutes(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.WeightVersion = "step-3" })
	for _, tc := range []struct{ path, want string }{
		{"/v1/models", `"id":"tiny"`},
		{"/v1/models/tiny", `"object":"model"`},
		{"/health", `"status":"ok"`},
		{"/get_weight_version", `"weight_version":"step-3"`},
	} {
		status, data := f.do("GET", tc.path, "")
		if status != 200 || !strings.Contains(string(data), tc.want) {
			t.Errorf("GET %s: %d %s, want %s", tc.path, status, data, tc.want)
		}
	}
}

// A panicking handler gets a 500, a panic in a decoding step fails the
// requests in the batch, and the server keeps serving.
func TestPanicRecovered(t *testing.T) {
	var boom atomic.Bool
	f := newFixture(t, func(c *Config) {
		c.hooks = func(s *scheduler) {
			s.beforeStep = func() {
				if boom.CompareAndSwap(true, false) {
					panic("step boom")
				}
			}
		}
	})
	boom.Store(true)
	if status, data := f.do("POST", "/v1/completions", `{"prompt":"1+1=","max_tokens":3}`); status != 500 || !strings.Contains(string(data), "step boom") {
		t.Errorf("a request whose step panicked: %d %s, want 500", status, data)
	}
	var c completion
	f.post("/v1/completions", map[string]any{"prompt": "1+1=", "max_tokens": 3}, &c)
	h := f.srv.recoverPanics(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "server_error") {
		t.Errorf("panic: %d %s", rec.Code, rec.Body)
	}
	if status, _ := f.do("GET", "/health", ""); status != 200 {
		t.Errorf("after a panic: %d", status)
	}
}
