package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
)

// fuzzRoutes are the routes a fuzzed body is posted to, by the input's
// route byte.
var fuzzRoutes = []string{"/v1/completions", "/v1/chat/completions"}

// FuzzRequestBody posts any body to the real handler serving the tiny
// llama-bpe agent (64 positions, n at most 4). The answer is a 2xx or a
// 4xx, never a 5xx; a 4xx is JSON in OpenAI's error shape with a message
// and a type; a 2xx is a completion object whose choices each end for a
// reason, or a stream of JSON events without an error that ends with
// [DONE]; and the server stays healthy. The seeds are the recorded
// requests of the load test (loadCases) and bodies from TestErrors.
func FuzzRequestBody(f *testing.F) {
	for _, c := range loadCases() {
		if c.method != "POST" || c.ctype != "application/json" || len(c.body) > 2000 {
			continue
		}
		for i, r := range fuzzRoutes {
			if r == c.path {
				f.Add(uint8(i), []byte(c.body))
			}
		}
	}
	for _, body := range []string{`{"prompt":[[1],[2,null]]}`, `{"prompt":["a","b","c"],"n":2}`, `{"prompt":"x","stop":[""]}`,
		`{"prompt":"x","stop_token_ids":[100000]}`, `{"prompt":"x","stream_options":{"include_usage":true}}`,
		`{"prompt":[5,5],"max_tokens":63}`, `{"prompt":"1+1=","max_tokens":2,"echo":true,"logprobs":3,"stream":true}`} {
		f.Add(uint8(0), []byte(body))
	}
	for _, body := range []string{`{"messages":[{"role":"user","content":[{"type":"text","text":"2+2?"}]}],"max_tokens":3}`,
		`{"messages":[{"role":"assistant","content":"4"},{"role":"user","content":"hi"}],"chat_template_kwargs":{"x":1}}`} {
		f.Add(uint8(1), []byte(body))
	}

	m, err := model.Load(testBackend(f), agentDir)
	if err != nil {
		f.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(agentDir, "tokenizer.json"))
	if err != nil {
		f.Fatal(err)
	}
	tmpl := tokenizer.Template{Kind: tokenizer.KindChat}
	srv, err := New(Config{Model: m, Tok: tok, Template: tmpl, Name: "tiny", MaxN: 4, MaxBodyBytes: 4000,
		Sampling: model.SampleOptions{MaxNewTokens: 8, Stop: tmpl.StopTokens(tok), Vocab: tok.VocabSize()},
		Logf:     func(string, ...any) {}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		checkAnswer(t, path, body, w)
		hw := httptest.NewRecorder()
		h.ServeHTTP(hw, httptest.NewRequest("GET", "/health", nil))
		if hw.Code != http.StatusOK {
			t.Fatalf("after POST %s %q: /health answers %d %s", path, body, hw.Code, hw.Body)
		}
	})
}

// checkAnswer checks the answer w to a POST of body to path.
func checkAnswer(t *testing.T, path string, body []byte, w *httptest.ResponseRecorder) {
	t.Helper()
	data := w.Body.Bytes()
	switch {
	case w.Code >= 500 || w.Code < 200 || w.Code >= 300 && w.Code < 400:
		t.Fatalf("POST %s %q: %d %s", path, body, w.Code, data)
	case w.Code >= 400:
		if err := checkError(data, openAIParam(data)); err != nil {
			t.Fatalf("POST %s %q: %d: %v", path, body, w.Code, err)
		}
	case strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream"):
		events := strings.Split(strings.TrimSuffix(string(data), "\n\n"), "\n\n")
		if events[len(events)-1] != "data: [DONE]" {
			t.Fatalf("POST %s %q: a stream that does not end with [DONE]: %q", path, body, data)
		}
		for _, ev := range events[:len(events)-1] {
			var v map[string]any
			js, ok := strings.CutPrefix(ev, "data: ")
			if !ok || json.Unmarshal([]byte(js), &v) != nil {
				t.Fatalf("POST %s %q: event %q is not a JSON object", path, body, ev)
			}
			if v["error"] != nil {
				t.Fatalf("POST %s %q: the stream fails: %s", path, body, js)
			}
		}
	default:
		var v struct {
			Object  string
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal(data, &v); err != nil || v.Object != "text_completion" && v.Object != "chat.completion" || len(v.Choices) == 0 {
			t.Fatalf("POST %s %q: 200 but not a completion: %s", path, body, data)
		}
		for i, c := range v.Choices {
			if c.FinishReason == nil || *c.FinishReason != "stop" && *c.FinishReason != "length" {
				t.Fatalf("POST %s %q: choice %d without a finish reason: %s", path, body, i, data)
			}
		}
	}
}

// openAIParam is the param of an OpenAI error body ("" when none), so that
// checkError checks the shape whatever the param.
func openAIParam(data []byte) string {
	var e struct {
		Error struct {
			Param *string `json:"param"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) != nil || e.Error.Param == nil {
		return ""
	}
	return *e.Error.Param
}
