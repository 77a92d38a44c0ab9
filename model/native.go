package model

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/hacrl/hacrl/internal/kernel"
)

// decoder is the native engine's view of a model: slices of its host
// parameters (host.go), no copy, with the forward pass written directly
// over them. This file has decoding with per-row key/value caches
// (Generate); native_train.go has whole-sequence passes and their backward
// pass (Score, Trainer.Accumulate). It computes the same functions as the
// graphs (see the package doc's "Architectures"), in float32: on GoMLX's Go
// backend a decoding step is dozens of small products run at a few
// GFLOP/s, which internal/kernel runs near the machine's peak. The same
// type over a gradient buffer of the same layout holds the gradients.
type decoder struct {
	cfg    Config
	embed  []float32 // [V,d] token embeddings
	pos    []float32 // gpt: [MaxSeq,d] learned positions
	layers []decoderLayer
	normW  []float32 // final norm
	normB  []float32 // gpt
	head   proj      // the LM head [V,d] (lm_head.weight, or the tied embeddings)
	tied   bool      // head is embed
	// invFreq are llama's rotary frequencies (Config.ropeFrequencies) as float32.
	invFreq []float32
	// serialParts: decoding may split a batch's rows between the cores,
	// each running whole steps with serial products (small models); large
	// models split each product's columns instead, so that every weight is
	// read from memory once per step.
	serialParts bool
}

// proj is one weight matrix of the decoder and its bias: w is [out,in]
// (torch.nn.Linear, the LM head) when t, else [in,out] (GPT-2's Conv1D).
// A frozen base held in bfloat16 (Model.SetFrozenDType) has the weights as
// bfloat16 bits in wb, in the same layout, and w nil.
type proj struct {
	w, b    []float32
	wb      []uint16
	in, out int
	t       bool
	packed  *kernel.Packed // a small model's weights laid out for the products (decoder.pack), or nil
	lora    *lowRank       // the LoRA adapters on the product's outputs, or nil
}

// forward sets y [m,out] = x [m,in]·W (+ b) (+ the adapters' output), on
// all cores when par.
func (l proj) forward(par bool, y, x []float32, m int) {
	l.base(par, y, x, m)
	if l.lora != nil {
		l.lora.forward(par, y, x, m)
	}
}

// base sets y [m,out] = x [m,in]·W (+ b).
func (l proj) base(par bool, y, x []float32, m int) {
	switch {
	case l.wb != nil && l.t && par:
		kernel.MatMulBTBF16(y, x, l.wb, l.b, m, l.in, l.out)
	case l.wb != nil && l.t:
		kernel.MatMulBTBF16Serial(y, x, l.wb, l.b, m, l.in, l.out)
	case l.wb != nil && par:
		kernel.MatMulBF16(y, x, l.wb, l.b, m, l.in, l.out)
	case l.wb != nil:
		kernel.MatMulBF16Serial(y, x, l.wb, l.b, m, l.in, l.out)
	case l.packed != nil && par:
		kernel.MatMulPacked(y, x, l.packed, l.b, m)
	case l.packed != nil:
		kernel.MatMulPackedSerial(y, x, l.packed, l.b, m)
	case l.t && par:
		kernel.MatMulBT(y, x, l.w, l.b, m, l.in, l.out)
	case l.t:
		kernel.MatMulBTSerial(y, x, l.w, l.b, m, l.in, l.out)
	case par:
		kernel.MatMul(y, x, l.w, l.b, m, l.in, l.out)
	default:
		kernel.MatMulSerial(y, x, l.w, l.b, m, l.in, l.out)
	}
}

// backInput sets dx [m,in] to the gradient at the input, dy·Wᵀ.
func (l proj) backInput(dx, dy []float32, m int) {
	switch {
	case l.wb != nil && l.t:
		kernel.MatMulBF16(dx, dy, l.wb, nil, m, l.out, l.in)
		return
	case l.wb != nil:
		kernel.MatMulBTBF16(dx, dy, l.wb, nil, m, l.out, l.in)
		return
	}
	if l.t {
		kernel.MatMul(dx, dy, l.w, nil, m, l.out, l.in)
	} else {
		kernel.MatMulBT(dx, dy, l.w, nil, m, l.out, l.in)
	}
}

