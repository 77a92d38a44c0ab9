package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
)

// apiError is an error in the OpenAI shape, with its HTTP status.
type apiError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param"`
	Code    string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

// MarshalJSON writes empty param and code as null, as OpenAI does.
func (e *apiError) MarshalJSON() ([]byte, error) {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return json.Marshal(struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}{e.Message, e.Type, opt(e.Param), opt(e.Code)})
}

// invalid is a 400 about the request field param.
func invalid(param, format string, args ...any) *apiError {
	msg := fmt.Sprintf(format, args...)
	if param != "" {
		msg = param + ": " + msg
	}
	return &apiError{Status: http.StatusBadRequest, Message: msg, Type: "invalid_request_error", Param: param}
}

// asAPIError is err as an apiError: a 500 unless it is one.
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, errShutdown) {
		return &apiError{Status: http.StatusServiceUnavailable, Message: err.Error(), Type: "server_error"}
	}
	return &apiError{Status: http.StatusInternalServerError, Message: err.Error(), Type: "server_error"}
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, map[string]any{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		fmt.Fprintf(&b, `{"error":{"message":%q,"type":"server_error","param":null,"code":null}}`+"\n", "encoding the response: "+err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b.Bytes()) //nolint:errcheck // the client left
}

// decodeBody reads r's JSON body into v within limit bytes: 413 over it,
// 400 for malformed JSON or a field of the wrong type (naming it). Unknown
// fields are ignored. A Content-Type of another encoding gets 415; none,
// and the types clients send a JSON string under by default (curl -d:
// application/x-www-form-urlencoded; fetch: text/plain), are read as JSON.
// A body not all sent within timeout gets 408, so that a
// client stalling mid-body does not hold its connection.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		isJSON := mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
		if err != nil || !isJSON && mt != "application/x-www-form-urlencoded" && mt != "text/plain" {
			return &apiError{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type",
				Message: fmt.Sprintf("Content-Type %.100q: send the body as application/json", ct)}
		}
	}
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	switch {
	case err != nil:
		// The connection is of no further use, and net/http must not wait
		// for the rest of the body (the deadline stays).
		w.Header().Set("Connection", "close")
	case deadline:
		rc.SetReadDeadline(time.Time{}) //nolint:errcheck // it was set just before
	}
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: fmt.Sprintf("the request body is over the server's %d bytes", limit)}
	case errors.As(err, &ne) && ne.Timeout():
		return &apiError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
			Message: fmt.Sprintf("the request body did not arrive within %v", timeout)}
	case err != nil:
		return invalid("", "reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return invalid("", "empty request body; send a JSON object")
	}
	err = json.Unmarshal(data, v)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return invalid("", "malformed JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te) && te.Field == "":
		return invalid("", "the body must be a JSON object, got %s", te.Value)
	case errors.As(err, &te):
		field := strings.TrimPrefix(te.Field, "samplingFields.")
		return invalid(field, "got a JSON %s, want %s", te.Value, jsonKind(te.Type.String()))
	}
	return invalid("", "%v", err)
}

// jsonKind names a Go type as the JSON value it reads.
func jsonKind(goType string) string {
	t := strings.TrimLeft(goType, "*")
	switch {
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"), t == "json.Number":
		return "a number"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	}
	return "another type"
}

// streamOptions is OpenAI's stream_options.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// samplingFields are the request fields both endpoints share (OpenAI's and
// vLLM's names).
type samplingFields struct {
	Model                  string          `json:"model"`
	MaxTokens              *int            `json:"max_tokens"`
	Temperature            *float64        `json:"temperature"`
	TopP                   *float64        `json:"top_p"`
	TopK                   *int            `json:"top_k"`
	N                      *int            `json:"n"`
	Stop                   json.RawMessage `json:"stop"`
	StopTokenIDs           []int           `json:"stop_token_ids"`
	Seed                   json.RawMessage `json:"seed"`
	Stream                 bool            `json:"stream"`
	StreamOptions          *streamOptions  `json:"stream_options"`
	IgnoreEOS              bool            `json:"ignore_eos"`
	ReturnTokenIDs         bool            `json:"return_token_ids"`
	ReturnTokensAsTokenIDs bool            `json:"return_tokens_as_token_ids"`

	// Known sampling fields the server does not implement: refused unless
	// neutral, rather than silently sampling otherwise than asked.
	PresencePenalty   *float64           `json:"presence_penalty"`
	FrequencyPenalty  *float64           `json:"frequency_penalty"`
	RepetitionPenalty *float64           `json:"repetition_penalty"`
	MinP              *float64           `json:"min_p"`
	LogitBias         map[string]float64 `json:"logit_bias"`
	BestOf            *int               `json:"best_of"`
	Suffix            *string            `json:"suffix"`
	Tools             json.RawMessage    `json:"tools"`
}

