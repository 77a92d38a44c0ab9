package serve

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/hacrl/hacrl/model"
)

// choice is one sequence of a request as the handler assembles it.
type choice struct {
	index  int
	prompt *prompt
	seq    *seqJob // nil when nothing is generated (echo with max_tokens 0)
	ids    []int
	lps    []float32
	tops   [][]model.TokenLogProb
	stopID bool   // it ended with a stop token (left out of the text)
	finish string // "stop" or "length"; "" while decoding
	text   string // the text of the tokens so far, cut at a stop string
	sent   int    // bytes of text streamed
	sentLP int    // tokens whose log-probs were streamed
}

// result is a request's choices and what they were sampled with.
type result struct {
	p         *params
	choices   []*choice
	version   string
	model     *model.Model
	promptLPs [][]float32 // per prompt, with echo and log-probs: the log-prob of each prompt token after the first
}

// usage counts a result's tokens as OpenAI does: each prompt once.
func (r *result) usage() map[string]int {
	pt, ct := 0, 0
	for _, pr := range r.p.prompts {
		pt += len(pr.ids)
	}
	for _, c := range r.choices {
		ct += len(c.ids)
	}
	return map[string]int{"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
}

// run decodes p's choices: onStart is called once the weights are known
// (and the prompts scored, with echo), onStep after each step with the
// choices that changed; either's error ends the request. Without a
// callback it returns when every choice has ended.
func (s *Server) run(ctx context.Context, p *params, onStart func(*result) error, onStep func(*result, []*choice) error) (*result, error) {
	res := &result{p: p, choices: make([]*choice, p.choices())}
	for i := range res.choices {
		res.choices[i] = &choice{index: i, prompt: &p.prompts[i/p.n]}
	}
	if p.maxTokens == 0 { // echo alone: score the prompts
		cur := s.sched.current.Load()
		res.version, res.model = cur.version, cur.model
		for _, c := range res.choices {
			c.finish = "length"
		}
		if err := s.scorePrompts(ctx, res); err != nil {
			return nil, err
		}
		return res, callbacks(res, res.choices, onStart, onStep)
	}
	seqs := make([]*seqJob, len(res.choices))
	for i, c := range res.choices {
		var rng *rand.Rand
		if !p.opt.Greedy {
			rng = model.SeedStream(p.seed, i)
		}
		seqs[i] = &seqJob{prompt: c.prompt.ids, opt: p.opt, rng: rng}
		c.seq = seqs[i]
	}
	j := newJob(ctx, seqs)
	if err := s.sched.enqueue(ctx, j); err != nil {
		return nil, err
	}
	var st started
	select {
	case st = <-j.start:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if st.err != nil {
		return nil, st.err
	}
	res.version, res.model = st.version, st.model
	if err := s.scorePrompts(ctx, res); err != nil {
		return nil, err
	}
	if onStart != nil {
		if err := onStart(res); err != nil {
			return nil, err
		}
	}
	for {
		evs, done, err := j.next()
		if done {
			if err != nil {
				return res, err
			}
			return res, nil
		}
		var changed []*choice
		for _, ev := range evs {
			c := res.choices[ev.Choice]
			if s.add(c, ev.Token, p.stopStrings, onStep != nil) && !slices.Contains(changed, c) {
				changed = append(changed, c)
			}
		}
		if onStep != nil && len(changed) > 0 {
			if err := onStep(res, changed); err != nil {
				return res, err
			}
		}
	}
}

func callbacks(res *result, cs []*choice, onStart func(*result) error, onStep func(*result, []*choice) error) error {
	if onStart != nil {
		if err := onStart(res); err != nil {
			return err
		}
	}
	if onStep != nil {
		return onStep(res, cs)
	}
	return nil
}

// scorePrompts sets res.promptLPs when the request echoes the prompt with
// log-probs: each prompt scored by the weights its choices sample with.
func (s *Server) scorePrompts(ctx context.Context, res *result) error {
	p := res.p
	if !p.echo || p.logprobs < 0 {
		return nil
	}
	res.promptLPs = make([][]float32, len(p.prompts))
	var seqs []model.Sequence
	var which []int
	for i, pr := range p.prompts {
		if len(pr.ids) > 1 {
			seqs = append(seqs, model.Sequence{Prompt: pr.ids[:1], Response: pr.ids[1:]})
			which = append(which, i)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	sc, err := res.model.Score(ctx, seqs, false)
	if err != nil {
		return err
	}
	for k, i := range which {
		res.promptLPs[i] = sc.LogProbs[k]
	}
	return nil
}

// add takes choice c's next token and reports whether c changed: the
// text is decoded again and cut at the first stop string, which ends the
// choice (its sequence is halted). The text is decoded at every token only
// when it is streamed (stream) or searched for stop strings, else once at
// the end: decoding a whole response per token costs its length squared.
func (s *Server) add(c *choice, t model.Token, stops []string, stream bool) bool {
	if c.finish != "" {
		return false // ended at a stop string; tokens decoded meanwhile are dropped
	}
	c.ids, c.lps, c.tops = append(c.ids, t.ID), append(c.lps, t.LogProb), append(c.tops, t.Top)
	if t.Done {
		c.finish, c.stopID = "length", t.Stopped
		if t.Stopped {
			c.finish = "stop"
		}
	}
	if !stream && len(stops) == 0 && !t.Done {
		return true
	}
	body := c.ids
	if c.stopID {
		body = body[:len(body)-1]
	}
	c.text = s.cfg.Tok.Decode(body)
	if i, ok := stopAt(c.text, stops); ok {
		c.text, c.finish = c.text[:i], "stop"
		if !t.Done {
			c.seq.halt.Store(true)
		}
	}
	return true
}

// stopAt is where the first of stops starts in text.
func stopAt(text string, stops []string) (int, bool) {
	best := -1
	for _, st := range stops {
		if i := strings.Index(text, st); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best, best >= 0
}

// pending is the text of c ready to stream: all of it once c ended; else
// without a trailing incomplete character or a tail that may begin a stop
// string.
func pending(c *choice, stops []string) string {
	t := c.text
	if c.finish == "" {
		t = strings.TrimRight(t, "\uFFFD")
		hold := 0
		for _, st := range stops {
			for k := min(len(st)-1, len(t)); k > hold; k-- {
				if strings.HasSuffix(t, st[:k]) {
					hold = k
					break
				}
			}
		}
		t = t[:len(t)-hold]
	}
	if len(t) <= c.sent {
		return ""
	}
	return t[c.sent:]
}

// tokenText is how a token is written in log-probs.
func (s *Server) tokenText(id int, asID bool) string {
	if asID {
		return "token_id:" + strconv.Itoa(id)
	}
	return s.cfg.Tok.Decode([]int{id})
}
