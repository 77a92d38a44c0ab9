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

	// proj is the linear layer named module (its LoRA adapters included),
	// whose Hugging Face path has the "transformer." our names lack.
	proj := func(x *Node, module string) *Node {
		return n.adapt(n.linear(x, n.p(p+module+".weight"), n.p(p+module+".bias")), x, "transformer."+p+module)
	}
	h := layerNorm(x, n.p(p+"ln_1.weight"), n.p(p+"ln_1.bias"), c.NormEps)
	// c_attn's output columns are q | k | v; three products on column slices
	// of the weight avoid slicing the activations. Its adapters' inner
	// activations are shared by the three.
	w, b := n.p(p+"attn.c_attn.weight"), n.p(p+"attn.c_attn.bias")
	path := "transformer." + p + "attn.c_attn"
	u := n.loraInput(h, path)
	part := func(i int) *Node {
		d := c.Dim
		y := n.linear(h, Slice(w, AxisRange(), AxisRange(i*d, (i+1)*d)), Slice(b, AxisRange(i*d, (i+1)*d)))
		y = n.adaptColumns(y, u, path, i*d, (i+1)*d)
		return splitHeads(y, c.Heads) // [B,T,H,Dh]
	}
	a, k, v := n.attend(l, part(0), keysTransposed(part(1)), headsFirst(part(2)), at)
	x = Add(x, proj(a, "attn.c_proj"))

	h = layerNorm(x, n.p(p+"ln_2.weight"), n.p(p+"ln_2.bias"), c.NormEps)
	h = n.activate(c.Activation, proj(h, "mlp.c_fc"))
	return Add(x, proj(h, "mlp.c_proj")), k, v
}

// linear is x [...,in] · w [in,out] (+ b [out]): GPT-2's Conv1D, and
// torch.nn.Linear with the weight held transposed.
func (n *net) linear(x, w, b *Node) *Node {
	y := n.dot(x, []int{x.Rank() - 1}, nil, w, []int{0}, nil)
	if b != nil {
		y = Add(y, lastAxis(b, y))
	}
	return y
}
