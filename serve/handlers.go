package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/hacrl/hacrl/tokenizer"
)

// completions is POST /v1/completions.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) error {
	var req completionRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, s.cfg.bodyTimeout, &req); err != nil {
		return err
	}
	p := &params{logprobs: -1}
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > maxLogProbs {
			return invalid("logprobs", "%d, want 0 to %d", *req.Logprobs, maxLogProbs)
		}
		p.logprobs = *req.Logprobs
	}
	bos := req.AddSpecialTokens == nil || *req.AddSpecialTokens
	var err error
	if p.prompts, err = parsePrompt(req.Prompt, s.cfg.Tok, bos); err != nil {
		return err
	}
	if err := s.sampling(req.samplingFields, req.MaxTokens, req.Echo, p); err != nil {
		return err
	}
	release, err := s.acquire()
	if err != nil {
		return err
	}
	defer release()
	out := s.newOutput(w, r, "cmpl-", "text_completion")
	if !p.stream {
		res, err := s.run(r.Context(), p, nil, nil)
		if err != nil {
			return err
		}
		choices := make([]map[string]any, len(res.choices))
		for i, c := range res.choices {
			text := c.text
			if p.echo {
				text = s.promptText(c.prompt) + text
			}
			choices[i] = map[string]any{"index": i, "text": text, "logprobs": s.legacyLogprobs(res, c, 0, true), "finish_reason": c.finish}
			s.tokenIDs(p, c, choices[i], true)
		}
		writeJSON(w, http.StatusOK, out.body(res, choices, res.usage()))
		return nil
	}
	return out.stream(s, p, func(res *result) error {
		if !p.echo {
			return nil
		}
		var cs []map[string]any
		for _, c := range res.choices {
			cs = append(cs, map[string]any{"index": c.index, "text": s.promptText(c.prompt), "logprobs": s.legacyLogprobs(res, c, -1, true), "finish_reason": nil})
		}
		return out.chunk(res, cs, nil)
	}, func(res *result, c *choice) map[string]any {
		text := pending(c, p.stopStrings)
		c.sent += len(text)
		from := c.sentLP
		c.sentLP = len(c.ids)
		m := map[string]any{"index": c.index, "text": text, "logprobs": s.legacyLogprobs(res, c, from, false), "finish_reason": nil}
		if c.finish != "" {
			m["finish_reason"] = c.finish
			s.tokenIDs(p, c, m, true)
		}
		return m
	})
}

