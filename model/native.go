package model

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/hacrl/hacrl/internal/kernel"
)

// decoder is the native engine's view of a model: its float32 weights
// copied to host memory (and packed for the forward products) once per
// parameter update, with the forward pass written directly over them. This
// file has decoding with per-row key/value caches (Generate);
// native_train.go has whole-sequence passes and their backward pass (Score,
// Trainer.Accumulate). It computes the same functions as the graphs (see
// the package doc's "Architectures"), in float32: on GoMLX's Go backend a
// decoding step is dozens of small products run at a few GFLOP/s, which
// internal/kernel runs near the machine's peak.
type decoder struct {
	cfg    Config
	src    *tensors.Tensor // the first parameter tensor it was built from
	embed  []float32       // [V,d] token embeddings
	pos    []float32       // gpt: [MaxSeq,d] learned positions
	layers []decoderLayer
	normW  []float32 // final norm
	normB  []float32 // gpt
	head   []float32 // [d,V]: the LM head (or the tied embeddings) transposed
	headP  *kernel.Packed
	headW  []float32 // [V,d]: lm_head.weight; nil when tied to embed
	// invFreq are llama's rotary frequencies (Config.ropeFrequencies) as float32.
	invFreq []float32
}

// decoderLayer holds one block's weights in product order: the attention
// input projection has the q | k | v columns of all heads side by side, and
// llama's gate and up projections share one matrix (gate columns first).
type decoderLayer struct {
	norm1W, norm1B []float32
	qkvW, qkvB     []float32 // [d,(H+2·KVH)·Dh], bias or nil
	outW, outB     []float32 // [H·Dh,d]
	norm2W, norm2B []float32
	upW, upB       []float32 // gpt c_fc [d,hid]; llama gate|up [d,2·hid]
	downW, downB   []float32 // [hid,d]
	qNormW, kNormW []float32 // qwen3: the per-head query and key RMSNorm gains [Dh], or nil
	// The four weights packed for the forward products.
	qkvP, outP, upP, downP *kernel.Packed
}

// pack lays out the layer's weights for the forward products.
func (ly *decoderLayer) pack(d int) {
	ly.qkvP = kernel.Pack(ly.qkvW, d, len(ly.qkvW)/d)
	ly.outP = kernel.Pack(ly.outW, len(ly.outW)/d, d)
	ly.upP = kernel.Pack(ly.upW, d, len(ly.upW)/d)
	ly.downP = kernel.Pack(ly.downW, len(ly.downW)/d, d)
}

// newDecoder copies params (float32, in paramSpecs order) to the host and
// packs the weights for the forward products.
func newDecoder(cfg Config, specs []paramSpec, params []*tensors.Tensor) (*decoder, error) {
	dec, err := hostWeights(cfg, specs, params)
	if err != nil {
		return nil, err
	}
	for i := range dec.layers {
		dec.layers[i].pack(cfg.Dim)
	}
	return dec, nil
}

// hostWeights copies params to the host in the decoder's layout.
func hostWeights(cfg Config, specs []paramSpec, params []*tensors.Tensor) (*decoder, error) {
	w := make(map[string][]float32, len(specs))
	for i, s := range specs {
		if params[i].DType() != dtypes.Float32 {
			return nil, fmt.Errorf("model: native decoder: parameter %s is %s, want float32", s.name, params[i].DType())
		}
		w[s.name] = tensors.MustCopyFlatData[float32](params[i])
	}
	d, dh := cfg.Dim, cfg.HeadDim()
	dec := &decoder{cfg: cfg, src: params[0], embed: w[cfg.embeddingName()]}
	dec.headW = w["lm_head.weight"]
	dec.head = transpose(dec.headRows(), cfg.Vocab, d)
	dec.headP = kernel.Pack(dec.head, d, cfg.Vocab)
	if cfg.Family == "gpt" {
		dec.pos, dec.normW, dec.normB = w["wpe.weight"], w["ln_f.weight"], w["ln_f.bias"]
		for l := range cfg.Layers {
			p := fmt.Sprintf("h.%d.", l)
			dec.layers = append(dec.layers, decoderLayer{
				norm1W: w[p+"ln_1.weight"], norm1B: w[p+"ln_1.bias"],
				qkvW: w[p+"attn.c_attn.weight"], qkvB: w[p+"attn.c_attn.bias"],
				outW: w[p+"attn.c_proj.weight"], outB: w[p+"attn.c_proj.bias"],
				norm2W: w[p+"ln_2.weight"], norm2B: w[p+"ln_2.bias"],
				upW: w[p+"mlp.c_fc.weight"], upB: w[p+"mlp.c_fc.bias"],
				downW: w[p+"mlp.c_proj.weight"], downB: w[p+"mlp.c_proj.bias"],
			})
		}
		return dec, nil
	}
	dec.normW = w["model.norm.weight"]
	for _, f := range cfg.ropeFrequencies() {
		dec.invFreq = append(dec.invFreq, float32(f))
	}
	q, kv := cfg.Heads*dh, cfg.KVHeads*dh
	for l := range cfg.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		a := p + "self_attn."
		layer := decoderLayer{
			norm1W: w[p+"input_layernorm.weight"],
			qkvW:   concatColumns(d, []int{q, kv, kv}, w[a+"q_proj.weight"], w[a+"k_proj.weight"], w[a+"v_proj.weight"]),
			outW:   w[a+"o_proj.weight"], outB: w[a+"o_proj.bias"],
			norm2W: w[p+"post_attention_layernorm.weight"],
			upW:    concatColumns(d, []int{cfg.Hidden, cfg.Hidden}, w[p+"mlp.gate_proj.weight"], w[p+"mlp.up_proj.weight"]),
			downW:  w[p+"mlp.down_proj.weight"],
			qNormW: w[a+"q_norm.weight"], kNormW: w[a+"k_norm.weight"],
		}
		if cfg.AttentionBias {
			layer.qkvB = append(append(append([]float32(nil), w[a+"q_proj.bias"]...), w[a+"k_proj.bias"]...), w[a+"v_proj.bias"]...)
		}
		dec.layers = append(dec.layers, layer)
	}
	return dec, nil
}

