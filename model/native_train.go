package model

import (
	"math"
	"sync"

	"github.com/hacrl/hacrl/internal/kernel"
)

// The native decoder also scores whole sequences and computes the gradient
// of Σ w·log p, forward and backward written out over its host weights
// (the same functions as the graph; see the package doc's "Architectures").
// Sequences are not padded: the tokens of all sequences of a pass form one
// [N,d] matrix for the linear layers, and attention runs per sequence and
// head. Only the response positions go through the LM head.

// passTokenBudget bounds the tokens of one native pass; a training pass
// is also bounded by passActivationBytes (see trainTokenBudget).
const passTokenBudget = 4096

// passActivationBytes bounds the activations a training pass keeps for its
// backward pass: at real sizes (a Qwen2.5-0.5B keeps about 2 MB per token)
// the token budget alone would let them reach gigabytes. A pass holds whole
// sequences, so one longer sequence still gets a pass of its own.
const passActivationBytes = 512 << 20

// headChunkFloats bounds the logits the LM head computes at once: rows of
// the vocabulary's width, never a [tokens × vocab] matrix for a whole pass.
const headChunkFloats = 1 << 25

// batch is the input of one native pass: whole sequences, their tokens laid
// end to end.
type batch struct {
	tokens, pos []int // [N] input token and its position in its sequence
	start, len  []int // per sequence: first token row and input length
	// heads are the rows whose next-token log-prob is wanted (the response
	// positions), with their targets.
	heads, targets []int
}

func newBatch(seqs []Sequence) *batch {
	b := &batch{}
	for _, s := range seqs {
		all := append(s.Prompt[:len(s.Prompt):len(s.Prompt)], s.Response...)
		b.start, b.len = append(b.start, len(b.tokens)), append(b.len, len(all)-1)
		for t := range len(all) - 1 {
			if t >= len(s.Prompt)-1 {
				b.heads, b.targets = append(b.heads, len(b.tokens)), append(b.targets, all[t+1])
			}
			b.tokens, b.pos = append(b.tokens, all[t]), append(b.pos, t)
		}
	}
	return b
}

// maxLen is the longest sequence's input length.
func (b *batch) maxLen() int {
	n := 0
	for _, l := range b.len {
		n = max(n, l)
	}
	return n
}

// passes splits seqs into runs of whole sequences of at most budget input
// tokens (a longer sequence gets a pass of its own).
func passes(seqs []Sequence, budget int) [][2]int {
	var out [][2]int
	lo, n := 0, 0
	for i, s := range seqs {
		l := len(s.Prompt) + len(s.Response) - 1
		if i > lo && n+l > budget {
			out = append(out, [2]int{lo, i})
			lo, n = i, 0
		}
		n += l
	}
	if lo < len(seqs) {
		out = append(out, [2]int{lo, len(seqs)})
	}
	return out
}

// trainTokenBudget is the most tokens a training pass over seqs takes: the
// activations one token keeps in every layer (with attention probabilities
// over the longest sequence's length) within passActivationBytes, and at
// most passTokenBudget.
func (c Config) trainTokenBudget(seqs []Sequence) int {
	T := 0
	for _, s := range seqs {
		T = max(T, len(s.Prompt)+len(s.Response)-1)
	}
	d, dh, H, KVH := c.Dim, c.HeadDim(), c.Heads, c.KVHeads
	up := c.Hidden // the pre-activation, and exact GELU's Φ beside it
	if c.Family == "llama" || c.Activation == "gelu" {
		up *= 2
	}
	perLayer := 2*d + 2 + (H+2*KVH)*dh + (H+KVH)*(dh+1) + H*dh + up + H*T
	perToken := 4 * (c.Layers*perLayer + 2*d)
	return max(1, min(passTokenBudget, passActivationBytes/perToken))
}

// arena recycles the float buffers of native passes: a training step
// allocates the same shapes every time, and fresh memory must be zeroed
// and collected. Buffers come back dirty; callers that accumulate clear them.
type arena struct {
	mu   sync.Mutex
	free map[int][][]float32
	used [][]float32
}

