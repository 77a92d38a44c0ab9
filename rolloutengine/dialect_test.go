package rolloutengine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/model"
)

// shape is a JSON value's keys (recursively, as dotted paths) with each
// leaf's JSON type: what the documented examples fix of a request.
func shape(t *testing.T, data []byte) map[string]string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(strings.TrimPrefix(prefix+"."+k, "."), e)
			}
		case []any:
			out[prefix] = "array"
		case float64:
			out[prefix] = "number"
		case bool:
			out[prefix] = "bool"
		case string:
			out[prefix] = "string"
		default:
			out[prefix] = "null"
		}
	}
	walk("", v)
	return out
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestRequestShapes: the requests the client sends have exactly the fields
// and JSON types of the documented examples (testdata/README.md).
func TestRequestShapes(t *testing.T) {
	opt := model.SampleOptions{MaxNewTokens: 16, Temperature: 1, TopP: 1, Stop: []int{151645}}
	r := row{prompt: []int{151644, 872, 198}, maxTokens: 16, seed: 1234, seeded: true}
	tests := []struct {
		name, example string
		body          any
		drop          []string // documented vLLM fields the dialect leaves out
	}{
		{"vllm", "vllm_completions_request.json", completionBody(VLLM, "Qwen/Qwen3-0.6B", r, opt), nil},
		{"hacrl", "vllm_completions_request.json", completionBody(Hacrl, "a", r, opt), []string{"min_p", "repetition_penalty"}},
		{"sglang", "sglang_generate_request.json", generateBody(r, opt), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := shape(t, readTestdata(t, tc.example))
			for _, k := range tc.drop {
				delete(want, k)
			}
			data, err := json.Marshal(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if got := shape(t, data); !reflect.DeepEqual(got, want) {
				t.Errorf("request %s\nfields %v\nwant   %v", data, got, want)
			}
		})
	}
	// Greedy decoding sends no seed; top_k off is −1 for vLLM and SGLang, 0 for hacrl serve.
	greedy := completionBody(VLLM, "m", row{prompt: []int{1}, maxTokens: 4}, model.SampleOptions{Greedy: true, Temperature: 0.7})
	if greedy.Seed != nil || greedy.Temperature != 0 || greedy.TopK != -1 {
		t.Errorf("greedy vLLM request: %+v", greedy)
	}
	if b := completionBody(Hacrl, "m", r, opt); b.TopK != 0 {
		t.Errorf("hacrl top_k %d, want 0 (off)", b.TopK)
	}
	// Seeds: hacrl serve gets the whole uint64, vLLM one in int64's range (its protocol's bound).
	big := row{prompt: []int{1}, maxTokens: 4, seed: 1<<63 | 12345, seeded: true}
	if b := completionBody(Hacrl, "m", big, opt); *b.Seed != big.seed {
		t.Errorf("hacrl seed %d, want %d", *b.Seed, big.seed)
	}
	if b := completionBody(VLLM, "m", big, opt); *b.Seed != 12345 {
		t.Errorf("vLLM seed %d, want 12345", *b.Seed)
	}
	if b := generateBody(r, model.SampleOptions{TopK: 5}); b.SamplingParams.TopK != 5 || b.SamplingParams.StopTokenIDs == nil {
		t.Errorf("sglang request: %+v", b.SamplingParams)
	}
}

// TestParseDocumentedAnswers: the documented answers read as the tokens,
// log-probs, stop and weight version they hold.
func TestParseDocumentedAnswers(t *testing.T) {
	want := answer{tokens: []int{20, 151645}, logProbs: []float64{-0.0213, -0.0008}, stopped: true}
	got, err := parseCompletion(readTestdata(t, "vllm_completions_response.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("vLLM answer read as %+v, want %+v", got, want)
	}
	want.version = "3"
	if got, err = parseGenerate(readTestdata(t, "sglang_generate_response.json")); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SGLang answer read as %+v, want %+v", got, want)
	}
	var reply struct {
		Success *bool `json:"success"`
	}
	if err := json.Unmarshal(readTestdata(t, "sglang_update_weights_response.json"), &reply); err != nil || reply.Success == nil || !*reply.Success {
		t.Errorf("update_weights_from_disk answer: %v %v", reply.Success, err)
	}
}

