package model

import (
	"fmt"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best dot-imported
)

// gptBlock is one pre-norm GPT-2 block:
//
//	x = x + c_proj(attention(c_attn(ln_1(x))))
//	x = x + mlp.c_proj(act(mlp.c_fc(ln_2(x))))
//
// The linear layers are GPT-2 "Conv1D"s: weight [in,out], y = x·W + b.
func (n *net) gptBlock(l int, x *Node, at *attention) (out, k, v *Node) {
	p := fmt.Sprintf("h.%d.", l)
	c := n.cfg

	h := layerNorm(x, n.p(p+"ln_1.weight"), n.p(p+"ln_1.bias"), c.NormEps)
	// c_attn's output columns are q | k | v; three products on column slices
	// of the weight avoid slicing the activations.
	w, b := n.p(p+"attn.c_attn.weight"), n.p(p+"attn.c_attn.bias")
	part := func(i int) *Node {
		d := c.Dim
		y := linear(h, Slice(w, AxisRange(), AxisRange(i*d, (i+1)*d)), Slice(b, AxisRange(i*d, (i+1)*d)))
		return splitHeads(y, c.Heads) // [B,T,H,Dh]
	}
	a, k, v := n.attend(l, part(0), keysTransposed(part(1)), headsFirst(part(2)), at)
	x = Add(x, linear(a, n.p(p+"attn.c_proj.weight"), n.p(p+"attn.c_proj.bias")))

	h = layerNorm(x, n.p(p+"ln_2.weight"), n.p(p+"ln_2.bias"), c.NormEps)
	h = n.activate(c.Activation, linear(h, n.p(p+"mlp.c_fc.weight"), n.p(p+"mlp.c_fc.bias")))
	return Add(x, linear(h, n.p(p+"mlp.c_proj.weight"), n.p(p+"mlp.c_proj.bias"))), k, v
}

// linear is x [...,in] · w [in,out] (+ b [out]): GPT-2's Conv1D, and
// torch.nn.Linear with the weight held transposed.
func linear(x, w, b *Node) *Node {
	y := DotGeneral(x, []int{x.Rank() - 1}, nil, w, []int{0}, nil)
	if b != nil {
		y = Add(y, lastAxis(b, y))
	}
	return y
}