// get returns a buffer of n floats. Buffers come in size classes (powers of
// two and the midpoints between them), so that passes over batches of
// slightly different sizes reuse each other's memory.
func (ar *arena) get(n int) []float32 {
	c := lengthBucket(n) // the length buckets' rounding: 2^k or 1.5·2^k
	ar.mu.Lock()
	defer ar.mu.Unlock()
	var b []float32
	if list := ar.free[c]; len(list) > 0 {
		b, ar.free[c] = list[len(list)-1], list[:len(list)-1]
	} else {
		b = make([]float32, c)
	}
	ar.used = append(ar.used, b)
	return b[:n]
}

// release returns every buffer handed out since the last release.
func (ar *arena) release() {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.free == nil {
		ar.free = map[int][][]float32{}
	}
	for _, b := range ar.used {
		ar.free[cap(b)] = append(ar.free[cap(b)], b[:cap(b)])
	}
	ar.used = ar.used[:0]
}

// arenaPool keeps idle arenas between passes. Unlike a sync.Pool it is not
// emptied by garbage collections, which in a training loop come every few
// passes: the buffers would go back to the system and fault in afresh.
type arenaPool struct {
	mu   sync.Mutex
	idle []*arena
}

func (p *arenaPool) get() *arena {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 {
		ar := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return ar
	}
	return &arena{}
}

func (p *arenaPool) put(ar *arena) {
	ar.release()
	p.mu.Lock()
	p.idle = append(p.idle, ar)
	p.mu.Unlock()
}

// trim drops the idle arenas; passes under way keep theirs.
func (p *arenaPool) trim() {
	p.mu.Lock()
	clear(p.idle)
	p.idle = p.idle[:0]
	p.mu.Unlock()
}

// normed is one normalization's saved state: x̂ (the normalized input before
// the gain) and 1/σ per row.
type normed struct{ xhat, rstd []float32 }

// layerActs is what one block's forward pass keeps for its backward pass.
// The norms' outputs and the activation, cheap to recompute from x̂ and the
// pre-activation, are not kept (see backward).
type layerActs struct {
	norm1, norm2 normed
	qkv          []float32   // [N,width], rotated for llama
	qkNorm       normed      // qwen3: the per-head query/key norms' state
	probs        [][]float32 // per sequence and query head: [T,T] attention probabilities
	att          []float32   // [N,H·Dh] attention output
	up           []float32   // [N,upWidth] pre-activation
	cdf          []float32   // exact GELU: Φ(up), for the backward pass
}

// trace is a whole forward pass over a batch.
type trace struct {
	b      *batch
	layers []layerActs // nil when the pass kept no activations
	final  normed
	hr     []float32 // the final norm's output at the head rows [len(heads),d], the LM head's input
}

// run is the forward pass over b up to the LM head's input, from ar. With
// keep it keeps every layer's activations for the backward pass; without,
// the layers' buffers come from scratch (released and reused layer after
// layer), so a scoring pass holds one layer's activations at a time.
func (dec *decoder) run(b *batch, ar *arena, keep bool, scratch *arena) *trace {
	cfg := dec.cfg
	d, dh, n := cfg.Dim, cfg.HeadDim(), len(b.tokens)
	width := (cfg.Heads + 2*cfg.KVHeads) * dh
	tr := &trace{b: b}
	if keep {
		tr.layers = make([]layerActs, cfg.Layers)
	}
	x := ar.get(n * d)
	dec.embedTokens(x, b.tokens, b.pos)
	tmp, h, act := ar.get(n*d), ar.get(n*d), ar.get(n*cfg.Hidden)
	for l, ly := range dec.layers {
		la, a := ar, &layerActs{}
		if keep {
			a = &tr.layers[l]
		} else {
			scratch.release()
			la = scratch
		}
		a.norm1 = dec.normSaved(h, x, ly.norm1W, ly.norm1B, n, la)
		a.qkv = la.get(n * width)
		ly.qkv.forward(true, a.qkv, h, n)
		if ly.qNormW != nil {
			heads := cfg.Heads + cfg.KVHeads
			a.qkNorm = normed{xhat: la.get(n * heads * dh), rstd: la.get(n * heads)}
			dec.qkNorm(&ly, a.qkv, n, width, &a.qkNorm, true)
		}
		if dec.invFreq != nil {
			dec.rotate(a.qkv, b.pos, width, 1, true)
		}
		a.att, a.probs = dec.selfAttention(b, a.qkv, width, la)
		ly.out.forward(true, tmp, a.att, n)
		addTo(x, tmp)
		a.norm2 = dec.normSaved(h, x, ly.norm2W, ly.norm2B, n, la)
		a.up = la.get(n * ly.up.out)
		ly.up.forward(true, a.up, h, n)
		if cfg.Family == "gpt" && cfg.Activation == "gelu" {
			a.cdf = la.get(len(a.up))
		}
		dec.activate(act, a.cdf, a.up, n, true)
		ly.down.forward(true, tmp, act, n)
		addTo(x, tmp)
	}
	// Only the head rows need the final norm's output.
	xr := ar.get(len(b.heads) * d)
	for j, r := range b.heads {
		copy(xr[j*d:(j+1)*d], x[r*d:(r+1)*d])
	}
	tr.hr = ar.get(len(xr))
	tr.final = dec.normSaved(tr.hr, xr, dec.normW, dec.normB, len(b.heads), ar)
	return tr
}