// chatCompletions is POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	var req chatRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, s.cfg.bodyTimeout, &req); err != nil {
		return err
	}
	p := &params{logprobs: -1}
	if req.Logprobs != nil && *req.Logprobs {
		p.logprobs = 0
	}
	if k := req.TopLogprobs; k != nil {
		switch {
		case *k < 0 || *k > maxLogProbs:
			return invalid("top_logprobs", "%d, want 0 to %d", *k, maxLogProbs)
		case *k > 0 && p.logprobs < 0:
			return invalid("top_logprobs", "needs logprobs: true")
		}
		p.logprobs = max(p.logprobs, *k)
	}
	msgs, err := parseMessages(req.Messages)
	if err != nil {
		return err
	}
	tmpl := s.cfg.Template
	if len(req.ChatTemplateKwargs) > 0 {
		if tmpl.Kind != tokenizer.KindHF {
			return invalid("chat_template_kwargs", "the served template is %q; only a checkpoint's chat template (hf) takes variables", tmpl.Kind)
		}
		tmpl.Vars = maps.Clone(tmpl.Vars)
		if tmpl.Vars == nil {
			tmpl.Vars = map[string]any{}
		}
		for k, v := range req.ChatTemplateKwargs {
			if tokenizer.ReservedVar(k) {
				return invalid("chat_template_kwargs", "%q is set by the server", k)
			}
			tmpl.Vars[k] = v
		}
	}
	genPrompt := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
	ids, err := tmpl.PromptMessages(s.cfg.Tok, msgs, genPrompt)
	if err != nil {
		return invalid("messages", "%v", err)
	}
	p.prompts = []prompt{{ids: ids}}
	maxTokens := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		if maxTokens != nil && *maxTokens != *req.MaxCompletionTokens {
			return invalid("max_completion_tokens", "%d disagrees with max_tokens %d; give one", *req.MaxCompletionTokens, *maxTokens)
		}
		maxTokens = req.MaxCompletionTokens
	}
	if maxTokens != nil && *maxTokens == 0 {
		return invalid("max_tokens", "0 generates nothing; want ≥ 1")
	}
	if err := s.sampling(req.samplingFields, maxTokens, false, p); err != nil {
		return err
	}
	release, err := s.acquire()
	if err != nil {
		return err
	}
	defer release()
	out := s.newOutput(w, r, "chatcmpl-", "chat.completion")
	if !p.stream {
		res, err := s.run(r.Context(), p, nil, nil)
		if err != nil {
			return err
		}
		choices := make([]map[string]any, len(res.choices))
		for i, c := range res.choices {
			choices[i] = map[string]any{"index": i, "message": map[string]any{"role": "assistant", "content": c.text},
				"logprobs": s.chatLogprobs(res, c, 0), "finish_reason": c.finish}
			s.tokenIDs(p, c, choices[i], false)
		}
		body := out.body(res, choices, res.usage())
		if p.tokenIDs {
			body["prompt_token_ids"] = ids
		}
		writeJSON(w, http.StatusOK, body)
		return nil
	}
	out.object = "chat.completion.chunk"
	return out.stream(s, p, func(res *result) error {
		var cs []map[string]any
		for _, c := range res.choices {
			cs = append(cs, map[string]any{"index": c.index, "delta": map[string]any{"role": "assistant", "content": ""}, "logprobs": nil, "finish_reason": nil})
		}
		return out.chunk(res, cs, nil)
	}, func(res *result, c *choice) map[string]any {
		text := pending(c, p.stopStrings)
		c.sent += len(text)
		from := c.sentLP
		c.sentLP = len(c.ids)
		delta := map[string]any{}
		if text != "" {
			delta["content"] = text
		}
		m := map[string]any{"index": c.index, "delta": delta, "logprobs": s.chatLogprobs(res, c, from), "finish_reason": nil}
		if c.finish != "" {
			m["finish_reason"] = c.finish
			s.tokenIDs(p, c, m, false)
		}
		return m
	})
}

// tokenIDs adds vLLM's return_token_ids fields to a choice.
func (s *Server) tokenIDs(p *params, c *choice, m map[string]any, withPrompt bool) {
	if !p.tokenIDs {
		return
	}
	ids := c.ids
	if ids == nil {
		ids = []int{}
	}
	m["token_ids"] = ids
	if withPrompt {
		m["prompt_token_ids"] = c.prompt.ids
	}
}

// promptText is the text of a prompt as echo writes it.
func (s *Server) promptText(p *prompt) string {
	if p.text != nil {
		return *p.text
	}
	return s.cfg.Tok.Decode(p.ids)
}