// unsupported names the first unimplemented field set to something other
// than its neutral value.
func (f samplingFields) unsupported(n int) error {
	nonZero := func(v *float64, neutral float64) bool { return v != nil && *v != neutral }
	switch {
	case nonZero(f.PresencePenalty, 0):
		return invalid("presence_penalty", "not supported; give 0 or leave it out")
	case nonZero(f.FrequencyPenalty, 0):
		return invalid("frequency_penalty", "not supported; give 0 or leave it out")
	case nonZero(f.RepetitionPenalty, 1):
		return invalid("repetition_penalty", "not supported; give 1 or leave it out")
	case nonZero(f.MinP, 0):
		return invalid("min_p", "not supported; give 0 or leave it out")
	case len(f.LogitBias) > 0:
		return invalid("logit_bias", "not supported")
	case f.BestOf != nil && *f.BestOf != 1 && *f.BestOf != n:
		return invalid("best_of", "not supported; give n or leave it out")
	case f.Suffix != nil && *f.Suffix != "":
		return invalid("suffix", "not supported")
	case len(f.Tools) > 0 && string(f.Tools) != "null" && string(f.Tools) != "[]":
		return invalid("tools", "tool calls are not supported")
	}
	return nil
}

// completionRequest is POST /v1/completions' body.
type completionRequest struct {
	samplingFields
	Prompt           json.RawMessage `json:"prompt"`
	Echo             bool            `json:"echo"`
	Logprobs         *int            `json:"logprobs"`
	AddSpecialTokens *bool           `json:"add_special_tokens"`
}