// normSaved writes the norm (LayerNorm for gpt, RMSNorm for llama) of the n
// rows of x into out and returns the saved state, from ar.
func (dec *decoder) normSaved(out, x, w, b []float32, n int, ar *arena) normed {
	d := dec.cfg.Dim
	s := normed{xhat: ar.get(n * d), rstd: ar.get(n)}
	gpt := dec.cfg.Family == "gpt"
	kernel.Parallel(n, 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r := i * d
			s.rstd[i] = kernel.Norm(out[r:r+d], s.xhat[r:r+d], x[r:r+d], w, b, dec.cfg.NormEps, gpt)
		}
	})
	return s
}

// normOutput recomputes a norm's output x̂·w (+ b) from its saved state, as
// kernel.Norm computed it: the product rounded, then the bias added.
func (dec *decoder) normOutput(out []float32, s normed, w, b []float32, n int) {
	d := dec.cfg.Dim
	kernel.Parallel(n, 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xh, o := s.xhat[i*d:(i+1)*d], out[i*d:(i+1)*d]
			for j := range o {
				o[j] = float32(xh[j] * w[j])
			}
			if b != nil {
				kernel.Add(o, b)
			}
		}
	})
}

// rotate applies RoPE (sign 1) or its inverse (sign −1, the backward pass)
// to the query and key heads of each row of qkv at its position, over the
// cores when par.
func (dec *decoder) rotate(qkv []float32, pos []int, width int, sign float32, par bool) {
	dh := dec.cfg.HeadDim()
	half, heads := dh/2, dec.cfg.Heads+dec.cfg.KVHeads
	parallel(par, len(pos), 16, func(lo, hi int) {
		cos, sin := make([]float32, half), make([]float32, half)
		for i := lo; i < hi; i++ {
			for j, f := range dec.invFreq {
				a := float32(pos[i]) * f
				cos[j], sin[j] = float32(math.Cos(float64(a))), sign*float32(math.Sin(float64(a)))
			}
			for hd := range heads {
				v := qkv[i*width+hd*dh : i*width+(hd+1)*dh]
				for j := range half {
					x1, x2 := v[j], v[j+half]
					v[j], v[j+half] = x1*cos[j]-x2*sin[j], x2*cos[j]+x1*sin[j]
				}
			}
		}
	})
}

// seqHeads is one sequence's attention operands, head by head, gathered
// from its qkv rows in one pass (the rows of a sequence lie far apart in
// the layer's activations, so reading them once per head would wait on
// memory for every row).
type seqHeads struct {
	T, dh          int
	q              []float32 // [H][T][dh], scaled by 1/√dh
	k, kT, v, vT   []float32 // [KVH][T][dh] and [KVH][dh][T]
	wantK, wantVT  bool
	wantKT, wantV  bool
	heads, kvHeads int
}

func (dec *decoder) newSeqHeads(maxT int) *seqHeads {
	c := dec.cfg
	dh := c.HeadDim()
	return &seqHeads{dh: dh, heads: c.Heads, kvHeads: c.KVHeads,
		q: make([]float32, c.Heads*maxT*dh), k: make([]float32, c.KVHeads*maxT*dh), kT: make([]float32, c.KVHeads*maxT*dh),
		v: make([]float32, c.KVHeads*maxT*dh), vT: make([]float32, c.KVHeads*maxT*dh)}
}

