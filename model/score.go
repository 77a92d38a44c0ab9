package model

import (
	"context"
	"fmt"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best dot-imported
	"github.com/gomlx/gomlx/core/tensors"
)

// Sequence is a prompt and a response, as token ids. Prompt must not be empty.
type Sequence struct {
	Prompt, Response []int
}

// Scores holds one value per response token of each scored sequence.
type Scores struct {
	LogProbs [][]float32 // log p(response[t] | prompt, response[:t])
	Entropy  [][]float32 // entropy of the model's distribution at that position; nil unless asked
}

// Score returns the log-probability of every response token under the model
// (temperature 1) and, if withEntropy, the entropy of the model's next-token
// distribution at each response position. Sequences are scored in bucketed
// passes (see bucket.go); each is right-padded, which cannot affect it
// because attention is causal.
func (m *Model) Score(ctx context.Context, seqs []Sequence, withEntropy bool) (Scores, error) {
	lp, ent, err := m.score(ctx, seqs, withEntropy)
	if err != nil {
		return Scores{}, err
	}
	s := Scores{LogProbs: to32(lp)}
	if withEntropy {
		s.Entropy = to32(ent)
	}
	return s, nil
}

func (m *Model) score(ctx context.Context, seqs []Sequence, withEntropy bool) (lp, ent [][]float64, err error) {
	if err := m.checkSequences(seqs); err != nil {
		return nil, nil, err
	}
	if m.native() {
		return m.nativeScore(seqs, withEntropy)
	}
	name := "score"
	if withEntropy {
		name = "score+entropy"
	}
	e := m.exec(name, func(n *net, in []*Node) []*Node {
		tokens, targets := in[0], in[1]
		logits := n.head(fullSequence(n, tokens))
		lp, ent := n.tokenLogProbs(logits, targets, withEntropy)
		if withEntropy {
			return []*Node{lp, ent}
		}
		return []*Node{lp}
	})
	params := m.snapshot()
	lp = make([][]float64, len(seqs))
	if withEntropy {
		ent = make([][]float64, len(seqs))
	}
	for _, rows := range planChunks(inputLengths(seqs), m.cfg.Vocab) {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		b := packSequences(seqs, rows, nil, nil)
		out, err := call(e, params, b.tokens, b.targets)
		if err != nil {
			return nil, nil, err
		}
		b.unpack(float64s(out[0]), lp)
		if withEntropy {
			b.unpack(float64s(out[1]), ent)
		}
	}
	return lp, ent, nil
}

// fullSequence runs the network on right-padded tokens [B,T] at positions
// 0..T−1 with a causal mask, returning the hidden states [B,T,D].
func fullSequence(n *net, tokens *Node) *Node {
	g := tokens.Graph()
	B, T := tokens.Shape().Dimensions[0], tokens.Shape().Dimensions[1]
	at := newAttention(Iota(g, shapes.Make(dtypes.Int32, T), 0), Zeros(g, shapes.Make(dtypes.Int32, B)), T)
	at.causal = true
	h, _ := n.forward(tokens, at)
	return h
}

// tokenLogProbs returns log softmax(logits)[target] [B,T] and, if asked, the
// entropy H = −Σ p·log p [B,T] of each position's distribution (in a
// training graph with its gradient dH/dz = −p ⊙ (log p + H)). The log-sum-exp
// comes from the fused softmax, lse = max − log(max p), and its gradient, p,
// is attached by hand, so no scalar Exp runs (see softmax).
func (n *net) tokenLogProbs(logits, targets *Node, withEntropy bool) (lp, ent *Node) {
	g := logits.Graph()
	B, T := targets.Shape().Dimensions[0], targets.Shape().Dimensions[1]
	p := StopGradient(Softmax(logits, -1))
	top := StopGradient(ReduceMax(logits, -1))
	lse := Sub(top, Log(ReduceMax(p, -1))) // [B,T]
	lse = n.withGradient(StopGradient(lse), logits, func(v *Node) *Node { return Mul(v, p) })
	idx := Concatenate([]*Node{
		Iota(g, shapes.Make(dtypes.Int32, B, T, 1), 0),
		Iota(g, shapes.Make(dtypes.Int32, B, T, 1), 1),
		ExpandAxes(targets, -1),
	}, -1)
	lp = Sub(Gather(logits, idx), lse)
	if withEntropy {
		ent = Sub(lse, ReduceSum(Mul(p, logits), -1))
		if n.train {
			// Autodiff of this form would give dH/dz = p − p = 0 (p is held
			// constant); the true gradient, dH/dz_j = −p_j·(log p_j + H), is
			// attached by hand.
			ent = StopGradient(ent)
			logp := Sub(StopGradient(logits), ExpandAxes(StopGradient(lse), -1))
			shifted := Add(logp, ExpandAxes(ent, -1))
			ent = n.withGradient(ent, logits, func(v *Node) *Node { return Neg(Mul(v, Mul(p, shifted))) })
		}
	}
	return lp, ent
}

