package model

import (
	"github.com/hacrl/hacrl/internal/kernel"
)

// lowRank is the LoRA adapters of one product of the native decoder (see
// adapters): the A matrices of the modules it adapts, stacked as one
// [R,in] matrix (R = rank × modules), and each module's B with the output
// columns it writes. The adapted product is
//
//	y += scale · (x·Aᵀ)·Wᵀ
//
// where W [out,R] holds the B matrices block-diagonally: module s's B
// [hi−lo, r] at rows [lo,hi) and columns [c0, c0+r), zero elsewhere. So a
// fused product (llama's q|k|v, gate|up) takes its adapters in two
// products whatever their number; a module left out has zero rows in W.
type lowRank struct {
	a       []float32 // [R,in]
	bs      []loraB
	R, in   int
	out     int
	scale   float32
	aT, wbd []float32 // Aᵀ [in,R] and W [out,R], built from a and bs (nil over a gradient buffer)
}

// loraB is one module's B [hi−lo, r] within lowRank's W.
type loraB struct {
	b          []float32
	lo, hi, c0 int
}

// attach gives dec's products the adapters of ad over flat, a buffer in
// ad's layout (its values, or a gradient). With derived, the products get
// the transposed A and block-diagonal W the passes multiply by (a decoder
// of values); without, only the views (a gradient decoder).
func (ad *adapters) attach(dec *decoder, flat []float32, derived bool) {
	views := flatViews(ad.specs, flat)
	off, _ := flatLayout(ad.specs)
	r := ad.cfg.Rank
	k := 0 // the next spec: each group's A matrices, then its B matrices (adapterSpecs)
	for _, group := range productGroups(ad.mods) {
		p := dec.layers[group[0].layer].product(group[0].proj)
		lr := &lowRank{R: r * len(group), in: group[0].in, out: p.out, scale: float32(ad.cfg.scale())}
		end := off[k+len(group)-1] + ad.specs[k+len(group)-1].size()
		lr.a = flat[off[k]:end:end] // the group's A matrices are adjacent
		k += len(group)
		for i, mod := range group {
			lr.bs = append(lr.bs, loraB{b: views[k], lo: mod.lo, hi: mod.hi, c0: i * r})
			k++
		}
		if derived {
			lr.derive()
		}
		p.lora = lr
	}
}

// derive builds aT and wbd from a and bs.
func (lr *lowRank) derive() {
	lr.aT = make([]float32, lr.in*lr.R)
	kernel.Transpose(lr.aT, lr.a, lr.R, lr.in)
	lr.wbd = make([]float32, lr.out*lr.R)
	r := lr.R / len(lr.bs)
	for _, s := range lr.bs {
		for i := range s.hi - s.lo {
			copy(lr.wbd[(s.lo+i)*lr.R+s.c0:], s.b[i*r:(i+1)*r])
		}
	}
}

// product returns the layer's product by lowRank's names for them.
func (ly *decoderLayer) product(name string) *proj {
	switch name {
	case "qkv":
		return &ly.qkv
	case "out":
		return &ly.out
	case "up":
		return &ly.up
	default:
		return &ly.down
	}
}

// forward adds the adapters' output for x [m,in] to y [m,out], on all
// cores when par.
func (lr *lowRank) forward(par bool, y, x []float32, m int) {
	u := make([]float32, m*lr.R)
	if par {
		kernel.MatMulBT(u, x, lr.a, nil, m, lr.in, lr.R)
		kernel.Scale(u, lr.scale)
		kernel.MatMulBTAdd(y, u, lr.wbd, m, lr.R, lr.out)
		return
	}
	kernel.MatMulBTSerial(u, x, lr.a, nil, m, lr.in, lr.R)
	kernel.Scale(u, lr.scale)
	t := make([]float32, m*lr.out)
	kernel.MatMulBTSerial(t, u, lr.wbd, nil, m, lr.R, lr.out)
	kernel.Add(y, t)
}

// backward adds to g (the adapters' gradients) their gradients for input x
// [m,in] and output gradient dy [m,out], and, when dx is not nil, the
// gradient through the adapters at the input to dx [m,in]. With u =
// scale·x·Aᵀ:
//
//	dB_s += (dyᵀ·u)'s block s,  du = scale·dy·W,  dA += duᵀ·x,  dx += du·A
func (lr *lowRank) backward(g *lowRank, dx, x, dy []float32, m int) {
	u := make([]float32, m*lr.R)
	kernel.MatMulBT(u, x, lr.a, nil, m, lr.in, lr.R)
	kernel.Scale(u, lr.scale)
	dW := make([]float32, lr.out*lr.R)
	kernel.MatMulTAdd(dW, dy, u, lr.out, m, lr.R)
	r := lr.R / len(lr.bs)
	for _, s := range g.bs {
		for i := range s.hi - s.lo {
			kernel.Add(s.b[i*r:(i+1)*r], dW[(s.lo+i)*lr.R+s.c0:(s.lo+i)*lr.R+s.c0+r])
		}
	}
	du := u // u is spent
	kernel.MatMul(du, dy, lr.wbd, nil, m, lr.out, lr.R)
	kernel.Scale(du, lr.scale)
	kernel.MatMulTAdd(g.a, du, x, lr.R, m, lr.in)
	if dx != nil {
		kernel.MatMulBTAdd(dx, du, lr.aT, m, lr.R, lr.in)
	}
}

// gradDecoder returns a gradient decoder over grads, a buffer in ad's
// layout: its products hold the adapters' gradients only, and every other
// gradient view is nil, which the backward pass takes for a frozen
// parameter.
func (ad *adapters) gradDecoder(cfg Config, grads []float32) *decoder {
	g := &decoder{cfg: cfg, layers: make([]decoderLayer, cfg.Layers)}
	ad.attach(g, grads, false)
	return g
}