// gather fills the operands of the T rows of qkv starting at row start.
func (sh *seqHeads) gather(qkv []float32, width, start, T int) {
	sh.T = T
	dh, H, KVH := sh.dh, sh.heads, sh.kvHeads
	scale := float32(1 / math.Sqrt(float64(dh)))
	for t := range T {
		row := qkv[(start+t)*width : (start+t+1)*width]
		for h := range H {
			q := sh.q[(h*T+t)*dh : (h*T+t+1)*dh]
			for j, x := range row[h*dh : (h+1)*dh] {
				q[j] = x * scale
			}
		}
		for h := range KVH {
			k, v := row[(H+h)*dh:(H+h+1)*dh], row[(H+KVH+h)*dh:(H+KVH+h+1)*dh]
			if sh.wantK {
				copy(sh.k[(h*T+t)*dh:], k)
			}
			if sh.wantV {
				copy(sh.v[(h*T+t)*dh:], v)
			}
			if sh.wantKT {
				kT := sh.kT[h*dh*T:]
				for j, x := range k {
					kT[j*T+t] = x
				}
			}
			if sh.wantVT {
				vT := sh.vT[h*dh*T:]
				for j, x := range v {
					vT[j*T+t] = x
				}
			}
		}
	}
}

// head returns query head h's [T][dh] block of a per-head buffer.
func (sh *seqHeads) head(buf []float32, h int) []float32 {
	return buf[h*sh.T*sh.dh : (h+1)*sh.T*sh.dh]
}

// selfAttention runs causal attention within each sequence of b and returns
// the output [N,H·Dh] and the probabilities per sequence and head.
func (dec *decoder) selfAttention(b *batch, qkv []float32, width int, ar *arena) ([]float32, [][]float32) {
	cfg := dec.cfg
	dh, H := cfg.HeadDim(), cfg.Heads
	group := H / cfg.KVHeads
	out := ar.get(len(b.tokens) * H * dh)
	probs := make([][]float32, len(b.start)*H)
	maxT := b.maxLen()
	kernel.Parallel(len(b.start), 1, func(lo, hi int) {
		sh := dec.newSeqHeads(maxT)
		sh.wantKT, sh.wantV = true, true
		o := make([]float32, H*maxT*dh)
		for s := lo; s < hi; s++ {
			start, T := b.start[s], b.len[s]
			sh.gather(qkv, width, start, T)
			for h := range H {
				hk := h / group
				p := ar.get(T * T)
				kernel.MatMulSerial(p, sh.head(sh.q, h), sh.kT[hk*dh*T:(hk+1)*dh*T], nil, T, dh, T)
				kernel.CausalSoftmax(p, T)
				kernel.MatMulSerial(o[h*T*dh:(h+1)*T*dh], p, sh.v[hk*T*dh:(hk+1)*T*dh], nil, T, T, dh)
				probs[s*H+h] = p
			}
			for t := range T {
				row := out[(start+t)*H*dh : (start+t+1)*H*dh]
				for h := range H {
					copy(row[h*dh:(h+1)*dh], o[(h*T+t)*dh:])
				}
			}
		}
	})
	return out, probs
}

// headRows returns the number of head rows the LM head takes at once.
func (dec *decoder) headRows(nh int) int {
	return max(1, min(nh, headChunkFloats/dec.cfg.Vocab))
}

// logProbs returns, per head row of tr, log p(target) and, if asked, the
// entropy of the distribution, computing the logits a chunk of rows at a
// time.
func (dec *decoder) logProbs(tr *trace, withEntropy bool, ar *arena) (lp, ent []float64) {
	V, d, nh := dec.cfg.Vocab, dec.cfg.Dim, len(tr.b.heads)
	lp = make([]float64, nh)
	if withEntropy {
		ent = make([]float64, nh)
	}
	R := dec.headRows(nh)
	logits := ar.get(R * V)
	for lo := 0; lo < nh; lo += R {
		rows := min(R, nh-lo)
		dec.head.forward(true, logits, tr.hr[lo*d:(lo+rows)*d], rows)
		kernel.Parallel(rows, 16, func(r0, r1 int) {
			var scratch []float32
			if withEntropy {
				scratch = make([]float32, V)
			}
			for r := r0; r < r1; r++ {
				j := lo + r
				row := logits[r*V : (r+1)*V]
				target := float64(row[tr.b.targets[j]])
				if !withEntropy {
					lse, _ := kernel.LogSumExp(row, row)
					lp[j] = target - lse
					continue
				}
				lse, sum := kernel.LogSumExp(scratch, row)
				lp[j] = target - lse
				ent[j] = lse - float64(kernel.Dot(scratch, row))/sum
			}
		})
	}
	return lp, ent
}