// legacyLogprobs is the completions log-probs of c's tokens from on
// ({tokens, token_logprobs, top_logprobs, text_offset}); from −1 is the
// echoed prompt alone, and withPrompt puts the prompt's before the tokens
// when echoing. nil when the request asked none.
func (s *Server) legacyLogprobs(res *result, c *choice, from int, withPrompt bool) any {
	p := res.p
	if p.logprobs < 0 {
		return nil
	}
	tokens, lps, tops, offsets := []string{}, []*float32{}, []map[string]float32{}, []int{}
	offset := 0
	if p.echo && (withPrompt || from < 0) {
		plp := res.promptLPs[c.prompt.index(p)]
		for i, id := range c.prompt.ids {
			t := s.tokenText(id, p.idTokens)
			tokens, offsets = append(tokens, t), append(offsets, offset)
			offset += len([]rune(t))
			if i == 0 {
				lps, tops = append(lps, nil), append(tops, nil)
				continue
			}
			lp := plp[i-1]
			lps, tops = append(lps, &lp), append(tops, map[string]float32{t: lp})
		}
	}
	if from >= 0 {
		if p.echo {
			offset = len([]rune(s.promptText(c.prompt)))
		}
		for i := 0; i < from; i++ {
			offset += len([]rune(s.tokenText(c.ids[i], p.idTokens)))
		}
		for i := from; i < len(c.ids); i++ {
			t := s.tokenText(c.ids[i], p.idTokens)
			lp := c.lps[i]
			top := map[string]float32{}
			for _, e := range c.tops[i] {
				top[s.tokenText(e.ID, p.idTokens)] = e.LogProb
			}
			top[t] = lp
			tokens, lps, tops, offsets = append(tokens, t), append(lps, &lp), append(tops, top), append(offsets, offset)
			offset += len([]rune(t))
		}
	}
	return map[string]any{"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}
}

// index is the position of pr among p's prompts.
func (pr *prompt) index(p *params) int {
	for i := range p.prompts {
		if &p.prompts[i] == pr {
			return i
		}
	}
	return -1
}

// chatLogprob is one token of chat log-probs.
type chatLogprob struct {
	Token       string        `json:"token"`
	Logprob     float32       `json:"logprob"`
	Bytes       []int         `json:"bytes"`
	TopLogprobs []chatLogprob `json:"top_logprobs,omitempty"`
}

// chatLogprobs is the chat log-probs of c's tokens from on, or nil.
func (s *Server) chatLogprobs(res *result, c *choice, from int) any {
	p := res.p
	if p.logprobs < 0 {
		return nil
	}
	entry := func(id int, lp float32) chatLogprob {
		t := s.tokenText(id, p.idTokens)
		b := make([]int, len(t))
		for i := range len(t) {
			b[i] = int(t[i])
		}
		return chatLogprob{Token: t, Logprob: lp, Bytes: b}
	}
	content := []chatLogprob{}
	for i := from; i < len(c.ids); i++ {
		e := entry(c.ids[i], c.lps[i])
		e.TopLogprobs = []chatLogprob{}
		for _, t := range c.tops[i] {
			e.TopLogprobs = append(e.TopLogprobs, entry(t.ID, t.LogProb))
		}
		content = append(content, e)
	}
	return map[string]any{"content": content}
}

// output writes one request's response: whole, or as server-sent events.
type output struct {
	w       http.ResponseWriter
	r       *http.Request
	id      string
	object  string
	created int64
	model   string
}

func (s *Server) newOutput(w http.ResponseWriter, r *http.Request, prefix, object string) *output {
	var b [12]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return &output{w: w, r: r, id: prefix + hex.EncodeToString(b[:]), object: object, created: time.Now().Unix(), model: s.cfg.Name}
}

// body is a response (or chunk) object.
func (o *output) body(res *result, choices []map[string]any, usage any) map[string]any {
	b := map[string]any{"id": o.id, "object": o.object, "created": o.created, "model": o.model, "choices": choices, "weight_version": res.version}
	if usage != nil {
		b["usage"] = usage
	}
	return b
}

// chunk writes one server-sent event of choices.
func (o *output) chunk(res *result, choices []map[string]any, usage any) error {
	if choices == nil {
		choices = []map[string]any{}
	}
	b := o.body(res, choices, nil)
	if res.p.includeUsage {
		b["usage"] = usage
	}
	return o.event(b)
}

func (o *output) event(v any) error {
	var b bytes.Buffer
	b.WriteString("data: ")
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.WriteString("\n")
	if _, err := o.w.Write(b.Bytes()); err != nil {
		return err
	}
	return http.NewResponseController(o.w).Flush()
}

// stream runs p and writes its chunks: first's once decoding starts, then
// one chunk per step with each changed choice's delta, then the usage
// chunk (with stream_options.include_usage) and [DONE]. An error after
// the first byte is written as an error event.
func (o *output) stream(s *Server, p *params, first func(*result) error, delta func(*result, *choice) map[string]any) error {
	began := false
	start := func(res *result) error {
		h := o.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
		o.w.WriteHeader(http.StatusOK)
		began = true
		return first(res)
	}
	step := func(res *result, cs []*choice) error {
		var out []map[string]any
		for _, c := range cs {
			out = append(out, delta(res, c))
		}
		return o.chunk(res, out, nil)
	}
	res, err := s.run(o.r.Context(), p, start, step)
	switch {
	case err != nil && !began:
		return err
	case err != nil:
		if o.r.Context().Err() != nil || errors.Is(err, context.Canceled) {
			return nil // the client left
		}
		o.event(map[string]any{"error": asAPIError(err)}) //nolint:errcheck // best effort
	case p.includeUsage:
		if err := o.event(o.body(res, []map[string]any{}, res.usage())); err != nil {
			return nil
		}
	}
	o.w.Write([]byte("data: [DONE]\n\n"))   //nolint:errcheck // the client left
	http.NewResponseController(o.w).Flush() //nolint:errcheck // the client left
	return nil
}

// models is GET /v1/models.
func (s *Server) models(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{s.modelCard()}})
	return nil
}

