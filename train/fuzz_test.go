package train

import (
	"bytes"
	"encoding/gob"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"

	"github.com/hacrl/hacrl/rollout"
	"github.com/hacrl/hacrl/tokenizer"
)

// payloadRefusal is how checkPayload names what is wrong: the version, the
// step and agent, a count, or a rollout by index.
var payloadRefusal = regexp.MustCompile(`^(payload version -?\d+, |payload says step |\d+ rollouts, want |\d+ prompt lengths, want |a prompt of -?\d+ tokens|\d+ prompt texts, want |rollout \d+: \S)`)

// FuzzStepPayload feeds any bytes to the decoding of another agent's part
// of a step (agent "b", source 1, step 3, 2 prompts × 2 responses), as
// Run.share decodes it. A payload either does not decode, or checkPayload
// refuses it naming what is wrong, or it holds what the pool needs of it:
// 2×2 rollouts of source 1 in prompt order, each with tokens, one finite
// old log-prob ≤ 0 per token and a finite reward, a positive length per
// prompt and, when the step is logged, a prompt text per prompt; and it
// encodes and decodes back to itself. The seeds are payloads of texts the
// shipped llama-bpe agent's tokenizer encodes, as share writes them.
func FuzzStepPayload(f *testing.F) {
	const step, name, source, prompts, G = 3, "b", 1, 2, 2
	tok, err := tokenizer.Load(filepath.Join("..", "examples", "agents", "llama-bpe", "tokenizer.json"))
	if err != nil {
		f.Fatal(err)
	}
	seed := stepPayload{Version: payloadVersion, Step: step, Agent: name, PromptTokens: []int{7, 9},
		Prompts: []string{"12+35=", "81-6="}}
	for n, text := range []string{"47", "48", "75", "7 5"} {
		ids := tok.Encode(text)
		lp := make([]float32, len(ids))
		for i := range lp {
			lp[i] = -0.25 * float32(i+n+1)
		}
		seed.Rollouts = append(seed.Rollouts, rollout.Rollout{Prompt: n / G, Source: source, Text: text, Tokens: ids,
			Stopped: n != 3, Reward: float64(1 - n%2), OldLogProbs: lp})
	}
	for _, logged := range []bool{true, false} {
		p := seed
		if !logged {
			p.Prompts = nil
		}
		data, err := encodePayload(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, logged)
	}
	setup, err := encodePayload(setupPayload{Version: payloadVersion, Agent: name, TooLong: []int{4}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(setup, false)
	f.Fuzz(func(t *testing.T, data []byte, logged bool) {
		var p stepPayload
		if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&p); err != nil {
			return
		}
		if err := checkPayload(&p, step, name, source, prompts, G, logged); err != nil {
			if !payloadRefusal.MatchString(err.Error()) {
				t.Fatalf("refusal names nothing: %v", err)
			}
			return
		}
		if len(p.Rollouts) != prompts*G || len(p.PromptTokens) != prompts || logged && len(p.Prompts) != prompts {
			t.Fatalf("accepted %d rollouts, %d prompt lengths, %d prompt texts", len(p.Rollouts), len(p.PromptTokens), len(p.Prompts))
		}
		for _, n := range p.PromptTokens {
			if n < 1 {
				t.Fatalf("accepted a prompt of %d tokens", n)
			}
		}
		for n, ro := range p.Rollouts {
			if ro.Source != source || ro.Prompt != n/G || len(ro.Tokens) == 0 || len(ro.OldLogProbs) != len(ro.Tokens) {
				t.Fatalf("accepted rollout %d: source %d prompt %d, %d tokens, %d log-probs", n, ro.Source, ro.Prompt, len(ro.Tokens), len(ro.OldLogProbs))
			}
			if math.IsNaN(ro.Reward) || math.IsInf(ro.Reward, 0) {
				t.Fatalf("accepted rollout %d with reward %v", n, ro.Reward)
			}
			for i, lp := range ro.OldLogProbs {
				if !(lp <= 0) || math.IsInf(float64(lp), 0) {
					t.Fatalf("accepted rollout %d with old log-prob %v at token %d", n, lp, i)
				}
			}
		}
		again, err := encodePayload(p)
		if err != nil {
			t.Fatal(err)
		}
		var back stepPayload
		if err := gob.NewDecoder(bytes.NewReader(again)).Decode(&back); err != nil {
			t.Fatalf("an accepted payload encoded does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalized(p), normalized(back)) {
			t.Fatalf("an accepted payload encodes and decodes to another:\n%+v\n%+v", p, back)
		}
	})
}

// normalized is p with empty slices as nil, which gob does not tell apart.
func normalized(p stepPayload) stepPayload {
	if len(p.Prompts) == 0 {
		p.Prompts = nil
	}
	p.Rollouts = append([]rollout.Rollout(nil), p.Rollouts...)
	for i := range p.Rollouts {
		if len(p.Rollouts[i].OldLogProbs) == 0 {
			p.Rollouts[i].OldLogProbs = nil
		}
	}
	return p
}
