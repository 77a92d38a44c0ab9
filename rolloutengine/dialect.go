package rolloutengine

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hacrl/hacrl/model"
)

// Dialects a Client speaks (config.Rollout.Dialect).
const (
	VLLM   = "vllm"
	SGLang = "sglang"
	Hacrl  = "hacrl"
)

// row is one request: a prompt, the most tokens it may get, and its seed.
type row struct {
	prompt    []int
	maxTokens int
	seed      uint64
	seeded    bool // false for greedy decoding: no seed is sent
}

// answer is a response as a dialect reads it, before the checks every
// dialect shares (check).
type answer struct {
	tokens   []int
	logProbs []float64
	stopped  bool
	version  string // "" when the server reports none
}

// fieldError is a problem with one field of a server's answer.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func badField(field, format string, args ...any) error {
	return &fieldError{field, fmt.Sprintf(format, args...)}
}

// topK is the top_k a dialect sends for opt: vLLM and SGLang take −1 for
// "off" (0 is refused by older releases), hacrl serve takes 0.
func topK(dialect string, opt model.SampleOptions) int {
	if opt.TopK > 0 {
		return opt.TopK
	}
	if dialect == Hacrl {
		return 0
	}
	return -1
}

// temperature is what opt samples at: 0 for greedy decoding.
func temperature(opt model.SampleOptions) float64 {
	if opt.Greedy {
		return 0
	}
	return opt.Temperature
}

// topP is opt's nucleus, 1 (off) when unset.
func topP(opt model.SampleOptions) float64 {
	if opt.TopP <= 0 || opt.TopP > 1 {
		return 1
	}
	return opt.TopP
}

// stops is opt's stop tokens, never null in JSON.
func stops(opt model.SampleOptions) []int {
	if opt.Stop == nil {
		return []int{}
	}
	return opt.Stop
}

// completionRequest is the body of POST /v1/completions (vLLM, hacrl serve).
type completionRequest struct {
	Model                  string   `json:"model"`
	Prompt                 []int    `json:"prompt"`
	MaxTokens              int      `json:"max_tokens"`
	Temperature            float64  `json:"temperature"`
	TopP                   float64  `json:"top_p"`
	TopK                   int      `json:"top_k"`
	Seed                   *uint64  `json:"seed,omitempty"`
	N                      int      `json:"n"`
	StopTokenIDs           []int    `json:"stop_token_ids"`
	Logprobs               int      `json:"logprobs"`
	ReturnTokenIDs         bool     `json:"return_token_ids"`
	ReturnTokensAsTokenIDs bool     `json:"return_tokens_as_token_ids"`
	SkipSpecialTokens      bool     `json:"skip_special_tokens"`
	MinP                   *float64 `json:"min_p,omitempty"`
	RepetitionPenalty      *float64 `json:"repetition_penalty,omitempty"`
}

// completionBody is a completions request for one row: hacrl serve gets
// the row's seed as it is (a uint64), vLLM its low 63 bits. vLLM also gets
// min_p 0 and repetition_penalty 1, so that defaults a server takes from
// the model's generation_config.json do not change the distribution.
func completionBody(dialect, modelName string, r row, opt model.SampleOptions) completionRequest {
	req := completionRequest{
		Model: modelName, Prompt: r.prompt, MaxTokens: r.maxTokens,
		Temperature: temperature(opt), TopP: topP(opt), TopK: topK(dialect, opt),
		N: 1, StopTokenIDs: stops(opt), Logprobs: 0,
		ReturnTokenIDs: true, ReturnTokensAsTokenIDs: true, SkipSpecialTokens: false,
	}
	if r.seeded {
		seed := r.seed
		if dialect == VLLM {
			seed &= math.MaxInt64 // vLLM takes seeds in int64's range; its draws are its own anyway
		}
		req.Seed = &seed
	}
	if dialect == VLLM {
		zero, one := 0.0, 1.0
		req.MinP, req.RepetitionPenalty = &zero, &one
	}
	return req
}

