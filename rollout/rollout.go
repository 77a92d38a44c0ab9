// Package rollout holds what agents exchange in collaborative training: each
// response as text plus a few scalars (source agent, reward, the source's old
// log-probability), pooled per step, and each learner's view of the pool in its
// own tokenization.
//
// The pool is tokenizer-neutral. A learner sees its own responses with their
// original token ids and every other agent's responses re-tokenized from text
// with its own tokenizer and prompt template (../shared/docs/hacpo-paper.md
// §2.3, Def 2.3). Decision (spec §6.4 item 7 leaves it open): the stop token is
// not part of the text; a cross sample whose source stopped properly gets the
// learner's own stop token appended, so both self and cross samples teach the
// learner to stop after the answer, and special-token text never leaks into
// another tokenizer. A response whose text does not survive the learner's
// encode→decode round trip (a character its vocabulary lacks) is kept, and
// counted per pair of agents so the loss of fidelity is measured.
//
// This is the seam for exchange across processes: a Rollout is plain data
// (see Rollout's JSON form), so a pool can be assembled from a message bus
// instead of in memory without changing the learners.
//
// For people, a run can log each step's rollouts (config rollouts.every) as
// gzip-compressed JSONL in OUT/rollouts: Record is the documented line format,
// with each learner's advantage and clip state, and WriteLog, ReadLog,
// ScanLog and LogSteps write and read the files (`hacrl rollouts` prints them).
package rollout

import "fmt"

// Rollout is one response of one agent to one prompt.
type Rollout struct {
	Prompt  int     `json:"prompt"`  // index of the prompt in the step's batch
	Source  int     `json:"source"`  // index of the agent that generated it
	Text    string  `json:"text"`    // the response text, stop token excluded
	Tokens  []int   `json:"tokens"`  // the source's token ids, stop token included when Stopped
	Stopped bool    `json:"stopped"` // ended with a stop token (false: cut at the length limit)
	Reward  float64 `json:"reward"`

	// OldLogProbs are the source's per-token log-probs of Tokens, from its
	// scoring pass before any update of the step.
	OldLogProbs []float32 `json:"old_log_probs,omitempty"`

	// ISWeights are the rollout correction's weights of the response
	// (hacpo.Settings.RolloutWeights: one per token, or one), when its
	// sampler is not the trainer and the method corrects for it; else nil.
	ISWeights []float64 `json:"is_weights,omitempty"`

	// WeightVersion is the version of the source's weights that sampled
	// it when an inference server did (the number of steps done when they
	// were pushed); "" when sampled in-process.
	WeightVersion string `json:"weight_version,omitempty"`
}

// OldMeanLogProb is the source's mean token log-prob: the denominator of the
// sequence ratio (spec §2.3, each side averaged over its own token count).
func (r *Rollout) OldMeanLogProb() float64 {
	if len(r.OldLogProbs) == 0 {
		return 0
	}
	var s float64
	for _, v := range r.OldLogProbs {
		s += float64(v)
	}
	return s / float64(len(r.OldLogProbs))
}

// Pool is every agent's responses for one step's prompts.
type Pool struct {
	Agents   int       // number of agents that contributed
	Prompts  int       // number of prompts in the step
	Rollouts []Rollout // ordered by source, then prompt, then sample
}

// BySource returns the rollouts of one agent.
func (p *Pool) BySource(source int) []*Rollout {
	var out []*Rollout
	for i := range p.Rollouts {
		if p.Rollouts[i].Source == source {
			out = append(out, &p.Rollouts[i])
		}
	}
	return out
}

// Groups returns, per prompt, the indices into Rollouts of all its responses.
func (p *Pool) Groups() [][]int {
	g := make([][]int, p.Prompts)
	for i, r := range p.Rollouts {
		g[r.Prompt] = append(g[r.Prompt], i)
	}
	return g
}

// Tokenizer is what a view needs of a learner's tokenizer.
type Tokenizer interface {
	Encode(text string) []int
	Decode(ids []int) string
}

// Learner describes how a learner tokenizes.
type Learner struct {
	Index     int
	Tokenizer Tokenizer
	Prompts   [][]int // the step's prompts, rendered with the learner's template
	Stop      int     // the learner's stop token, appended to cross samples that stopped; −1 for none
	MaxTokens int     // longest response the learner accepts (longer re-tokenized responses are cut)
}

// Item is one rollout as a learner sees it.
type Item struct {
	Rollout  *Rollout
	Index    int   // index in Pool.Rollouts
	Prompt   []int // learner-tokenized prompt
	Response []int // learner-tokenized response
	Self     bool
	Changed  bool // the text did not survive the learner's encode→decode round trip
	Cut      bool // the re-tokenized response was cut to MaxTokens
}

// View is the pool in one learner's tokenization, in pool order.
type View struct {
	Learner int
	Items   []Item
	// Changed and Total count cross samples per source whose text did not
	// survive the round trip.
	Changed, Total []int
}

// ChangedFrac is the fraction of source's responses that did not survive the
// round trip into the learner's tokenizer (0 when there were none).
func (v *View) ChangedFrac(source int) float64 {
	if v.Total[source] == 0 {
		return 0
	}
	return float64(v.Changed[source]) / float64(v.Total[source])
}

// View renders the pool for a learner.
func (p *Pool) View(l Learner) (*View, error) {
	if len(l.Prompts) != p.Prompts {
		return nil, fmt.Errorf("rollout: learner %d has %d rendered prompts, pool has %d", l.Index, len(l.Prompts), p.Prompts)
	}
	v := &View{Learner: l.Index, Items: make([]Item, len(p.Rollouts)), Changed: make([]int, p.Agents), Total: make([]int, p.Agents)}
	for i := range p.Rollouts {
		r := &p.Rollouts[i]
		it := Item{Rollout: r, Index: i, Prompt: l.Prompts[r.Prompt], Self: r.Source == l.Index}
		if it.Self {
			it.Response = r.Tokens
		} else {
			ids := l.Tokenizer.Encode(r.Text)
			v.Total[r.Source]++
			if l.Tokenizer.Decode(ids) != r.Text {
				it.Changed = true
				v.Changed[r.Source]++
			}
			if r.Stopped && l.Stop >= 0 {
				ids = append(ids, l.Stop)
			}
			if l.MaxTokens > 0 && len(ids) > l.MaxTokens {
				ids = ids[:l.MaxTokens]
				it.Cut = true
			}
			if len(ids) == 0 {
				// An empty truncated response has nothing to score; give it
				// the stop token so every sequence has at least one token.
				if l.Stop < 0 {
					return nil, fmt.Errorf("rollout: learner %d: empty response from agent %d and no stop token", l.Index, r.Source)
				}
				ids = []int{l.Stop}
			}
			it.Response = ids
		}
		v.Items[i] = it
	}
	return v, nil
}
