// Package serverstandin is an inference server for tests: it answers the
// requests a rollout engine sends to vLLM, SGLang or hacrl serve, in their
// shapes, sampling with a real model (one model.Batch per request, request
// seed s giving the stream model.SeedStream(s, 0)), and reloads weights from
// disk as each server does. vLLM and SGLang cannot run here; hacrl serve is
// another package's job. Faults (error statuses, malformed answers, delays,
// dropped connections, stale weights) are injected through its fields.
package serverstandin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/model"
)

// Call is one weight call the server received, in order.
type Call struct {
	Path      string // /update_weights_from_disk, /collective_rpc or /reset_prefix_cache
	ModelPath string // the directory loaded (for vLLM: the path it resolved to)
	Version   string // the weight_version asked for ("" for vLLM)
}

// Server stands in for one inference server.
type Server struct {
	Dialect string // vllm, sglang or hacrl
	// ModelPath is the path vLLM reloads from (collective_rpc reload_weights).
	ModelPath string
	// Vocab limits sampling to ids below it, as a server does with its
	// tokenizer's size; 0 means every id.
	Vocab   int
	Backend compute.Backend

	// Fault injection, read at each sampling request (n counts them from 1):
	// Answer, when it returns ok, replaces the answer with status and body;
	// Rewrite alters a well-formed answer before it is sent; Delay holds
	// each answer back; Drop closes the connection of the first Drop
	// requests without an answer.
	Answer  func(n int) (status int, body string, ok bool)
	Rewrite func(n int, answer map[string]any)
	Delay   time.Duration
	Drop    int
	// Stale makes the first Stale sampling answers after each reload
	// report the version before it (a server still switching).
	Stale int

	mu       sync.RWMutex
	m        *model.Model
	version  string
	previous string
	sinceNew int // sampling answers since the last reload

	log      sync.Mutex
	calls    []Call
	requests int
}

// New returns a server sampling with m.
func New(dialect string, m *model.Model, b compute.Backend) *Server {
	return &Server{Dialect: dialect, m: m, Backend: b, version: "initial"}
}

// Calls returns the weight calls received so far.
func (s *Server) Calls() []Call {
	s.log.Lock()
	defer s.log.Unlock()
	return append([]Call(nil), s.calls...)
}

