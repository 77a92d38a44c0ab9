package model

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best dot-imported
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/hacrl/hacrl/internal/kernel"
)

// SampleOptions controls Generate. Temperature 0 is greedy decoding, so the
// zero value (with MaxNewTokens set) decodes greedily; Temperature 1 with no
// top-k or top-p filtering samples from the model's own distribution.
// Sampling works on float32 logits (a float64 model's are rounded to
// float32) with float32 weights, within a few ulps of the exact ones.
type SampleOptions struct {
	MaxNewTokens int     // at most this many tokens per sequence (> 0)
	Temperature  float64 // divides the logits; 0 means greedy (as Greedy), the limit of T → 0
	TopP         float64 // nucleus sampling: keep the smallest set of tokens with mass ≥ TopP; 0 or 1 means off
	TopK         int     // keep only the TopK most likely tokens; 0 means off
	Greedy       bool    // take the most likely token (the lowest id among ties); ignores Temperature, TopP and TopK
	Stop         []int   // token ids that end a sequence (e.g. EOS)
	// Vocab, when > 0, limits sampling to token ids below it: the tokenizer's
	// size when the model's vocabulary is padded beyond the tokenizer (as
	// Qwen2.5's 151936 rows for 151665 tokens). Ids at or above Vocab are
	// never sampled, greedily or not; the log-probs Generate and Score report
	// stay those of the model's whole vocabulary. 0 means every id.
	Vocab int
	// TopLogProbs, when > 0, makes a Batch report with each token the
	// TopLogProbs most likely tokens of its step (Token.Top).
	TopLogProbs int
	// MaxBatch is the most sequences Generate decodes at once; 0 means as
	// many as fit a 2 GiB key/value cache, at least 16. It changes memory
	// and speed, never the tokens.
	MaxBatch int
}

// greedy reports whether opt decodes greedily: Greedy, or temperature 0.
func (opt SampleOptions) greedy() bool { return opt.Greedy || opt.Temperature == 0 }

// Sample is one generated continuation.
type Sample struct {
	Tokens   []int     // the new tokens, a final stop token included
	LogProbs []float32 // log-prob of each token under the model's raw distribution (temperature 1, unfiltered)
	Stopped  bool      // ended with a stop token (else it reached MaxNewTokens or the model's MaxSeq)
}

// Engine chooses how a model runs: on the backend's compiled graphs or on
// the native CPU decoder (native.go, native_train.go).
type Engine string

const (
	// EngineAuto runs float32 models on the Go (CPU) backend natively and
	// everything else on the backend's graphs.
	EngineAuto Engine = ""
	// EngineNative runs a float32 model on the host CPU whatever the
	// backend (a float64 model still runs on graphs).
	EngineNative Engine = "native"
	// EngineGraph runs everything, the optimizer step included, as compiled
	// graphs on the model's backend (the path for GPUs).
	EngineGraph Engine = "graph"
)

// ParseEngine reads an engine name as configs and flags spell it: auto (or
// empty), native or graph.
func ParseEngine(name string) (Engine, error) {
	switch name {
	case "", "auto":
		return EngineAuto, nil
	case string(EngineNative), string(EngineGraph):
		return Engine(name), nil
	}
	return "", fmt.Errorf("model: engine %q: want auto, native or graph", name)
}