// headBackward returns, per head row of tr, log p(target), adds to g's LM
// head the gradient of Σ_j w[j]·lp[j] (+ e[j]·H[j], H the entropy of the
// row's distribution, when e is not nil) and returns the gradient at the
// head's input [len(heads),d] and, with e, the H. A chunk of rows at a time:
// the logits, the log-probs, dlogits = w·(onehot(target) − softmax(logits))
// − e·p ⊙ (log p + H) in place, then the head's gradients, so no [tokens ×
// vocab] matrix is ever held.
func (dec *decoder) headBackward(tr *trace, w, e []float32, g *decoder, ar *arena) ([]float64, []float64, []float32) {
	V, d, nh := dec.cfg.Vocab, dec.cfg.Dim, len(tr.b.heads)
	lp := make([]float64, nh)
	dhr := ar.get(nh * d)
	R := dec.headRows(nh)
	logits := ar.get(R * V)
	ent := entropyRows(e) // assigned once: the closure below copies it, rather than moving it to the heap
	for lo := 0; lo < nh; lo += R {
		rows := min(R, nh-lo)
		hr := tr.hr[lo*d : (lo+rows)*d]
		dec.head.forward(true, logits, hr, rows)
		kernel.Parallel(rows, 16, func(r0, r1 int) {
			var ex []float32 // with e: a row's exp(z − max z), beside its logits
			if e != nil {
				ex = make([]float32, V)
			}
			for r := r0; r < r1; r++ {
				j := lo + r
				row, t := logits[r*V:(r+1)*V], tr.b.targets[j]
				target := float64(row[t])
				if e == nil {
					lse, sum := kernel.LogSumExp(row, row)
					lp[j] = target - lse
					kernel.Scale(row, -w[j]/float32(sum)) // as Softmax: the float32 sum, inverted in float32, times −w
					row[t] += w[j]
					continue
				}
				lse, sum := kernel.LogSumExp(ex, row)
				lp[j] = target - lse
				h := lse - float64(kernel.Dot(ex, row))/sum
				ent[j] = h
				if e[j] == 0 { // as without entropy, bit for bit
					copy(row, ex)
					kernel.Scale(row, -w[j]/float32(sum))
				} else {
					entropyGrad(row, ex, w[j], e[j], float32(sum), float32(lse-h))
				}
				row[t] += w[j]
			}
		})
		dec.head.addGrad(g.head, hr, logits[:rows*V], rows)
		dec.head.backInput(dhr[lo*d:(lo+rows)*d], logits[:rows*V], rows)
	}
	return lp, ent, dhr
}

// entropyRows returns a row's entropy for each entropy weight of e: nil
// for nil e.
func entropyRows(e []float32) []float64 {
	if e == nil {
		return nil
	}
	return make([]float64, len(e))
}

// entropyGrad replaces the logits z of a row by −p ⊙ (w + e·(log p + H)),
// the gradient of w·log p(target) + e·H without the target's w, given ex =
// exp(z − max z), their sum and shift = lse − H (log p_j + H = z_j −
// shift).
func entropyGrad(z, ex []float32, w, e, sum, shift float32) {
	inv := 1 / sum
	ex = ex[:len(z)] // one bounds check, not one per element
	for k, x := range z {
		z[k] = -(ex[k] * inv) * (w + e*(x-shift))
	}
}

// nativeScore is Score on the native decoder.
func (m *Model) nativeScore(seqs []Sequence, withEntropy bool) (lp, ent [][]float64, err error) {
	dec, release, err := m.decoder()
	if err != nil {
		return nil, nil, err
	}
	defer release()
	lp = make([][]float64, len(seqs))
	if withEntropy {
		ent = make([][]float64, len(seqs))
	}
	ar, scratch := m.arenas.get(), m.arenas.get()
	defer m.arenas.put(ar)
	defer m.arenas.put(scratch)
	for _, p := range passes(seqs, passTokenBudget) {
		part := seqs[p[0]:p[1]]
		l, e := dec.logProbs(dec.run(newBatch(part), ar, false, scratch), withEntropy, ar)
		ar.release()
		for i, s := range part {
			lp[p[0]+i], l = l[:len(s.Response):len(s.Response)], l[len(s.Response):]
			if withEntropy {
				ent[p[0]+i], e = e[:len(s.Response):len(s.Response)], e[len(s.Response):]
			}
		}
	}
	return lp, ent, nil
}

