package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/hacrl/hacrl/internal/kernel"
)

// Batch decodes a changing set of sequences together on the native engine
// (continuous batching). Each Step feeds every live sequence the token it
// sampled last, prefills the sequences that join in free rows of the
// key/value cache, and samples one new token for each. A sequence leaves
// when it ends (a stop token or its limit) or is cancelled, and its row
// takes the next waiting sequence at the following step.
//
// Every sequence samples with its own options and random stream, and on the
// native engine a row's logits do not depend on which rows share its steps,
// so a sequence gets the same tokens, bit for bit, whether decoded alone or
// among others, and whichever step it joined at. Generate runs a Batch to
// the end; a server keeps one running and adds requests as they arrive.
//
// The model's weights must not change while sequences are live: the batch
// holds the model's read lock from the step a sequence first joins until
// none is live (an update waits for that). A Batch is not safe for
// concurrent use.
type Batch struct {
	m       *Model
	cache   *kvCache
	live    []*sequence // by cache row; nil is a free row
	wait    []*sequence // added and waiting for a row, in order
	nextID  int
	smp     sampler
	dec     *decoder // held while a sequence is live
	release func()
	one     [][]int // per-entry token scratch
}

// sequence is one Add's state.
type sequence struct {
	id     int
	prompt []int
	opt    SampleOptions
	rng    *rand.Rand
	limit  int // new tokens allowed
	n      int // new tokens sampled so far
	last   int // the token sampled last, fed at the next step
}

// Token is one sequence's new token from a Step.
type Token struct {
	Seq     int     // the id Add returned
	ID      int     // the token
	LogProb float32 // its log-prob under the unfiltered, temperature-1 distribution
	// Top are the TopLogProbs most likely tokens with their log-probs, in
	// decreasing order (ties by id), when the sequence's options ask.
	Top     []TokenLogProb
	Done    bool // the sequence ended with this token (stop token or limit) and left the batch
	Stopped bool // it ended with a stop token
}

// TokenLogProb is a token with its log-prob.
type TokenLogProb struct {
	ID      int
	LogProb float32
}

// NewBatch returns a batch of rows cache rows of slots positions each: at
// most rows sequences are decoded at once, and a sequence's prompt and new
// tokens (all but its last) fit slots. It needs the native engine (a float32
// model); the graph engine decodes fixed batches through Generate.
func (m *Model) NewBatch(rows, slots int) (*Batch, error) {
	switch {
	case !m.native():
		return nil, fmt.Errorf("model: NewBatch: the %s engine has no continuous batching; use Generate", m.EngineName())
	case rows <= 0:
		return nil, fmt.Errorf("model: NewBatch: %d rows, want > 0", rows)
	case slots < 1 || slots > m.cfg.MaxSeq:
		return nil, fmt.Errorf("model: NewBatch: %d slots, want 1 to the model's %d positions", slots, m.cfg.MaxSeq)
	}
	dec, release, err := m.samplingDecoder()
	if err != nil {
		return nil, err
	}
	// The cache is not an arena's: an arena keeps its buffers between calls,
	// and a batch's cache is gigabytes at real sizes (64 rows of Qwen3-0.6B
	// over 420 slots: 6 GB) that the model would then hold for good.
	cache := dec.newCache(rows, slots)
	release()
	return &Batch{m: m, cache: cache, live: make([]*sequence, rows), one: make([][]int, rows)}, nil
}

// Add queues a sequence: prompt continued with opt (opt.MaxBatch is not
// read) and rng (nil only for greedy decoding). It joins the batch at the
// first Step with a free row. The returned id names its Tokens.
func (b *Batch) Add(prompt []int, opt SampleOptions, rng *rand.Rand) (int, error) {
	if err := b.m.checkGenerate([][]int{prompt}, opt); err != nil {
		return 0, err
	}
	if rng == nil && !opt.greedy() {
		return 0, fmt.Errorf("model: Batch.Add: rng is nil")
	}
	slots := b.cache.slots
	if len(prompt) > slots {
		return 0, fmt.Errorf("model: Batch.Add: prompt of %d tokens, want at most the batch's %d slots", len(prompt), slots)
	}
	// The last new token is never fed back, so it needs no slot.
	limit := min(opt.MaxNewTokens, b.m.cfg.MaxSeq-len(prompt), slots-len(prompt)+1)
	s := &sequence{id: b.nextID, prompt: slices.Clone(prompt), opt: opt, rng: rng, limit: limit}
	b.nextID++
	b.wait = append(b.wait, s)
	return s.id, nil
}