// Generate continues each prompt by sampling on the host, one token per
// step, with a key/value cache. A sequence ends at a stop token, after
// MaxNewTokens tokens, or when it fills the model's MaxSeq positions.
//
// Prompt i samples from its own random stream, SeedStream(RowSeeds(rng,
// len(prompts))[i], 0), and both engines give each row its own positions (0 at its
// first prompt token), so a row's tokens do not depend on its batch
// neighbours: on the native engine not in a single bit, on the graph engine
// up to float rounding (prompts of different lengths are left-padded to a
// common length bucket with the padding masked out of attention, and the
// batch is padded to a power of two rows). At most opt.MaxBatch sequences
// are decoded at once: the native engine starts the next prompt in the row
// of each sequence that ends (a Batch), the graph engine decodes the
// prompts in chunks. Given the same model, prompts, options, engine and rng
// state, the result is the same, whatever MaxBatch is.
func (m *Model) Generate(ctx context.Context, prompts [][]int, opt SampleOptions, rng *rand.Rand) ([]Sample, error) {
	if err := m.checkGenerate(prompts, opt); err != nil {
		return nil, err
	}
	if rng == nil && !opt.greedy() {
		return nil, fmt.Errorf("model: Generate: rng is nil")
	}
	streams := make([]*rand.Rand, len(prompts))
	if !opt.greedy() {
		for i, seed := range RowSeeds(rng, len(prompts)) {
			streams[i] = SeedStream(seed, 0)
		}
	}
	longest, steps := 0, 0
	for _, p := range prompts {
		longest, steps = max(longest, len(p)), max(steps, min(opt.MaxNewTokens, m.cfg.MaxSeq-len(p)))
	}
	slots := min(m.cfg.MaxSeq, longest+steps)
	rows := min(len(prompts), m.batchRows(opt.MaxBatch, slots))
	if m.native() {
		return m.generateNative(ctx, prompts, opt, streams, rows, slots)
	}
	samples := make([]Sample, len(prompts))
	for lo := 0; lo < len(prompts); lo += rows {
		hi := min(lo+rows, len(prompts))
		if err := m.generateGraph(ctx, prompts[lo:hi], opt, streams[lo:hi], samples[lo:hi]); err != nil {
			return nil, err
		}
	}
	return samples, nil
}

// RowSeeds draws n seeds from rng, one per row in row order: the seeds of
// the streams Generate samples the rows from. A client that samples row i
// elsewhere (a server taking a request seed, as hacrl serve does) with seed
// RowSeeds(rng, n)[i] gets the draws Generate would make.
func RowSeeds(rng *rand.Rand, n int) []uint64 {
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = rng.Uint64()
	}
	return seeds
}

// SeedStream is the random stream of the k-th sequence sampled with seed
// (k = 0 for a single one; a server's k-th choice of one request).
func SeedStream(seed uint64, k int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(k)))
}

// kvCacheBudget is the key/value cache Generate decodes within when
// SampleOptions.MaxBatch is 0: as many rows as fit it, and at least
// minAutoRows (on this project's CPUs decoding 16 rows at once is within
// about 10% of 64 rows' throughput).
const (
	kvCacheBudget = 2 << 30
	minAutoRows   = 16
)

// batchRows is how many rows Generate decodes at once: maxBatch when set,
// else as many as a cache of slots positions per row fits in kvCacheBudget.
func (m *Model) batchRows(maxBatch, slots int) int {
	if maxBatch > 0 {
		return maxBatch
	}
	perRow := 2 * m.cfg.Layers * m.cfg.KVHeads * m.cfg.HeadDim() * slots * m.dtype.Size()
	return max(minAutoRows, kvCacheBudget/max(perRow, 1))
}

// generateNative decodes prompts in a Batch of rows rows.
func (m *Model) generateNative(ctx context.Context, prompts [][]int, opt SampleOptions, streams []*rand.Rand, rows, slots int) ([]Sample, error) {
	b, err := m.NewBatch(rows, slots)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	for i, p := range prompts {
		if _, err := b.Add(p, opt, streams[i]); err != nil { // ids are 0, 1, …
			return nil, err
		}
	}
	samples := make([]Sample, len(prompts))
	for b.Len() > 0 {
		tokens, err := b.Step(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range tokens {
			s := &samples[t.Seq]
			s.Tokens = append(s.Tokens, t.ID)
			s.LogProbs = append(s.LogProbs, t.LogProb)
			s.Stopped = t.Stopped
		}
	}
	return samples, nil
}

// generateGraph decodes prompts in one batch on the graph engine, row i
// sampling from streams[i], into samples.
func (m *Model) generateGraph(ctx context.Context, prompts [][]int, opt SampleOptions, streams []*rand.Rand, samples []Sample) error {
	limit := make([]int, len(prompts)) // new tokens allowed per row
	longest, steps := 0, 0
	for i, p := range prompts {
		limit[i] = min(opt.MaxNewTokens, m.cfg.MaxSeq-len(p))
		longest, steps = max(longest, len(p)), max(steps, limit[i])
	}
	run, err := m.graphRun(prompts, longest, steps)
	if err != nil {
		return err
	}
	logits, err := run.start()
	if err != nil {
		return err
	}
	var smp sampler
	V := m.cfg.Vocab
	var rows, next []int
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rows, next = rows[:0], next[:0]
		for i := range prompts {
			s := &samples[i]
			if s.Stopped || len(s.Tokens) >= limit[i] {
				continue
			}
			tok, lp := smp.pick(logits[i*V:(i+1)*V], opt, streams[i])
			s.Tokens = append(s.Tokens, tok)
			s.LogProbs = append(s.LogProbs, float32(lp))
			s.Stopped = slices.Contains(opt.Stop, tok)
			if !s.Stopped && len(s.Tokens) < limit[i] {
				rows, next = append(rows, i), append(next, tok)
			}
		}
		if len(rows) == 0 {
			return nil
		}
		if logits, err = run.step(rows, next); err != nil {
			return err
		}
	}
}