// nativeGradients adds to acc, a gradient buffer in the host layout (the
// adapters' layout for a model with LoRA adapters), the gradient of
// Σ_b Σ_t weights[b][t]·lp[b][t] (+ entropy[b][t]·H[b][t] when entropy is
// not nil) and returns the lp (and the H). Every gradient element gets its
// contributions added in token order, straight into acc, so the sum does
// not depend on how sequences were split into calls or passes.
func (m *Model) nativeGradients(seqs []Sequence, weights, entropy [][]float32, acc []float32) (lp, ent [][]float64, err error) {
	dec, release, err := m.decoder()
	if err != nil {
		return nil, nil, err
	}
	defer release()
	var g *decoder
	if m.lora != nil {
		g = m.lora.gradDecoder(m.cfg, acc)
	} else {
		g = newDecoder(m.cfg, m.specs, acc)
	}
	lp = make([][]float64, len(seqs))
	if entropy != nil {
		ent = make([][]float64, len(seqs))
	}
	ar := m.arenas.get()
	defer m.arenas.put(ar)
	for _, p := range passes(seqs, m.cfg.trainTokenBudget(seqs)) {
		part := seqs[p[0]:p[1]]
		tr := dec.run(newBatch(part), ar, true, nil)
		var w, e []float32
		for i := range part {
			w = append(w, weights[p[0]+i]...)
			if entropy != nil {
				e = append(e, entropy[p[0]+i]...)
			}
		}
		l, h, dhr := dec.headBackward(tr, w, e, g, ar)
		for i, s := range part {
			n := len(s.Response)
			lp[p[0]+i], l = l[:n:n], l[n:]
			if entropy != nil {
				ent[p[0]+i], h = h[:n:n], h[n:]
			}
		}
		dec.backward(tr, dhr, g, ar)
		ar.release()
	}
	return lp, ent, nil
}

// backward adds to g the gradient through the blocks, the final norm and
// the embeddings, given dhr, the gradient at the LM head's input rows.
func (dec *decoder) backward(tr *trace, dhr []float32, g *decoder, ar *arena) {
	cfg := dec.cfg
	b := tr.b
	d, dh, n := cfg.Dim, cfg.HeadDim(), len(b.tokens)
	width := (cfg.Heads + 2*cfg.KVHeads) * dh

	dxr := ar.get(len(b.heads) * d)
	clear(dxr)
	dec.normBackward(dxr, dhr, tr.final, dec.normW, g.normW, g.normB, len(b.heads))
	dx := ar.get(n * d)
	clear(dx)
	for j, r := range b.heads {
		copy(dx[r*d:(r+1)*d], dxr[j*d:(j+1)*d])
	}

	tmp, h := ar.get(n*d), ar.get(n*d)
	hid, upWidth := cfg.Hidden, dec.layers[0].up.out
	act, dAct, dUp := ar.get(n*hid), ar.get(n*hid), ar.get(n*upWidth)
	dAtt, dqkv := ar.get(n*cfg.Heads*dh), ar.get(n*width)
	for l := cfg.Layers - 1; l >= 0; l-- {
		ly, gl, a := &dec.layers[l], &g.layers[l], &tr.layers[l]
		// MLP: x += down(act(up(h2))), with act and h2 recomputed.
		dec.activate(act, nil, a.up, n, true)
		ly.down.backward(gl.down, dAct, act, dx, n)
		dec.activationBackward(dUp, dAct, a.up, a.cdf, n)
		dec.normOutput(h, a.norm2, ly.norm2W, ly.norm2B, n)
		ly.up.backward(gl.up, tmp, h, dUp, n)
		dec.normBackward(dx, tmp, a.norm2, ly.norm2W, gl.norm2W, gl.norm2B, n)
		// Attention: x += out(attention(qkv(h1))).
		ly.out.backward(gl.out, dAtt, a.att, dx, n)
		dec.attentionBackward(b, a, dAtt, dqkv, width)
		if dec.invFreq != nil {
			dec.rotate(dqkv, b.pos, width, -1, true)
		}
		if ly.qNormW != nil {
			dec.qkNormBackward(dqkv, a.qkNorm, ly, gl, n, width)
		}
		dec.normOutput(h, a.norm1, ly.norm1W, ly.norm1B, n)
		if l == 0 && g.embed == nil { // frozen embeddings: no gradient needed below
			ly.qkv.backward(gl.qkv, nil, h, dqkv, n)
			return
		}
		ly.qkv.backward(gl.qkv, tmp, h, dqkv, n)
		dec.normBackward(dx, tmp, a.norm1, ly.norm1W, gl.norm1W, gl.norm1B, n)
	}
	for i, t := range b.tokens {
		addTo(g.embed[t*d:(t+1)*d], dx[i*d:(i+1)*d])
		if g.pos != nil {
			addTo(g.pos[b.pos[i]*d:(b.pos[i]+1)*d], dx[i*d:(i+1)*d])
		}
	}
}