// backward adds the gradients of x [m,in] and dy [m,out] to g (a proj of
// the same shape over a gradient buffer: its weight and bias, or for a
// frozen base only its adapters) and sets dx [m,in] to the gradient at the
// input, unless dx is nil.
func (l proj) backward(g proj, dx, x, dy []float32, m int) {
	l.addGrad(g, x, dy, m)
	if dx == nil {
		if l.lora != nil {
			l.lora.backward(g.lora, nil, x, dy, m)
		}
		return
	}
	l.backInput(dx, dy, m)
	if l.lora != nil {
		l.lora.backward(g.lora, dx, x, dy, m)
	}
}

// addGrad adds the weight and bias gradients of x [m,in] and dy [m,out] to
// g (a proj of the same shape over a gradient buffer), if g has them.
func (l proj) addGrad(g proj, x, dy []float32, m int) {
	if g.w == nil {
		return
	}
	if l.t {
		kernel.MatMulTAdd(g.w, dy, x, l.out, m, l.in) // [out,in] += dyᵀ·x
	} else {
		kernel.MatMulTAdd(g.w, x, dy, l.in, m, l.out) // [in,out] += xᵀ·dy
	}
	addBiasGrad(g.b, dy, m, l.out)
}

// decoderLayer holds one block's weights in product order: the attention
// input projection has the q | k | v outputs of all heads side by side
// (llama's three projections, adjacent in the host buffer, are one
// [(H+2·KVH)·Dh, d] matrix), and llama's gate and up projections are one
// matrix too (gate outputs first).
type decoderLayer struct {
	norm1W, norm1B []float32
	qkv            proj // [d → (H+2·KVH)·Dh]
	out            proj // [H·Dh → d]
	norm2W, norm2B []float32
	up             proj      // gpt c_fc [d → hid]; llama gate|up [d → 2·hid]
	down           proj      // [hid → d]
	qNormW, kNormW []float32 // qwen3: the per-head query and key RMSNorm gains [Dh], or nil
}

// pack lays out a small model's weights for the forward products (see
// serialParts): a second copy, of at most serialPartsMaxBytes, that spares
// every decoding step packing or strided reads. The decoder is rebuilt
// when the parameters change.
func (dec *decoder) pack() {
	if !dec.serialParts {
		return
	}
	packProj := func(l *proj) {
		if l.w == nil {
			return // bfloat16 weights: no packed copy
		}
		if l.t {
			l.packed = kernel.PackT(l.w, l.out, l.in)
		} else {
			l.packed = kernel.Pack(l.w, l.in, l.out)
		}
	}
	for i := range dec.layers {
		ly := &dec.layers[i]
		packProj(&ly.qkv)
		packProj(&ly.out)
		packProj(&ly.up)
		packProj(&ly.down)
	}
	packProj(&dec.head)
}

// serialPartsMaxBytes is the largest model whose decoding splits rows
// between the cores (see decoder.serialParts): beyond it the weights no
// longer stay in the caches between the parts.
const serialPartsMaxBytes = 32 << 20