// decodeRun is one batch decoded on the graph engine. start returns the
// logits after each prompt; step feeds tokens[i] to row rows[i] (the rows
// still sampling) and returns the next logits. Both return [rows·V] indexed
// by prompt row; entries of rows not fed are unspecified. The logits are
// float32 whatever the model's dtype: a float64 model's are rounded to
// float32 before sampling, which moves a log-prob by about 1e-7 relative,
// far below what sampling can tell apart.
type decodeRun struct {
	start func() ([]float32, error)
	step  func(rows, tokens []int) ([]float32, error)
}

// EngineName is the engine the model runs on now: "native" or "graph".
func (m *Model) EngineName() string {
	if m.native() {
		return string(EngineNative)
	}
	return string(EngineGraph)
}

// native reports whether the model runs on the native decoder.
func (m *Model) native() bool {
	if m.bf16 {
		return false
	}
	switch m.engine {
	case EngineNative:
		return m.dtype == dtypes.Float32
	case EngineGraph:
		return false
	}
	return m.dtype == dtypes.Float32 && m.backend.String() == "go"
}

// graphRun decodes with the prefill and decode graphs on the backend.
func (m *Model) graphRun(prompts [][]int, longest, steps int) (decodeRun, error) {
	rows := len(prompts)
	B := batchBucket(rows)
	P := lengthBucket(longest)
	S := lengthBucket(P + steps - 1) // cache slots: the last sampled token is never fed back

	tokens := make([]int32, B*P)
	pad := make([]int32, B)
	for i := range B {
		p := []int{0} // filler rows of the batch bucket
		if i < rows {
			p = prompts[i]
		}
		pad[i] = int32(P - len(p))
		for j, t := range p {
			tokens[i*P+int(pad[i])+j] = int32(t)
		}
	}
	padT := tensors.FromFlatDataAndDimensions(pad, B)
	params := m.snapshot()
	var cache []*tensors.Tensor
	slot := P
	next := make([]int32, B)
	return decodeRun{
		start: func() ([]float32, error) {
			out, err := call(m.prefillExec(), params,
				tensors.FromFlatDataAndDimensions(tokens, B, P), padT, tensors.FromShape(shapes.Make(dtypes.Int32, S)))
			if err != nil {
				return nil, err
			}
			cache = out[1:]
			return float32s(out[0]), nil
		},
		step: func(active, toks []int) ([]float32, error) {
			clear(next)
			for i, r := range active {
				next[r] = int32(toks[i])
			}
			args := []any{tensors.FromFlatDataAndDimensions(next, B), tensors.FromScalar(int32(slot)), padT}
			slot++
			for _, c := range cache {
				d, err := DonateTensorBuffer(c, m.backend, compute.DeviceNum(0))
				if err != nil {
					return nil, fmt.Errorf("model: Generate: %w", err)
				}
				args = append(args, d)
			}
			cache = nil // donated: gone even if the call fails
			out, err := call(m.decodeExec(), params, args...)
			if err != nil {
				return nil, err
			}
			cache = out[1:]
			return float32s(out[0]), nil
		},
	}, nil
}