// chatRequest is POST /v1/chat/completions' body.
type chatRequest struct {
	samplingFields
	Messages            json.RawMessage `json:"messages"`
	Logprobs            *bool           `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	ChatTemplateKwargs  map[string]any  `json:"chat_template_kwargs"`
}

// prompt is one prompt of a request: its ids, and its text when it came as
// text.
type prompt struct {
	ids  []int
	text *string
}

// params are a validated request's generation settings.
type params struct {
	prompts      []prompt
	n            int
	maxTokens    int // per choice; 0 only with echo (score the prompt)
	opt          model.SampleOptions
	seed         uint64
	stopStrings  []string
	logprobs     int // top log-probs per token; -1: no log-probs
	echo         bool
	stream       bool
	includeUsage bool
	tokenIDs     bool // return_token_ids
	idTokens     bool // return_tokens_as_token_ids
}

// choices is the number of sequences the request decodes.
func (p *params) choices() int { return len(p.prompts) * p.n }

// sampling validates the shared fields into p (prompts already set).
// maxTokens is the request's max_tokens (or max_completion_tokens).
func (s *Server) sampling(f samplingFields, maxTokens *int, echo bool, p *params) error {
	cfg := s.cfg
	if f.Model != "" && f.Model != cfg.Name {
		return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
			Message: fmt.Sprintf("model %q does not exist; this server serves %q", f.Model, cfg.Name)}
	}
	p.n = 1
	if f.N != nil {
		if *f.N < 1 || *f.N > cfg.MaxN {
			return invalid("n", "%d, want 1 to %d", *f.N, cfg.MaxN)
		}
		p.n = *f.N
	}
	if err := f.unsupported(p.n); err != nil {
		return err
	}
	if p.choices() > cfg.MaxN {
		return invalid("prompt", "%d prompts × n %d = %d choices, more than the server's %d", len(p.prompts), p.n, p.choices(), cfg.MaxN)
	}
	opt := model.SampleOptions{Temperature: 1, Vocab: cfg.Sampling.Vocab}
	if t := f.Temperature; t != nil {
		if math.IsNaN(*t) || *t < 0 || *t > 10 {
			return invalid("temperature", "%v, want 0 (greedy) to 10", *t)
		}
		opt.Temperature = *t
	}
	opt.Greedy = opt.Temperature == 0
	if v := f.TopP; v != nil {
		if math.IsNaN(*v) || *v <= 0 || *v > 1 {
			return invalid("top_p", "%v, want within (0, 1]", *v)
		}
		opt.TopP = *v
	}
	if v := f.TopK; v != nil {
		if *v < -1 || *v > cfg.Sampling.Vocab {
			return invalid("top_k", "%d, want -1 or 0 (off) to the vocabulary's %d", *v, cfg.Sampling.Vocab)
		}
		opt.TopK = max(*v, 0)
	}
	if !f.IgnoreEOS {
		opt.Stop = slices.Clone(cfg.Sampling.Stop)
	}
	if len(f.StopTokenIDs) > 64 {
		return invalid("stop_token_ids", "%d ids, want at most 64", len(f.StopTokenIDs))
	}
	for i, id := range f.StopTokenIDs {
		if id < 0 || id >= cfg.Model.Config().Vocab {
			return invalid("stop_token_ids", "id %d (item %d) is outside the vocabulary [0, %d)", id, i, cfg.Model.Config().Vocab)
		}
		if !slices.Contains(opt.Stop, id) {
			opt.Stop = append(opt.Stop, id)
		}
	}
	var err error
	if p.stopStrings, err = parseStop(f.Stop); err != nil {
		return err
	}
	if len(f.Seed) > 0 && string(f.Seed) != "null" {
		if p.seed, err = parseSeed(f.Seed); err != nil {
			return err
		}
	} else {
		p.seed = rand.Uint64()
	}
	p.stream = f.Stream
	if f.StreamOptions != nil {
		if !f.Stream {
			return invalid("stream_options", "only with stream: true")
		}
		p.includeUsage = f.StreamOptions.IncludeUsage
	}
	p.tokenIDs, p.idTokens, p.echo = f.ReturnTokenIDs, f.ReturnTokensAsTokenIDs, echo
	if p.logprobs > 0 {
		opt.TopLogProbs = p.logprobs
	}
	p.opt = opt
	return s.lengths(maxTokens, p)
}

// lengths checks the prompts and max_tokens against the context.
func (s *Server) lengths(maxTokens *int, p *params) error {
	ctxLen, vocab := s.cfg.MaxContext, s.cfg.Model.Config().Vocab
	longest := 0
	for i, pr := range p.prompts {
		if len(pr.ids) == 0 {
			return invalid("prompt", "prompt %d is empty", i)
		}
		longest = max(longest, len(pr.ids))
		for j, id := range pr.ids {
			if id < 0 || id >= vocab {
				return invalid("prompt", "prompt %d token %d is %d, outside the vocabulary [0, %d)", i, j, id, vocab)
			}
		}
	}
	scoreOnly := p.echo && maxTokens != nil && *maxTokens == 0
	if longest > ctxLen || longest == ctxLen && !scoreOnly {
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "prompt", Code: "context_length_exceeded",
			Message: fmt.Sprintf("prompt: %d tokens leave no room to answer in the server's context of %d tokens", longest, ctxLen)}
	}
	if maxTokens != nil {
		switch {
		case *maxTokens < 0:
			return invalid("max_tokens", "%d, want ≥ 1", *maxTokens)
		case *maxTokens == 0 && !p.echo:
			return invalid("max_tokens", "0 generates nothing; want ≥ 1 (0 only with echo, to score the prompt)")
		case *maxTokens > ctxLen-longest: // not longest+*maxTokens: it can overflow
			return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "max_tokens", Code: "context_length_exceeded",
				Message: fmt.Sprintf("max_tokens: %d with a prompt of %d tokens is more than the server's context of %d tokens", *maxTokens, longest, ctxLen)}
		}
		p.maxTokens = *maxTokens
	} else {
		p.maxTokens = min(s.cfg.Sampling.MaxNewTokens, ctxLen-longest)
	}
	p.opt.MaxNewTokens = p.maxTokens
	return nil
}

// parseStop reads stop: null, a string or a list of strings.
func parseStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	var list []string
	if json.Unmarshal(raw, &one) == nil {
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid("stop", "want a string or a list of strings")
	}
	if len(list) > 16 {
		return nil, invalid("stop", "%d strings, want at most 16", len(list))
	}
	for i, s := range list {
		if s == "" || len(s) > 1024 {
			return nil, invalid("stop", "string %d has %d bytes, want 1 to 1024", i, len(s))
		}
	}
	return list, nil
}

// parseSeed reads a seed: an integer, from -2⁶³ to 2⁶⁴-1 (a negative one
// is its two's complement bits).
func parseSeed(raw json.RawMessage) (uint64, error) {
	n := string(raw)
	if n[0] == '"' || n[0] == '[' || n[0] == '{' || n == "true" || n == "false" {
		return 0, invalid("seed", "got %.40s, want an integer", n)
	}
	if u, err := strconv.ParseUint(string(n), 10, 64); err == nil {
		return u, nil
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return uint64(i), nil
	}
	return 0, invalid("seed", "%s, want an integer within 64 bits", n)
}

// parsePrompt reads a completion prompt: a text, a list of texts, a list of
// token ids or a list of lists of token ids. Texts are encoded with tok,
// after its BOS token when bos.
func parsePrompt(raw json.RawMessage, tok tokenizer.Tokenizer, bos bool) ([]prompt, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("prompt", "required")
	}
	encode := func(text string) prompt {
		var ids []int
		if id := tok.Special().BOS; bos && id >= 0 {
			ids = append(ids, id)
		}
		return prompt{ids: append(ids, tok.Encode(text)...), text: &text}
	}
	if raw[0] == '"' {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, invalid("prompt", "malformed string")
		}
		return []prompt{encode(text)}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, invalid("prompt", "want a string, a list of strings, a list of token ids or a list of lists of token ids")
	}
	if len(items) == 0 {
		return nil, invalid("prompt", "empty list")
	}
	for i, it := range items {
		if string(it) == "null" {
			return nil, invalid("prompt", "item %d is null", i)
		}
	}
	var out []prompt
	switch items[0][0] {
	case '"':
		var texts []string
		if err := json.Unmarshal(raw, &texts); err != nil {
			return nil, invalid("prompt", "a list that starts with a string must hold strings only")
		}
		for _, t := range texts {
			out = append(out, encode(t))
		}
	case '[':
		var lists [][]*int
		if err := json.Unmarshal(raw, &lists); err != nil {
			return nil, invalid("prompt", "a list of lists must hold lists of integer token ids only")
		}
		for i, l := range lists {
			ids, err := tokenIDs(l)
			if err != nil {
				return nil, invalid("prompt", "prompt %d: %v", i, err)
			}
			out = append(out, prompt{ids: ids})
		}
	default:
		var l []*int
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, invalid("prompt", "a list of token ids must hold integers only")
		}
		ids, err := tokenIDs(l)
		if err != nil {
			return nil, invalid("prompt", "%v", err)
		}
		out = []prompt{{ids: ids}}
	}
	return out, nil
}

// tokenIDs is a JSON list of token ids without nulls (which would read as 0).
func tokenIDs(l []*int) ([]int, error) {
	ids := make([]int, len(l))
	for i, id := range l {
		if id == nil {
			return nil, fmt.Errorf("token %d is null, want an integer token id", i)
		}
		ids[i] = *id
	}
	return ids, nil
}

// parseMessages reads chat messages: role and content, a string or a list
// of text parts.
func parseMessages(raw json.RawMessage) ([]tokenizer.Message, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("messages", "required")
	}
	var items []struct {
		Role    *string         `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, invalid("messages", "want a list of {\"role\", \"content\"} objects")
	}
	if len(items) == 0 {
		return nil, invalid("messages", "empty list")
	}
	msgs := make([]tokenizer.Message, len(items))
	for i, it := range items {
		if it.Role == nil || *it.Role == "" {
			return nil, invalid(fmt.Sprintf("messages[%d].role", i), "required")
		}
		content, err := messageContent(it.Content)
		if err != nil {
			return nil, invalid(fmt.Sprintf("messages[%d].content", i), "%v", err)
		}
		msgs[i] = tokenizer.Message{Role: *it.Role, Content: content}
	}
	return msgs, nil
}

// messageContent is a message's text: a string, null, or text parts joined.
func messageContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("want a string or a list of {\"type\": \"text\", \"text\"} parts")
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", fmt.Errorf("part %d: type %q: only text parts are supported", j, p.Type)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}