// newDecoder returns the decoder views of flat, a buffer in the host
// layout (host.go) of the parameters specs describes.
func newDecoder(cfg Config, specs []paramSpec, flat []float32) *decoder {
	w, at := map[string][]float32{}, map[string]int{}
	off, _ := flatLayout(specs)
	for i, v := range flatViews(specs, flat) {
		w[specs[i].name], at[specs[i].name] = v, off[i]
	}
	// span is the slice of flat from the first to the last of the named
	// parameters, which are adjacent in paramSpecs order; nil if absent.
	span := func(first, last string) []float32 {
		if w[first] == nil {
			return nil
		}
		lo, hi := at[first], at[last]+len(w[last])
		return flat[lo:hi:hi]
	}
	d, dh, V := cfg.Dim, cfg.HeadDim(), cfg.Vocab
	dec := &decoder{cfg: cfg, embed: w[cfg.embeddingName()], serialParts: 4*len(flat) <= serialPartsMaxBytes}
	dec.head = proj{w: w["lm_head.weight"], in: d, out: V, t: true}
	if dec.head.w == nil {
		dec.head.w, dec.tied = dec.embed, true
	}
	if cfg.Family == "gpt" {
		dec.pos, dec.normW, dec.normB = w["wpe.weight"], w["ln_f.weight"], w["ln_f.bias"]
		for l := range cfg.Layers {
			p := fmt.Sprintf("h.%d.", l)
			dec.layers = append(dec.layers, decoderLayer{
				norm1W: w[p+"ln_1.weight"], norm1B: w[p+"ln_1.bias"],
				qkv:    proj{w: w[p+"attn.c_attn.weight"], b: w[p+"attn.c_attn.bias"], in: d, out: 3 * d},
				out:    proj{w: w[p+"attn.c_proj.weight"], b: w[p+"attn.c_proj.bias"], in: d, out: d},
				norm2W: w[p+"ln_2.weight"], norm2B: w[p+"ln_2.bias"],
				up:   proj{w: w[p+"mlp.c_fc.weight"], b: w[p+"mlp.c_fc.bias"], in: d, out: cfg.Hidden},
				down: proj{w: w[p+"mlp.c_proj.weight"], b: w[p+"mlp.c_proj.bias"], in: cfg.Hidden, out: d},
			})
		}
		return dec
	}
	dec.normW = w["model.norm.weight"]
	for _, f := range cfg.ropeFrequencies() {
		dec.invFreq = append(dec.invFreq, float32(f))
	}
	q, kv := cfg.Heads*dh, cfg.KVHeads*dh
	for l := range cfg.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		a := p + "self_attn."
		dec.layers = append(dec.layers, decoderLayer{
			norm1W: w[p+"input_layernorm.weight"],
			qkv: proj{w: span(a+"q_proj.weight", a+"v_proj.weight"), b: span(a+"q_proj.bias", a+"v_proj.bias"),
				in: d, out: q + 2*kv, t: true},
			out:    proj{w: w[a+"o_proj.weight"], b: w[a+"o_proj.bias"], in: q, out: d, t: true},
			norm2W: w[p+"post_attention_layernorm.weight"],
			up:     proj{w: span(p+"mlp.gate_proj.weight", p+"mlp.up_proj.weight"), in: d, out: 2 * cfg.Hidden, t: true},
			down:   proj{w: w[p+"mlp.down_proj.weight"], in: cfg.Hidden, out: d, t: true},
			qNormW: w[a+"q_norm.weight"], kNormW: w[a+"k_norm.weight"],
		})
	}
	return dec
}

// kvCache holds the keys and values of a batch of rows: per layer, keys as
// [row,KVH,Dh,S] (so a query's scores over all slots are a sum of rows
// scaled by its entries) and values as [row,KVH,S,Dh]. length[r] slots of
// row r are filled; a row's tokens sit at slots 0, 1, … (its positions).
type kvCache struct {
	slots  int
	keys   [][]float32
	values [][]float32
	length []int
}

// newCache returns an empty cache for rows rows of slots slots.
func (dec *decoder) newCache(rows, slots int) *kvCache {
	c := &kvCache{slots: slots, length: make([]int, rows)}
	size := rows * dec.cfg.KVHeads * dec.cfg.HeadDim() * slots
	for range dec.cfg.Layers {
		c.keys = append(c.keys, make([]float32, size))
		c.values = append(c.values, make([]float32, size))
	}
	return c
}

// rowsPerPart is the fewest entries a forward pass of a small model (see
// decoder.serialParts) gives each core of its own: with as many, the
// entries are split between cores, each running the whole pass on its share
// with serial kernels, one fork and join per pass instead of one per
// product.
const rowsPerPart = 8

// forward appends tokens[e] to the cache of row rows[e] for every entry e
// and returns the logits after each entry's last token, [len(rows)·V].
// Entries are independent, so the result does not depend on the split.
func (dec *decoder) forward(c *kvCache, rows []int, tokens [][]int) []float32 {
	parts := min(runtime.GOMAXPROCS(0), len(rows)/rowsPerPart)
	if parts <= 1 || !dec.serialParts {
		return dec.forwardPart(c, rows, tokens, true)
	}
	V := dec.cfg.Vocab
	logits := make([]float32, len(rows)*V)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := len(rows)*p/parts, len(rows)*(p+1)/parts
		wg.Go(func() { copy(logits[lo*V:hi*V], dec.forwardPart(c, rows[lo:hi], tokens[lo:hi], false)) })
	}
	wg.Wait()
	return logits
}