// Requests is how many sampling requests arrived.
func (s *Server) Requests() int {
	s.log.Lock()
	defer s.log.Unlock()
	return s.requests
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch r.URL.Path {
	case "/v1/completions", "/generate":
		s.sample(w, r, body)
	case "/update_weights_from_disk":
		var req struct {
			ModelPath     string `json:"model_path"`
			WeightVersion string `json:"weight_version"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.record(Call{Path: r.URL.Path, ModelPath: req.ModelPath, Version: req.WeightVersion})
		if err := s.reload(req.ModelPath, req.WeightVersion); err != nil {
			writeJSON(w, map[string]any{"success": false, "message": err.Error(), "num_paused_requests": 0})
			return
		}
		writeJSON(w, map[string]any{"success": true, "message": "Succeeded to update model weights.", "num_paused_requests": 0})
	case "/collective_rpc":
		var req struct {
			Method string `json:"method"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Method != "reload_weights" {
			http.Error(w, fmt.Sprintf("unsupported method %q", req.Method), http.StatusBadRequest)
			return
		}
		resolved, err := filepath.EvalSymlinks(s.ModelPath)
		if err == nil {
			err = s.reload(s.ModelPath, "")
		}
		s.record(Call{Path: r.URL.Path, ModelPath: resolved})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, map[string]any{"results": []any{nil}})
	case "/reset_prefix_cache":
		s.record(Call{Path: r.URL.Path})
		w.WriteHeader(http.StatusOK)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) record(c Call) {
	s.log.Lock()
	s.calls = append(s.calls, c)
	s.log.Unlock()
}

// reload loads the model of dir.
func (s *Server) reload(dir, version string) error {
	m, err := model.Load(s.Backend, dir)
	if err != nil {
		return err
	}
	m.SetEngine(model.EngineNative)
	s.mu.Lock()
	s.m, s.previous, s.version, s.sinceNew = m, s.version, version, 0
	s.mu.Unlock()
	return nil
}

// request is what the server reads of either sampling request.
type request struct {
	Prompt         []int   `json:"prompt"`    // completions
	InputIDs       []int   `json:"input_ids"` // SGLang
	MaxTokens      int     `json:"max_tokens"`
	Temperature    float64 `json:"temperature"`
	TopP           float64 `json:"top_p"`
	TopK           int     `json:"top_k"`
	Seed           *uint64 `json:"seed"`
	StopTokenIDs   []int   `json:"stop_token_ids"`
	SamplingParams *struct {
		MaxNewTokens int     `json:"max_new_tokens"`
		Temperature  float64 `json:"temperature"`
		TopP         float64 `json:"top_p"`
		TopK         int     `json:"top_k"`
		StopTokenIDs []int   `json:"stop_token_ids"`
	} `json:"sampling_params"`
}

func (s *Server) sample(w http.ResponseWriter, r *http.Request, body []byte) {
	s.log.Lock()
	s.requests++
	n := s.requests
	s.log.Unlock()
	if n <= s.Drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
	}
	if s.Delay > 0 {
		select {
		case <-time.After(s.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if s.Answer != nil {
		if status, text, ok := s.Answer(n); ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, text)
			return
		}
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	prompt, opt := req.Prompt, model.SampleOptions{MaxNewTokens: req.MaxTokens, Temperature: req.Temperature,
		TopP: req.TopP, TopK: max(req.TopK, 0), Stop: req.StopTokenIDs, Vocab: s.Vocab}
	if p := req.SamplingParams; p != nil {
		prompt, opt = req.InputIDs, model.SampleOptions{MaxNewTokens: p.MaxNewTokens, Temperature: p.Temperature,
			TopP: p.TopP, TopK: max(p.TopK, 0), Stop: p.StopTokenIDs, Vocab: s.Vocab}
	}
	var seed uint64
	if req.Seed != nil {
		seed = *req.Seed
	}
	s.mu.Lock()
	m, version := s.m, s.version
	if s.sinceNew < s.Stale {
		version = s.previous
	}
	s.sinceNew++
	s.mu.Unlock()
	sm, err := generate(r.Context(), m, prompt, opt, model.SeedStream(seed, 0))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	answer := s.answer(sm, version)
	if s.Rewrite != nil {
		s.Rewrite(n, answer)
	}
	writeJSON(w, answer)
}

// generate samples one continuation of prompt from rng in a Batch of one.
func generate(ctx context.Context, m *model.Model, prompt []int, opt model.SampleOptions, rng *rand.Rand) (model.Sample, error) {
	b, err := m.NewBatch(1, min(m.Config().MaxSeq, len(prompt)+opt.MaxNewTokens))
	if err != nil {
		return model.Sample{}, err
	}
	defer b.Close()
	if _, err := b.Add(prompt, opt, rng); err != nil {
		return model.Sample{}, err
	}
	var out model.Sample
	for b.Len() > 0 {
		tokens, err := b.Step(ctx)
		if err != nil {
			return model.Sample{}, err
		}
		for _, t := range tokens {
			out.Tokens = append(out.Tokens, t.ID)
			out.LogProbs = append(out.LogProbs, t.LogProb)
			out.Stopped = t.Stopped
		}
	}
	return out, nil
}

// answer is the dialect's answer for one sample, as a JSON object.
func (s *Server) answer(sm model.Sample, version string) map[string]any {
	finish := "length"
	if sm.Stopped {
		finish = "stop"
	}
	lps := make([]any, len(sm.LogProbs))
	for i, lp := range sm.LogProbs {
		lps[i] = float64(lp)
	}
	ids := make([]any, len(sm.Tokens))
	for i, id := range sm.Tokens {
		ids[i] = id
	}
	if s.Dialect == "sglang" {
		entries := make([]any, len(sm.Tokens))
		for i := range sm.Tokens {
			entries[i] = []any{lps[i], ids[i], nil}
		}
		reason := map[string]any{"type": finish}
		if sm.Stopped {
			reason["matched"] = sm.Tokens[len(sm.Tokens)-1]
		} else {
			reason["length"] = len(sm.Tokens)
		}
		return map[string]any{"text": "", "output_ids": ids, "meta_info": map[string]any{
			"id": "standin", "finish_reason": reason, "prompt_tokens": 0, "completion_tokens": len(sm.Tokens),
			"output_token_logprobs": entries, "weight_version": version,
		}}
	}
	tokens := make([]any, len(sm.Tokens))
	for i, id := range sm.Tokens {
		tokens[i] = fmt.Sprintf("token_id:%d", id)
	}
	out := map[string]any{"id": "cmpl-standin", "object": "text_completion", "model": "standin", "choices": []any{map[string]any{
		"index": 0, "text": "", "token_ids": ids, "finish_reason": finish,
		"logprobs": map[string]any{"tokens": tokens, "token_logprobs": lps, "top_logprobs": nil, "text_offset": []any{}},
	}}, "usage": map[string]any{"completion_tokens": len(sm.Tokens)}}
	if s.Dialect == "hacrl" {
		out["weight_version"] = version
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