// Len is the number of sequences live or waiting.
func (b *Batch) Len() int {
	n := len(b.wait)
	for _, s := range b.live {
		if s != nil {
			n++
		}
	}
	return n
}

// Cancel removes sequence id, live or waiting, freeing its row; it reports
// whether the sequence was there.
func (b *Batch) Cancel(id int) bool {
	for r, s := range b.live {
		if s != nil && s.id == id {
			b.live[r] = nil
			b.releaseIfIdle()
			return true
		}
	}
	for i, s := range b.wait {
		if s.id == id {
			b.wait = slices.Delete(b.wait, i, i+1)
			return true
		}
	}
	return false
}

// Close ends the batch, dropping what is live or waiting; the cache is
// garbage once the Batch is.
func (b *Batch) Close() {
	clear(b.live)
	b.wait = nil
	b.releaseIfIdle()
}

// Step decodes one token for every live sequence, after admitting waiting
// ones into free rows (as many as passTokenBudget prompt tokens allow, and
// at least one when nothing else runs). It returns the new tokens, one per
// sequence decoded, in cache-row order; none when nothing is live or
// waiting.
func (b *Batch) Step(ctx context.Context) ([]Token, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, feed := b.entries()
	if len(rows) == 0 {
		return nil, nil
	}
	if b.dec == nil {
		dec, release, err := b.m.samplingDecoder()
		if err != nil {
			return nil, err
		}
		b.dec, b.release = dec, release
	}
	logits := b.dec.forward(b.cache, rows, feed)
	V := b.m.cfg.Vocab
	out := make([]Token, len(rows))
	for e, r := range rows {
		out[e] = b.sample(b.live[r], logits[e*V:(e+1)*V])
		if out[e].Done {
			b.live[r] = nil
		}
	}
	b.releaseIfIdle()
	return out, nil
}

// entries lists this step's forward entries: each live row with its last
// token, then waiting sequences admitted into free rows with their prompts.
func (b *Batch) entries() (rows []int, feed [][]int) {
	tokens := 0
	for r, s := range b.live {
		if s != nil {
			b.one[r] = append(b.one[r][:0], s.last)
			rows, feed = append(rows, r), append(feed, b.one[r])
			tokens++
		}
	}
	for r := range b.live {
		if len(b.wait) == 0 {
			break
		}
		if b.live[r] != nil {
			continue
		}
		s := b.wait[0]
		if len(rows) > 0 && tokens+len(s.prompt) > passTokenBudget {
			break
		}
		b.wait = b.wait[1:]
		b.live[r] = s
		b.cache.length[r] = 0
		rows, feed = append(rows, r), append(feed, s.prompt)
		tokens += len(s.prompt)
	}
	return rows, feed
}

// sample draws s's next token from its logits row.
func (b *Batch) sample(s *sequence, logits []float32) Token {
	tok, lp := b.smp.pick(logits, s.opt, s.rng)
	s.n++
	s.last = tok
	t := Token{Seq: s.id, ID: tok, LogProb: float32(lp), Stopped: slices.Contains(s.opt.Stop, tok)}
	t.Done = t.Stopped || s.n >= s.limit
	if k := s.opt.TopLogProbs; k > 0 {
		if v := s.opt.Vocab; v > 0 {
			logits = logits[:v]
		}
		t.Top = b.smp.top(logits, k, float64(logits[tok])-lp)
	}
	return t
}

// releaseIfIdle gives back the model's read lock when no sequence is live.
func (b *Batch) releaseIfIdle() {
	if b.dec == nil || slices.ContainsFunc(b.live, func(s *sequence) bool { return s != nil }) {
		return
	}
	b.release()
	b.dec, b.release = nil, nil
}

// top returns the k most likely ids of logits (ties by id) with their
// log-probs given the row's log-sum-exp lse; a row with a NaN has none.
func (s *sampler) top(logits []float32, k int, lse float64) []TokenLogProb {
	if lse != lse {
		return nil
	}
	k = min(k, len(logits))
	head := s.sortedHead(logits, kernel.Max(logits), 1, k, 0)[:k]
	out := make([]TokenLogProb, k)
	for i, c := range head {
		out[i] = TokenLogProb{ID: int(c), LogProb: float32(float64(logits[c]) - lse)}
	}
	return out
}