// headRows is the LM head as [V,d]: lm_head.weight or the tied embeddings.
func (dec *decoder) headRows() []float32 {
	if dec.headW != nil {
		return dec.headW
	}
	return dec.embed
}

// concatColumns places row-major matrices [rows,widths[i]] side by side.
func concatColumns(rows int, widths []int, parts ...[]float32) []float32 {
	total := 0
	for _, w := range widths {
		total += w
	}
	out := make([]float32, rows*total)
	for r := range rows {
		at := r * total
		for i, p := range parts {
			at += copy(out[at:], p[r*widths[i]:(r+1)*widths[i]])
		}
	}
	return out
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

// newCache returns an empty cache for rows rows of slots slots, its memory
// from ar (nil: freshly allocated). Slots are read only after they are
// written, so recycled memory needs no clearing.
func (dec *decoder) newCache(rows, slots int, ar *arena) *kvCache {
	c := &kvCache{slots: slots, length: make([]int, rows)}
	size := rows * dec.cfg.KVHeads * dec.cfg.HeadDim() * slots
	alloc := func() []float32 {
		if ar != nil {
			return ar.get(size)
		}
		return make([]float32, size)
	}
	for range dec.cfg.Layers {
		c.keys = append(c.keys, alloc())
		c.values = append(c.values, alloc())
	}
	return c
}

// rowsPerPart is the fewest entries a forward pass gives each core of its
// own: with as many, the entries are split between cores, each running the
// whole pass on its share with serial kernels, one fork and join per pass
// instead of one per product.
const rowsPerPart = 8

// forward appends tokens[e] to the cache of row rows[e] for every entry e
// and returns the logits after each entry's last token, [len(rows)·V].
// Entries are independent, so the result does not depend on the split.
func (dec *decoder) forward(c *kvCache, rows []int, tokens [][]int) []float32 {
	parts := min(runtime.GOMAXPROCS(0), len(rows)/rowsPerPart)
	if parts <= 1 {
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

// matmul is kernel.MatMulPacked, spread over the cores when par.
func matmul(par bool, out, x []float32, w *kernel.Packed, b []float32, m int) {
	if par {
		kernel.MatMulPacked(out, x, w, b, m)
	} else {
		kernel.MatMulPackedSerial(out, x, w, b, m)
	}
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
	upWidth := len(dec.layers[0].upW) / d
	up := make([]float32, n*upWidth)
	hidden := up
	if cfg.Family == "llama" {
		hidden = make([]float32, n*cfg.Hidden)
	}
	for l, ly := range dec.layers {
		dec.norm(h, x, ly.norm1W, ly.norm1B, n)
		matmul(par, qkv, h, ly.qkvP, ly.qkvB, n)
		if ly.qNormW != nil {
			dec.qkNorm(&ly, qkv, n, qkvWidth, nil, par)
		}
		if dec.invFreq != nil {
			dec.rotate(qkv, slot, qkvWidth, 1, par)
		}
		dec.store(c, l, qkv, row, slot, qkvWidth)
		dec.attend(c, l, att, qkv, row, slot, qkvWidth, par)
		matmul(par, h, att, ly.outP, ly.outB, n)
		addTo(x, h)
		dec.norm(h, x, ly.norm2W, ly.norm2B, n)
		matmul(par, up, h, ly.upP, ly.upB, n)
		dec.activate(hidden, nil, up, n, par)
		matmul(par, h, hidden, ly.downP, ly.downB, n)
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
	matmul(par, logits, hl, dec.headP, nil, len(rows))
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