// addBiasGrad adds the column sums of dy [n,m] to db (nil: no bias).
func addBiasGrad(db, dy []float32, n, m int) {
	if db == nil {
		return
	}
	kernel.Parallel(m, 64, func(lo, hi int) {
		for i := range n {
			addTo(db[lo:hi], dy[i*m+lo:i*m+hi])
		}
	})
}

// normBackward adds to dx the gradient through a norm with output gradient
// dy, and to dw (and db) the gain's (and bias's); see kernel.NormBackward.
func (dec *decoder) normBackward(dx, dy []float32, s normed, w, dw, db []float32, n int) {
	d := dec.cfg.Dim
	gpt := dec.cfg.Family == "gpt"
	kernel.Parallel(d, 32, func(lo, hi int) {
		if dw == nil { // a frozen gain (and bias)
			return
		}
		for i := range n {
			r := i * d
			kernel.MulAdd(dw[lo:hi], dy[r+lo:r+hi], s.xhat[r+lo:r+hi])
			if db != nil {
				kernel.Add(db[lo:hi], dy[r+lo:r+hi])
			}
		}
	})
	kernel.Parallel(n, 16, func(lo, hi int) {
		scratch := make([]float32, d)
		for i := lo; i < hi; i++ {
			r := i * d
			kernel.NormBackward(dx[r:r+d], dy[r:r+d], s.xhat[r:r+d], w, scratch, s.rstd[i], gpt)
		}
	})
}

// qkNormBackward replaces the query and key heads of dqkv, the gradient at
// the norms' outputs, by the gradient at their inputs, and adds the gains'
// gradients to gl.qNormW and gl.kNormW.
func (dec *decoder) qkNormBackward(dqkv []float32, s normed, ly, gl *decoderLayer, n, width int) {
	cfg := dec.cfg
	dh, H, heads := cfg.HeadDim(), cfg.Heads, cfg.Heads+cfg.KVHeads
	kernel.Parallel(2, 1, func(lo, hi int) { // the two gains, each summed in a fixed order
		for g := lo; g < hi && gl.qNormW != nil; g++ {
			dw, from, to := gl.qNormW, 0, H
			if g == 1 {
				dw, from, to = gl.kNormW, H, heads
			}
			for i := range n {
				for hd := from; hd < to; hd++ {
					kernel.MulAdd(dw, dqkv[i*width+hd*dh:], s.xhat[(i*heads+hd)*dh:])
				}
			}
		}
	})
	kernel.Parallel(n, 16, func(lo, hi int) {
		dx, scratch := make([]float32, dh), make([]float32, dh)
		for i := lo; i < hi; i++ {
			for hd := range heads {
				w := ly.qNormW
				if hd >= H {
					w = ly.kNormW
				}
				dy := dqkv[i*width+hd*dh : i*width+(hd+1)*dh]
				clear(dx)
				kernel.NormBackward(dx, dy, s.xhat[(i*heads+hd)*dh:(i*heads+hd+1)*dh], w, scratch, s.rstd[i*heads+hd], false)
				copy(dy, dx)
			}
		}
	})
}