// parallel is kernel.Parallel when par, else fn(0, n).
func parallel(par bool, n, minChunk int, fn func(lo, hi int)) {
	if par {
		kernel.Parallel(n, minChunk, fn)
	} else {
		fn(0, n)
	}
}

// forwardPart is forward on one share of the entries; par spreads each
// product and loop over the cores.
func (dec *decoder) forwardPart(c *kvCache, rows []int, tokens [][]int, par bool) []float32 {
	cfg := dec.cfg
	d, dh := cfg.Dim, cfg.HeadDim()
	// Flatten the entries into N token rows with their cache row and slot
	// (the token's position).
	var tok, row, slot []int
	last := make([]int, len(rows)) // index of each entry's last token
	for e, r := range rows {
		for j, t := range tokens[e] {
			tok, row, slot = append(tok, t), append(row, r), append(slot, c.length[r]+j)
		}
		last[e] = len(row) - 1
	}
	n := len(row)
	x := make([]float32, n*d)
	dec.embedTokens(x, tok, slot)
	qkvWidth := (cfg.Heads + 2*cfg.KVHeads) * dh
	h := make([]float32, n*d)
	qkv := make([]float32, n*qkvWidth)
	att := make([]float32, n*cfg.Heads*dh)
	up := make([]float32, n*dec.layers[0].up.out)
	hidden := up
	if cfg.Family == "llama" {
		hidden = make([]float32, n*cfg.Hidden)
	}
	for l, ly := range dec.layers {
		dec.norm(h, x, ly.norm1W, ly.norm1B, n)
		ly.qkv.forward(par, qkv, h, n)
		if ly.qNormW != nil {
			dec.qkNorm(&ly, qkv, n, qkvWidth, nil, par)
		}
		if dec.invFreq != nil {
			dec.rotate(qkv, slot, qkvWidth, 1, par)
		}
		dec.store(c, l, qkv, row, slot, qkvWidth)
		dec.attend(c, l, att, qkv, row, slot, qkvWidth, par)
		ly.out.forward(par, h, att, n)
		addTo(x, h)
		dec.norm(h, x, ly.norm2W, ly.norm2B, n)
		ly.up.forward(par, up, h, n)
		dec.activate(hidden, nil, up, n, par)
		ly.down.forward(par, h, hidden, n)
		addTo(x, h)
	}
	for e, r := range rows {
		c.length[r] += len(tokens[e])
	}
	xl := make([]float32, len(rows)*d)
	for e, i := range last {
		copy(xl[e*d:(e+1)*d], x[i*d:(i+1)*d])
	}
	hl := make([]float32, len(xl))
	dec.norm(hl, xl, dec.normW, dec.normB, len(rows))
	logits := make([]float32, len(rows)*cfg.Vocab)
	dec.head.forward(par, logits, hl, len(rows))
	return logits
}

func addTo(x, y []float32) { kernel.Add(x[:len(y)], y) }

// embedTokens writes the input rows of tokens at positions into x [N,d]:
// the token embedding, plus gpt's learned position embedding.
func (dec *decoder) embedTokens(x []float32, tokens, positions []int) {
	d := dec.cfg.Dim
	for i, t := range tokens {
		xi := x[i*d : (i+1)*d]
		copy(xi, dec.embed[t*d:(t+1)*d])
		if dec.pos != nil {
			addTo(xi, dec.pos[positions[i]*d:(positions[i]+1)*d])
		}
	}
}

// norm writes LayerNorm (gain w, bias b) for gpt or RMSNorm for llama of
// the n rows of x into out.
func (dec *decoder) norm(out, x, w, b []float32, n int) {
	d := dec.cfg.Dim
	xhat := make([]float32, d)
	for i := range n {
		kernel.Norm(out[i*d:(i+1)*d], xhat, x[i*d:(i+1)*d], w, b, dec.cfg.NormEps, dec.cfg.Family == "gpt")
	}
}