// modelByID is GET /v1/models/{id}.
func (s *Server) modelByID(w http.ResponseWriter, r *http.Request) error {
	if id := r.PathValue("id"); id != s.cfg.Name {
		return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
			Message: fmt.Sprintf("model %q does not exist; this server serves %q", id, s.cfg.Name)}
	}
	writeJSON(w, http.StatusOK, s.modelCard())
	return nil
}

func (s *Server) modelCard() map[string]any {
	return map[string]any{"id": s.cfg.Name, "object": "model", "created": 0, "owned_by": "hacrl",
		"max_model_len": s.cfg.MaxContext, "weight_version": s.WeightVersion()}
}

// health is GET /health.
func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	st := s.Stats()
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "weight_version": s.WeightVersion(),
		"requests_in_flight": st.InFlight, "sequences_live": st.Live, "requests_queued": st.Queued})
	return nil
}

// getWeightVersion is GET /get_weight_version (SGLang's).
func (s *Server) getWeightVersion(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"weight_version": s.WeightVersion()})
	return nil
}

// updateWeightsFromDisk is POST /update_weights_from_disk (SGLang's name
// and reply): load model_path, then UpdateWeights.
func (s *Server) updateWeightsFromDisk(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ModelPath     *string `json:"model_path"`
		WeightVersion *string `json:"weight_version"`
	}
	reply := func(status int, ok bool, msg string, paused int) error {
		writeJSON(w, status, map[string]any{"success": ok, "message": msg, "num_paused_requests": paused})
		return nil
	}
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, s.cfg.bodyTimeout, &req); err != nil {
		ae := asAPIError(err)
		return reply(ae.Status, false, ae.Message, 0)
	}
	switch {
	case req.ModelPath == nil || *req.ModelPath == "":
		return reply(http.StatusBadRequest, false, "model_path: required", 0)
	case s.cfg.Load == nil:
		return reply(http.StatusBadRequest, false, "this server does not load weights from disk", 0)
	}
	m, err := s.cfg.Load(r.Context(), *req.ModelPath)
	if err != nil {
		return reply(http.StatusBadRequest, false, fmt.Sprintf("loading %s: %v", *req.ModelPath, err), 0)
	}
	version := ""
	if req.WeightVersion != nil {
		version = *req.WeightVersion
	}
	paused, err := s.UpdateWeights(r.Context(), m, version)
	if err != nil {
		return reply(http.StatusBadRequest, false, fmt.Sprintf("updating to %s: %v", *req.ModelPath, err), paused)
	}
	return reply(http.StatusOK, true, fmt.Sprintf("weights of %s loaded; weight version %s", *req.ModelPath, s.WeightVersion()), paused)
}