// checkSequences validates token ids and lengths.
func (m *Model) checkSequences(seqs []Sequence) error {
	for i, s := range seqs {
		if len(s.Prompt) == 0 {
			return fmt.Errorf("model: sequence %d: empty prompt (the first response token needs a context)", i)
		}
		if n := len(s.Prompt) + len(s.Response) - 1; n > m.cfg.MaxSeq {
			return fmt.Errorf("model: sequence %d: %d prompt + %d response tokens exceed the model's %d positions",
				i, len(s.Prompt), len(s.Response), m.cfg.MaxSeq+1)
		}
		for j, t := range append(s.Prompt[:len(s.Prompt):len(s.Prompt)], s.Response...) {
			if t < 0 || t >= m.cfg.Vocab {
				return fmt.Errorf("model: sequence %d: token %d is %d, outside the vocabulary [0,%d)", i, j, t, m.cfg.Vocab)
			}
		}
	}
	return nil
}

// inputLengths is each sequence's input length: all its tokens but the last.
func inputLengths(seqs []Sequence) []int {
	n := make([]int, len(seqs))
	for i, s := range seqs {
		n[i] = len(s.Prompt) + len(s.Response) - 1
	}
	return n
}

// packed is one pass: sequences rows of seqs laid out right-padded in a
// [B,T] batch, inputs tokens and next-token targets.
type packed struct {
	seqs    []Sequence
	rows    []int
	B, T    int
	tokens  *tensors.Tensor // int32 [B,T]
	targets *tensors.Tensor // int32 [B,T]
	weights *tensors.Tensor // [B,T] response-token weights (training), else nil
	entropy *tensors.Tensor // [B,T] response-token entropy weights (AccumulateEntropy), else nil
}

// packSequences packs seqs[rows]; weights and entropy (indexed like seqs,
// one per response token) are laid out at the response positions if not
// nil.
func packSequences(seqs []Sequence, rows []int, weights, entropy [][]float32) *packed {
	longest := 1
	for _, r := range rows {
		longest = max(longest, len(seqs[r].Prompt)+len(seqs[r].Response)-1)
	}
	b := &packed{seqs: seqs, rows: rows, B: batchBucket(len(rows)), T: lengthBucket(longest)}
	tok := make([]int32, b.B*b.T)
	tgt := make([]int32, b.B*b.T)
	for i, r := range rows {
		s := seqs[r]
		all := append(s.Prompt[:len(s.Prompt):len(s.Prompt)], s.Response...)
		for t := 0; t+1 < len(all); t++ {
			tok[i*b.T+t], tgt[i*b.T+t] = int32(all[t]), int32(all[t+1])
		}
	}
	b.tokens = tensors.FromFlatDataAndDimensions(tok, b.B, b.T)
	b.targets = tensors.FromFlatDataAndDimensions(tgt, b.B, b.T)
	b.weights = b.responseValues(weights)
	b.entropy = b.responseValues(entropy)
	return b
}

// responseValues lays out v (indexed like b.seqs, one value per response
// token) at the response positions of a [B,T] tensor, zero elsewhere; nil
// for nil v.
func (b *packed) responseValues(v [][]float32) *tensors.Tensor {
	if v == nil {
		return nil
	}
	flat := make([]float32, b.B*b.T)
	for i, r := range b.rows {
		copy(flat[i*b.T+len(b.seqs[r].Prompt)-1:], v[r][:len(b.seqs[r].Response)])
	}
	return tensors.FromFlatDataAndDimensions(flat, b.B, b.T)
}

// unpack copies the response positions of a [B,T] pass output into dst
// (indexed like seqs).
func (b *packed) unpack(flat []float64, dst [][]float64) {
	for i, r := range b.rows {
		s := b.seqs[r]
		start := i*b.T + len(s.Prompt) - 1
		dst[r] = append([]float64(nil), flat[start:start+len(s.Response)]...)
	}
}

func to32(v [][]float64) [][]float32 {
	out := make([][]float32, len(v))
	for i, row := range v {
		out[i] = make([]float32, len(row))
		for j, x := range row {
			out[i][j] = float32(x)
		}
	}
	return out
}