// qkNorm applies Qwen3's per-head RMSNorms in place to the query heads
// (gain ly.qNormW) and key heads (ly.kNormW) of the n rows of qkv; with s
// not nil it keeps each head row's x̂ and 1/σ for the backward pass (row i,
// head h at index i·(H+KVH)+h).
func (dec *decoder) qkNorm(ly *decoderLayer, qkv []float32, n, width int, s *normed, par bool) {
	cfg := dec.cfg
	dh, heads := cfg.HeadDim(), cfg.Heads+cfg.KVHeads
	parallel(par, n, 16, func(lo, hi int) {
		xhat := make([]float32, dh)
		for i := lo; i < hi; i++ {
			for hd := range heads {
				w := ly.qNormW
				if hd >= cfg.Heads {
					w = ly.kNormW
				}
				v, xh := qkv[i*width+hd*dh:i*width+(hd+1)*dh], xhat
				if s != nil {
					xh = s.xhat[(i*heads+hd)*dh : (i*heads+hd+1)*dh]
				}
				r := kernel.Norm(v, xh, v, w, nil, cfg.NormEps, false)
				if s != nil {
					s.rstd[i*heads+hd] = r
				}
			}
		}
	})
}

// store writes each token row's key and value heads into layer l's cache.
func (dec *decoder) store(c *kvCache, l int, qkv []float32, row, slot []int, width int) {
	cfg := dec.cfg
	dh, S := cfg.HeadDim(), c.slots
	kOff, vOff := cfg.Heads*dh, (cfg.Heads+cfg.KVHeads)*dh
	for i, r := range row {
		for hd := range cfg.KVHeads {
			base := (r*cfg.KVHeads + hd) * dh * S
			k := qkv[i*width+kOff+hd*dh : i*width+kOff+(hd+1)*dh]
			for j, v := range k {
				c.keys[l][base+j*S+slot[i]] = v
			}
			copy(c.values[l][base+slot[i]*dh:], qkv[i*width+vOff+hd*dh:i*width+vOff+(hd+1)*dh])
		}
	}
}

// attend writes, for every token row and query head, softmax(q·K/√Dh)·V over
// the slots 0…slot of its cache row into att [n,H·Dh].
func (dec *decoder) attend(c *kvCache, l int, att, qkv []float32, row, slot []int, width int, par bool) {
	cfg := dec.cfg
	dh, S, group := cfg.HeadDim(), c.slots, cfg.Heads/cfg.KVHeads
	scale := float32(1 / math.Sqrt(float64(dh)))
	parallel(par, len(row)*cfg.Heads, 16, func(lo, hi int) {
		scores := make([]float32, S)
		q := make([]float32, dh)
		for job := lo; job < hi; job++ {
			i, hd := job/cfg.Heads, job%cfg.Heads
			base := (row[i]*cfg.KVHeads + hd/group) * dh * S
			keys, values := c.keys[l][base:base+dh*S], c.values[l][base:base+dh*S]
			for j, v := range qkv[i*width+hd*dh : i*width+(hd+1)*dh] {
				q[j] = v * scale
			}
			o := att[i*cfg.Heads*dh+hd*dh : i*cfg.Heads*dh+(hd+1)*dh]
			kernel.Attention(o, q, keys, values, scores, slot[i]+1, S)
		}
	})
}

// activate applies the MLP nonlinearity: gpt's activation of up into out
// (which may be up itself), llama's silu(gate)·up from the [n,2·hid] rows
// of up into out [n,hid]. For exact GELU, cdf (if not nil) receives Φ(up)
// for the backward pass.
func (dec *decoder) activate(out, cdf, up []float32, n int, par bool) {
	if dec.cfg.Family == "llama" {
		hid := dec.cfg.Hidden
		parallel(par, n, 4, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				kernel.SiLUMul(out[i*hid:(i+1)*hid], up[i*2*hid:i*2*hid+hid], up[i*2*hid+hid:(i+1)*2*hid])
			}
		})
		return
	}
	width := len(up) / n
	act := dec.cfg.Activation
	parallel(par, n, 4, func(lo, hi int) {
		x, y := up[lo*width:hi*width], out[lo*width:hi*width]
		switch act {
		case "relu":
			for i, v := range x {
				y[i] = max(v, 0)
			}
		case "gelu_new":
			for i, v := range x {
				v := float64(v)
				y[i] = float32(0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))))
			}
		default:
			var c []float32
			if cdf != nil {
				c = cdf[lo*width : hi*width]
			}
			kernel.GELU(y, c, x)
		}
	})
}