func (m *Model) checkGenerate(prompts [][]int, opt SampleOptions) error {
	switch {
	case len(prompts) == 0:
		return fmt.Errorf("model: Generate: no prompts")
	case opt.MaxNewTokens <= 0:
		return fmt.Errorf("model: Generate: MaxNewTokens is %d, want > 0", opt.MaxNewTokens)
	case opt.Temperature < 0 || math.IsNaN(opt.Temperature):
		return fmt.Errorf("model: Generate: Temperature is %v, want ≥ 0", opt.Temperature)
	case opt.TopP < 0 || opt.TopP > 1 || math.IsNaN(opt.TopP):
		return fmt.Errorf("model: Generate: TopP is %v, want within [0,1]", opt.TopP)
	case opt.TopK < 0:
		return fmt.Errorf("model: Generate: TopK is %d, want ≥ 0", opt.TopK)
	case opt.TopLogProbs < 0:
		return fmt.Errorf("model: Generate: TopLogProbs is %d, want ≥ 0", opt.TopLogProbs)
	case opt.MaxBatch < 0:
		return fmt.Errorf("model: Generate: MaxBatch is %d, want ≥ 0 (0: automatic)", opt.MaxBatch)
	case opt.Vocab < 0 || opt.Vocab > m.cfg.Vocab:
		return fmt.Errorf("model: Generate: Vocab is %d, want 0 (all) to the model's vocabulary of %d", opt.Vocab, m.cfg.Vocab)
	}
	for i, p := range prompts {
		if len(p) == 0 || len(p) >= m.cfg.MaxSeq {
			return fmt.Errorf("model: Generate: prompt %d has %d tokens, want 1 to %d", i, len(p), m.cfg.MaxSeq-1)
		}
		for j, t := range p {
			if t < 0 || t >= m.cfg.Vocab {
				return fmt.Errorf("model: Generate: prompt %d token %d is %d, outside the vocabulary [0,%d)", i, j, t, m.cfg.Vocab)
			}
		}
	}
	return nil
}

// prefillExec runs left-padded prompts [B,P] (pad [B] padding slots each) and
// returns the last position's logits [B,V] and the caches of each layer, keys
// [B,KVH,Dh,S] and values [B,KVH,S,Dh], with S the length of the third input.
func (m *Model) prefillExec() *Exec {
	return m.exec("prefill", func(n *net, in []*Node) []*Node {
		tokens, pad, slots := in[0], in[1], in[2]
		g := tokens.Graph()
		B, P, S := tokens.Shape().Dimensions[0], tokens.Shape().Dimensions[1], slots.Shape().Dimensions[0]
		h, kv := n.forward(tokens, newAttention(Iota(g, shapes.Make(dtypes.Int32, P), 0), pad, P))
		last := Slice(h, AxisRange(), AxisRange(P-1, P))
		out := []*Node{Reshape(n.head(last), B, n.cfg.Vocab)}
		zero := ScalarZero(g, h.DType())
		for i, c := range kv { // keys [B,KVH,Dh,P], values [B,KVH,P,Dh]
			axes := make([]compute.PadAxis, 4)
			axes[3-i%2] = compute.PadAxis{End: S - P}
			out = append(out, Pad(c, zero, axes...))
		}
		return out
	})
}

// decodeExec feeds one token per row [B] at cache slot (a scalar) and returns
// the next logits [B,V] and the updated caches.
func (m *Model) decodeExec() *Exec {
	return m.exec("decode", func(n *net, in []*Node) []*Node {
		tok, slot, pad, cache := in[0], in[1], in[2], in[3:]
		B, S := tok.Shape().Dimensions[0], cache[1].Shape().Dimensions[2]
		at := newAttention(Reshape(slot, 1), pad, S)
		at.cache, at.slot = cache, slot
		h, kv := n.forward(Reshape(tok, B, 1), at)
		return append([]*Node{Reshape(n.head(h), B, n.cfg.Vocab)}, kv...)
	})
}

// sampler draws tokens from rows of float32 logits, keeping its scratch
// space from one draw to the next (a Generate call holds one). Its work per
// draw over the whole vocabulary is vector code of internal/kernel — the
// maximum, the exponentials, and for top-k or top-p the ids within a margin
// of the best logit — and scalar work only over a block of sampleBlock ids
// and the few candidates the margin leaves.
type sampler struct {
	e      []float32 // exp((x − max)/T) of the candidate ids
	blocks []float64 // Σ e per block of sampleBlock ids
	pad    []float32 // scratch for the padding ids' exponentials
	x, w   []float32 // the filtered candidates' logits and weights
	head   []int32   // candidate ids within the margin, then sorted
	keys   []uint64  // head's sort keys
	tmp    []uint64  // radix sort scratch
}

// sampleBlock is how many ids the weights are summed over per block: a
// draw walks the block sums, then one block.
const sampleBlock = 1024