// completionResponse is what a completions answer must hold.
type completionResponse struct {
	Choices []struct {
		TokenIDs []int `json:"token_ids"`
		Logprobs *struct {
			Tokens        []string   `json:"tokens"`
			TokenLogprobs []*float64 `json:"token_logprobs"`
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	WeightVersion *string `json:"weight_version"`
}

// parseCompletion reads a completions answer of one choice. The token ids
// are choices[0].token_ids (vLLM's return_token_ids), or, from a server
// without it, the "token_id:N" strings of logprobs.tokens
// (return_tokens_as_token_ids); when both are there they must agree.
func parseCompletion(data []byte) (answer, error) {
	var resp completionResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return answer{}, fmt.Errorf("not a completions response: %w", err)
	}
	if len(resp.Choices) != 1 {
		return answer{}, badField("choices", "%d choices, want 1 (n = 1)", len(resp.Choices))
	}
	ch := resp.Choices[0]
	if ch.Logprobs == nil {
		return answer{}, badField("choices[0].logprobs", "missing (the request asks for logprobs 0)")
	}
	var a answer
	if len(ch.Logprobs.TokenLogprobs) == 0 && len(ch.TokenIDs) == 0 && len(ch.Logprobs.Tokens) == 0 {
		return answer{}, badField("choices[0].token_ids", "missing or empty: no tokens came back")
	}
	fromStrings := make([]int, len(ch.Logprobs.Tokens))
	for i, s := range ch.Logprobs.Tokens {
		id, err := strconv.Atoi(strings.TrimPrefix(s, "token_id:"))
		if !strings.HasPrefix(s, "token_id:") || err != nil {
			return answer{}, badField(fmt.Sprintf("choices[0].logprobs.tokens[%d]", i), "%q, want token_id:N (return_tokens_as_token_ids)", s)
		}
		fromStrings[i] = id
	}
	switch {
	case ch.TokenIDs != nil:
		a.tokens = ch.TokenIDs
		if ch.Logprobs.Tokens != nil && !slices.Equal(ch.TokenIDs, fromStrings) {
			return answer{}, badField("choices[0].logprobs.tokens", "%v disagree with choices[0].token_ids %v", fromStrings, ch.TokenIDs)
		}
	case ch.Logprobs.Tokens != nil:
		a.tokens = fromStrings
	default:
		return answer{}, badField("choices[0].token_ids", "missing (the request sets return_token_ids)")
	}
	if len(ch.Logprobs.TokenLogprobs) != len(a.tokens) {
		return answer{}, badField("choices[0].logprobs.token_logprobs", "%d log-probs for %d tokens", len(ch.Logprobs.TokenLogprobs), len(a.tokens))
	}
	a.logProbs = make([]float64, len(a.tokens))
	for i, lp := range ch.Logprobs.TokenLogprobs {
		if lp == nil {
			return answer{}, badField(fmt.Sprintf("choices[0].logprobs.token_logprobs[%d]", i), "null")
		}
		a.logProbs[i] = *lp
	}
	if ch.FinishReason == nil {
		return answer{}, badField("choices[0].finish_reason", "missing")
	}
	switch *ch.FinishReason {
	case "stop":
		a.stopped = true
	case "length":
	default:
		return answer{}, badField("choices[0].finish_reason", "%q, want stop or length", *ch.FinishReason)
	}
	if resp.WeightVersion != nil {
		a.version = *resp.WeightVersion
	}
	return a, nil
}

// generateRequest is the body of SGLang's native POST /generate.
type generateRequest struct {
	InputIDs        []int          `json:"input_ids"`
	SamplingParams  samplingParams `json:"sampling_params"`
	ReturnLogprob   bool           `json:"return_logprob"`
	LogprobStartLen int            `json:"logprob_start_len"`
}

type samplingParams struct {
	MaxNewTokens      int     `json:"max_new_tokens"`
	Temperature       float64 `json:"temperature"`
	TopP              float64 `json:"top_p"`
	TopK              int     `json:"top_k"`
	MinP              float64 `json:"min_p"`
	RepetitionPenalty float64 `json:"repetition_penalty"`
	StopTokenIDs      []int   `json:"stop_token_ids"`
	N                 int     `json:"n"`
	SkipSpecialTokens bool    `json:"skip_special_tokens"`
}

// generateBody is SGLang's request for one row. SGLang takes no
// per-request seed on /generate, so its draws are its own.
func generateBody(r row, opt model.SampleOptions) generateRequest {
	return generateRequest{
		InputIDs: r.prompt,
		SamplingParams: samplingParams{
			MaxNewTokens: r.maxTokens, Temperature: temperature(opt), TopP: topP(opt), TopK: topK(SGLang, opt),
			MinP: 0, RepetitionPenalty: 1, StopTokenIDs: stops(opt), N: 1, SkipSpecialTokens: false,
		},
		ReturnLogprob: true, LogprobStartLen: -1,
	}
}

// generateResponse is what a /generate answer must hold.
type generateResponse struct {
	OutputIDs []int `json:"output_ids"`
	MetaInfo  *struct {
		FinishReason *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"finish_reason"`
		OutputTokenLogprobs [][]json.RawMessage `json:"output_token_logprobs"`
		WeightVersion       *string             `json:"weight_version"`
	} `json:"meta_info"`
}

// parseGenerate reads SGLang's answer: the tokens and log-probs from
// meta_info.output_token_logprobs ([logprob, token_id, text] each), checked
// against output_ids when the server sends them.
func parseGenerate(data []byte) (answer, error) {
	var resp generateResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return answer{}, fmt.Errorf("not a /generate response: %w", err)
	}
	m := resp.MetaInfo
	if m == nil {
		return answer{}, badField("meta_info", "missing")
	}
	if m.OutputTokenLogprobs == nil {
		return answer{}, badField("meta_info.output_token_logprobs", "missing (the request sets return_logprob)")
	}
	var a answer
	for i, e := range m.OutputTokenLogprobs {
		field := fmt.Sprintf("meta_info.output_token_logprobs[%d]", i)
		if len(e) < 2 {
			return answer{}, badField(field, "%d entries, want [logprob, token_id, text]", len(e))
		}
		var lp *float64
		if err := json.Unmarshal(e[0], &lp); err != nil || lp == nil {
			return answer{}, badField(field+"[0]", "log-prob %s, want a number", e[0])
		}
		var id int
		if err := json.Unmarshal(e[1], &id); err != nil {
			return answer{}, badField(field+"[1]", "token id %s, want an integer", e[1])
		}
		a.tokens = append(a.tokens, id)
		a.logProbs = append(a.logProbs, *lp)
	}
	if resp.OutputIDs != nil && !slices.Equal(resp.OutputIDs, a.tokens) {
		return answer{}, badField("output_ids", "%v disagree with meta_info.output_token_logprobs' ids %v", resp.OutputIDs, a.tokens)
	}
	if m.FinishReason == nil {
		return answer{}, badField("meta_info.finish_reason", "missing")
	}
	switch m.FinishReason.Type {
	case "stop":
		a.stopped = true
	case "length":
	default:
		msg := ""
		if m.FinishReason.Message != "" {
			msg = " (" + m.FinishReason.Message + ")"
		}
		return answer{}, badField("meta_info.finish_reason.type", "%q%s, want stop or length", m.FinishReason.Type, msg)
	}
	if m.WeightVersion != nil {
		a.version = *m.WeightVersion
	}
	return a, nil
}