// TestParseMalformed: each malformed answer is an error naming the field.
func TestParseMalformed(t *testing.T) {
	vllm := string(readTestdata(t, "vllm_completions_response.json"))
	sgl := string(readTestdata(t, "sglang_generate_response.json"))
	tests := []struct {
		name, body, want string
		sglang           bool
	}{
		{"not json", "<html>", "not a completions response", false},
		{"NaN log-prob", strings.Replace(vllm, "-0.0213", "NaN", 1), "not a completions response", false},
		{"no choices", `{"choices": []}`, "choices: 0 choices, want 1", false},
		{"no logprobs", `{"choices": [{"token_ids": [1], "finish_reason": "stop"}]}`, "choices[0].logprobs: missing", false},
		{"no ids", `{"choices": [{"logprobs": {"token_logprobs": [-1]}, "finish_reason": "stop"}]}`, "choices[0].token_ids: missing", false},
		{"ids disagree", strings.Replace(vllm, `"token_id:20"`, `"token_id:21"`, 1), "choices[0].logprobs.tokens: [21 151645] disagree", false},
		{"bad token string", strings.Replace(vllm, `"token_id:20"`, `"5"`, 1), `choices[0].logprobs.tokens[0]: "5", want token_id:N`, false},
		{"short log-probs", strings.Replace(vllm, "[-0.0213, -0.0008]", "[-0.0213]", 1), "choices[0].logprobs.token_logprobs: 1 log-probs for 2 tokens", false},
		{"null log-prob", strings.Replace(vllm, "-0.0213", "null", 1), "choices[0].logprobs.token_logprobs[0]: null", false},
		{"no finish", strings.Replace(vllm, `"finish_reason": "stop",`, "", 1), "choices[0].finish_reason: missing", false},
		{"abort", strings.Replace(vllm, `"finish_reason": "stop"`, `"finish_reason": "abort"`, 1), `choices[0].finish_reason: "abort", want stop or length`, false},
		{"sglang no meta", `{"text": ""}`, "meta_info: missing", true},
		{"sglang no logprobs", strings.Replace(sgl, `"output_token_logprobs"`, `"x"`, 1), "meta_info.output_token_logprobs: missing", true},
		{"sglang null log-prob", strings.Replace(sgl, "[-0.0213, 20, null]", "[null, 20, null]", 1), "meta_info.output_token_logprobs[0][0]: log-prob null", true},
		{"sglang short entry", strings.Replace(sgl, "[-0.0213, 20, null]", "[-0.0213]", 1), "meta_info.output_token_logprobs[0]: 1 entries", true},
		{"sglang ids disagree", strings.Replace(sgl, `"output_ids": [20,`, `"output_ids": [19,`, 1), "output_ids: [19 151645] disagree", true},
		{"sglang abort", strings.Replace(sgl, `{"type": "stop", "matched": 151645}`, `{"type": "abort", "message": "out of memory"}`, 1), `meta_info.finish_reason.type: "abort" (out of memory)`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parse := parseCompletion
			if tc.sglang {
				parse = parseGenerate
			}
			_, err := parse([]byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestCheck: answers that parse but break what the request allows.
func TestCheck(t *testing.T) {
	c := &Client{cfg: Config{Vocab: 100, MaxSeq: 64}}
	opt := model.SampleOptions{Stop: []int{2}, Vocab: 90}
	r := row{maxTokens: 4}
	tests := []struct {
		name string
		a    answer
		want string
	}{
		{"ok stop", answer{tokens: []int{5, 2}, logProbs: []float64{-1, -0.5}, stopped: true}, ""},
		{"ok length", answer{tokens: []int{5, 6, 7, 8}, logProbs: []float64{-1, -1, -1, 0}}, ""},
		{"empty", answer{}, "tokens: none came back"},
		{"too long", answer{tokens: []int{5, 6, 7, 8, 9}, logProbs: make([]float64, 5)}, "5 tokens, more than max_tokens 4"},
		{"outside tokenizer", answer{tokens: []int{95, 2}, logProbs: []float64{-1, -1}, stopped: true}, "tokens[0]: token id 95 outside the vocabulary [0, 90)"},
		{"negative id", answer{tokens: []int{-1, 2}, logProbs: []float64{-1, -1}, stopped: true}, "tokens[0]: token id -1"},
		{"early stop token", answer{tokens: []int{2, 5}, logProbs: []float64{-1, -1}, stopped: true}, "tokens[0]: stop token 2 before the end"},
		{"positive log-prob", answer{tokens: []int{5, 2}, logProbs: []float64{0.5, -1}, stopped: true}, "logprobs[0]: 0.5, want a finite log-prob <= 0"},
		{"stop without stop token", answer{tokens: []int{5, 6}, logProbs: []float64{-1, -1}, stopped: true}, "finish_reason: stop, but the last token 6 is none of the agent's stop tokens [2]"},
		{"length ending in stop", answer{tokens: []int{5, 6, 7, 2}, logProbs: make([]float64, 4)}, "length, but the response ends with stop token 2"},
		{"length too early", answer{tokens: []int{5, 6}, logProbs: []float64{-1, -1}}, "length after 2 tokens, want 4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.check(tc.a, r, opt)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