// pick chooses the next token from one row of logits and returns it with
// its log-probability under the unfiltered, temperature-1 distribution over
// the whole row. Only ids below opt.Vocab (when set) are candidates.
//
// Greedy takes the largest logit, the lowest id among ties. Otherwise the
// token is drawn with weight exp((x − max)/T): from all candidates, from
// the TopK largest (ties by id), and with TopP from the smallest set in
// decreasing-logit order (ties by id) whose weight reaches TopP of the
// total (the top k's total with TopK too). Weights are float32 (within a
// few ulps of the exact ones), added in float64 in a fixed order, so the
// same logits and rng state give the same token whatever the machine's
// cores. A row with a NaN logit has a NaN log-prob and gives its greedy
// token among the logits that are not NaN (0 if none is).
func (s *sampler) pick(logits []float32, opt SampleOptions, rng *rand.Rand) (int, float64) {
	full := logits
	if opt.Vocab > 0 && opt.Vocab < len(logits) {
		logits = logits[:opt.Vocab]
	}
	top := kernel.Max(logits)
	sum := s.weigh(logits, top, 1)
	lse := float64(top) + math.Log(sum)
	if rest := full[len(logits):]; len(rest) > 0 { // padding ids keep their mass
		lse = logAddExp(lse, s.lseOf(rest))
	}
	if math.IsNaN(sum) { // a NaN logit (or +Inf): nothing to weigh
		best := 0
		for i, x := range logits {
			if x > logits[best] || !isNaN32(x) && isNaN32(logits[best]) {
				best = i
			}
		}
		return best, math.NaN()
	}
	if opt.greedy() {
		best := kernel.FirstAtLeast(logits, top)
		return best, float64(logits[best]) - lse
	}
	temp := opt.Temperature
	scale := float32(min(1/temp, math.MaxFloat32))
	topK := opt.TopK > 0 && opt.TopK < len(logits)
	topP := opt.TopP > 0 && opt.TopP < 1
	total := sum
	if temp != 1 && !topK { // top-k weighs only its candidates
		total = s.weigh(logits, top, scale)
	}
	if !topK && !topP {
		c := s.draw(rng.Float64() * total)
		return c, float64(logits[c]) - lse
	}
	// Candidates in decreasing logit order with their weights w; total is
	// the mass the nucleus is measured against: all tokens', or the top k's.
	var cand []int32
	if topK {
		cand = s.sortedHead(logits, top, temp, opt.TopK, 0)[:opt.TopK]
		s.x = grow(s.x, len(cand))
		for i, c := range cand {
			s.x[i] = logits[c]
		}
		s.w = grow(s.w, len(cand))
		total = kernel.ExpScaled(s.w, s.x, top, scale)
	} else {
		cand = s.sortedHead(logits, top, temp, 0, opt.TopP*total)
		s.w = grow(s.w, len(cand))
		for i, c := range cand {
			s.w[i] = s.e[c]
		}
	}
	w := s.w
	if topP {
		mass := 0.0
		for i := range w {
			mass += float64(w[i])
			if mass >= opt.TopP*total {
				cand, w = cand[:i+1], w[:i+1]
				break
			}
		}
		total = mass
	}
	u := rng.Float64() * total
	for i, c := range cand {
		if u -= float64(w[i]); u < 0 {
			return int(c), float64(logits[c]) - lse
		}
	}
	c := lastWeighed(w, cand) // u ran past the end by rounding
	return c, float64(logits[c]) - lse
}

// isNaN32 reports whether x is NaN.
func isNaN32(x float32) bool { return x != x }

// weigh sets s.e to exp((x − top)·scale) over logits, with each block's sum
// in s.blocks, and returns the total (NaN if a logit is NaN).
func (s *sampler) weigh(logits []float32, top, scale float32) float64 {
	n := len(logits)
	s.e = grow(s.e, n)
	s.blocks = s.blocks[:0]
	total := 0.0
	for lo := 0; lo < n; lo += sampleBlock {
		hi := min(lo+sampleBlock, n)
		b := kernel.ExpScaled(s.e[lo:hi], logits[lo:hi], top, scale)
		s.blocks = append(s.blocks, b)
		total += b
	}
	return total
}