// activationBackward sets dUp, the gradient at the up projection's output,
// from dAct, the gradient at the activation's output.
func (dec *decoder) activationBackward(dUp, dAct, up, cdf []float32, n int) {
	cfg := dec.cfg
	if cfg.Family == "llama" {
		hid := cfg.Hidden
		kernel.Parallel(n, 16, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				g, u := up[i*2*hid:i*2*hid+hid], up[i*2*hid+hid:(i+1)*2*hid]
				kernel.SiLUMulBackward(dUp[i*2*hid:i*2*hid+hid], dUp[i*2*hid+hid:(i+1)*2*hid], dAct[i*hid:(i+1)*hid], g, u)
			}
		})
		return
	}
	act := cfg.Activation
	kernel.Parallel(len(up), 1024, func(lo, hi int) {
		x, dy, dx := up[lo:hi], dAct[lo:hi], dUp[lo:hi]
		switch act {
		case "relu":
			for i, v := range x {
				dx[i] = 0
				if v > 0 {
					dx[i] = dy[i]
				}
			}
		case "gelu_new":
			c := math.Sqrt(2 / math.Pi)
			for i, v := range x {
				v := float64(v)
				th := math.Tanh(c * (v + 0.044715*v*v*v))
				dx[i] = float32(float64(dy[i]) * (0.5*(1+th) + 0.5*v*(1-th*th)*c*(1+3*0.044715*v*v)))
			}
		default:
			kernel.GELUBackward(dx, dy, x, cdf[lo:hi])
		}
	})
}

// attentionBackward sets dqkv [N,width], the gradient at qkv, from dAtt,
// the gradient at the attention output [N,H·Dh]. With dO a head's output
// gradient and P its probabilities (scores S = q·kᵀ/√Dh):
//
//	dP = dO·vᵀ,  dS = P ⊙ (dP − Σ_s dP⊙P),  dq = dS·k/√Dh,  dk = dSᵀ·q/√Dh,  dv = Pᵀ·dO
func (dec *decoder) attentionBackward(b *batch, a *layerActs, dAtt, dqkv []float32, width int) {
	cfg := dec.cfg
	dh, H, KVH := cfg.HeadDim(), cfg.Heads, cfg.KVHeads
	group := H / KVH
	scale := float32(1 / math.Sqrt(float64(dh)))
	maxT := b.maxLen()
	kernel.Parallel(len(b.start), 1, func(lo, hi int) {
		sh := dec.newSeqHeads(maxT)
		sh.wantK, sh.wantVT = true, true
		dO, dq := make([]float32, H*maxT*dh), make([]float32, H*maxT*dh)
		dk, dv := make([]float32, KVH*maxT*dh), make([]float32, KVH*maxT*dh) // summed over each group's query heads
		dP := make([]float32, maxT*maxT)
		for s := lo; s < hi; s++ {
			start, T := b.start[s], b.len[s]
			sh.gather(a.qkv, width, start, T)
			for t := range T {
				row := dAtt[(start+t)*H*dh : (start+t+1)*H*dh]
				for h := range H {
					copy(dO[(h*T+t)*dh:(h*T+t+1)*dh], row[h*dh:])
				}
			}
			clear(dk[:KVH*T*dh])
			clear(dv[:KVH*T*dh])
			dS := dP[:T*T]
			for h := range H {
				hk := h / group
				p := a.probs[s*H+h]
				dOh, dqh := dO[h*T*dh:(h+1)*T*dh], dq[h*T*dh:(h+1)*T*dh]
				kernel.MatMulSerial(dS, dOh, sh.vT[hk*dh*T:(hk+1)*dh*T], nil, T, dh, T)
				for t := range T { // dP becomes dS
					pr, dr := p[t*T:t*T+t+1], dS[t*T:(t+1)*T]
					sum := kernel.Dot(pr, dr)
					for j := range pr {
						dr[j] = pr[j] * (dr[j] - sum)
					}
					clear(dr[t+1:])
				}
				kernel.MatMulSerial(dqh, dS, sh.k[hk*T*dh:(hk+1)*T*dh], nil, T, T, dh) // at the scaled q; ·scale below
				kernel.MatMulTAddSerial(dk[hk*T*dh:(hk+1)*T*dh], dS, sh.head(sh.q, h), T, T, dh)
				kernel.MatMulTAddSerial(dv[hk*T*dh:(hk+1)*T*dh], p, dOh, T, T, dh)
			}
			for t := range T {
				row := dqkv[(start+t)*width : (start+t+1)*width]
				for h := range H {
					for j, x := range dq[(h*T+t)*dh : (h*T+t+1)*dh] {
						row[h*dh+j] = x * scale
					}
				}
				for h := range KVH {
					copy(row[(H+h)*dh:(H+h+1)*dh], dk[(h*T+t)*dh:])
					copy(row[(H+KVH+h)*dh:(H+KVH+h+1)*dh], dv[(h*T+t)*dh:])
				}
			}
		}
	})
}