// draw is the id where the running sum of the weights s.e passes u (one of
// [0, their total)): the block where the block sums pass it, then the id in
// that block.
func (s *sampler) draw(u float64) int {
	for b, sum := range s.blocks {
		if u >= sum {
			u -= sum
			continue
		}
		lo := b * sampleBlock
		block := s.e[lo:min(lo+sampleBlock, len(s.e))]
		for i, w := range block {
			if u -= float64(w); u < 0 {
				return lo + i
			}
		}
		for i := len(block) - 1; i >= 0; i-- { // u ran past the block by rounding
			if block[i] > 0 {
				return lo + i
			}
		}
	}
	for i := len(s.e) - 1; i > 0; i-- { // u ran past the total by rounding
		if s.e[i] > 0 {
			return i
		}
	}
	return 0
}

// lastWeighed is the last of cand with a positive weight w (cand[0] if
// none).
func lastWeighed(w []float32, cand []int32) int {
	for i := len(cand) - 1; i > 0; i-- {
		if w[i] > 0 {
			return int(cand[i])
		}
	}
	return int(cand[0])
}

// sortedHead returns the most likely tokens in decreasing logit order (ties
// by id): at least k of them, and enough that their weights s.e reach mass.
// It sorts only the tokens within a margin of the best logit, widening the
// margin until that holds, so that a large vocabulary is not sorted whole
// for every sampled token; the result is a prefix of the full order. The
// logits hold no NaN.
func (s *sampler) sortedHead(logits []float32, top float32, temp float64, k int, mass float64) []int32 {
	for _, margin := range []float64{8, 10, 12, 16, 24, 32, 64, math.Inf(1)} {
		s.head = kernel.IndexAtLeast(s.head[:0], logits, top-float32(margin*temp))
		got := 0.0
		if mass > 0 {
			for _, c := range s.head {
				got += float64(s.e[c])
			}
		}
		if len(s.head) >= k && got >= mass {
			break
		}
	}
	s.keys = grow(s.keys, len(s.head))
	for i, c := range s.head {
		s.keys[i] = uint64(^orderedBits(logits[c]))<<32 | uint64(c)
	}
	if mass == 0 && 4*k < len(s.keys) { // only the first k count
		s.keys = smallest(s.keys, k)
		s.head = s.head[:k]
	}
	if len(s.keys) < 256 {
		slices.Sort(s.keys)
	} else {
		s.tmp = grow(s.tmp, len(s.keys))
		radixSortHigh(s.keys, s.tmp)
	}
	for i, key := range s.keys {
		s.head[i] = int32(uint32(key))
	}
	return s.head
}

// smallest moves the k smallest of keys (k > 0) to its front, in no
// particular order, and returns them: a max-heap of the k smallest so far,
// each further key compared with its root.
func smallest(keys []uint64, k int) []uint64 {
	h := keys[:k]
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	for _, key := range keys[k:] {
		if key < h[0] {
			h[0] = key
			siftDown(h, 0)
		}
	}
	return h
}

// siftDown restores the max-heap order of h below node i.
func siftDown(h []uint64, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1] > h[c] {
			c++
		}
		if h[i] >= h[c] {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// orderedBits maps a float32 that is not NaN to a uint32 of the same order
// (−0 and +0 alike).
func orderedBits(x float32) uint32 {
	if x == 0 {
		x = 0
	}
	b := math.Float32bits(x)
	if b>>31 != 0 {
		return ^b
	}
	return b | 1<<31
}

// radixSortHigh sorts keys by their upper 32 bits, stably (keys of equal
// upper halves keep their order), with tmp as scratch of the same length.
func radixSortHigh(keys, tmp []uint64) {
	src, dst := keys, tmp
	for shift := 32; shift < 64; shift += 8 {
		var count [257]int
		for _, k := range src {
			count[(k>>shift)&0xff+1]++
		}
		if slices.Contains(count[1:], len(src)) {
			continue // one byte value: the pass would not move a key
		}
		for i := 1; i < 257; i++ {
			count[i] += count[i-1]
		}
		for _, k := range src {
			d := (k >> shift) & 0xff
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	if len(keys) > 0 && &src[0] != &keys[0] {
		copy(keys, src)
	}
}

// grow returns s resized to n elements, reusing its array when it can.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// lseOf is log Σ exp(x) over xs (non-empty).
func (s *sampler) lseOf(xs []float32) float64 {
	top := kernel.Max(xs)
	if math.IsInf(float64(top), 0) {
		return float64(top)
	}
	s.pad = grow(s.pad, len(xs))
	return float64(top) + math.Log(kernel.ExpScaled(s.pad, xs, top, 1))
}

// logAddExp is log(exp(a) + exp(b)).
func logAddExp(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(a, -1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}
