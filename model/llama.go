package model

import (
	"fmt"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best dot-imported
)

// llamaBlock is one pre-norm Llama/Qwen2/Qwen3 block:
//
//	q, k, v = rope(q_proj(h)), rope(k_proj(h)), v_proj(h)   with h = input_layernorm(x)
//	(Qwen3: q, k = rope(q_norm(q_proj(h))), rope(k_norm(k_proj(h))), RMSNorm per head)
//	x = x + o_proj(attention(q, k, v))
//	x = x + down_proj(silu(gate_proj(h)) ⊙ up_proj(h))      with h = post_attention_layernorm(x)
//
// The linear layers are torch.nn.Linear: weight [out,in] in checkpoints, y =
// x·Wᵀ (+ b); the model holds the weights transposed, so y = linear(x, W).
func (n *net) llamaBlock(l int, x *Node, at *attention) (out, k, v *Node) {
	p := fmt.Sprintf("model.layers.%d.", l)
	c := n.cfg
	a := p + "self_attn."

	// proj is the linear layer named module (its LoRA adapters included).
	proj := func(x *Node, module string) *Node {
		return n.adapt(n.linear(x, n.p(p+module+".weight"), n.optional(p+module+".bias")), x, p+module)
	}
	h := rmsNorm(x, n.p(p+"input_layernorm.weight"), c.NormEps)
	q := splitHeads(proj(h, "self_attn.q_proj"), c.Heads) // [B,T,H,Dh]
	k = splitHeads(proj(h, "self_attn.k_proj"), c.KVHeads)
	v = splitHeads(proj(h, "self_attn.v_proj"), c.KVHeads)
	if c.QKNorm {
		q = rmsNorm(q, n.p(a+"q_norm.weight"), c.NormEps)
		k = rmsNorm(k, n.p(a+"k_norm.weight"), c.NormEps)
	}
	cos, sin := n.rotary(at, q)
	att, k, v := n.attend(l, rotate(q, cos, sin), keysTransposed(rotate(k, cos, sin)), headsFirst(v), at)
	x = Add(x, proj(att, "self_attn.o_proj"))

	h = rmsNorm(x, n.p(p+"post_attention_layernorm.weight"), c.NormEps)
	gate := n.silu(proj(h, "mlp.gate_proj"))
	h = Mul(gate, proj(h, "mlp.up_proj"))
	return Add(x, proj(h, "mlp.down_proj")), k, v
}

// rotary returns the cos and sin tables [B,T,1,Dh] of the queries' positions,
// Hugging Face's RoPE: angle = position·inv_freq (Config.ropeFrequencies),
// and both halves of the head share the angles.
func (n *net) rotary(at *attention, like *Node) (cos, sin *Node) {
	if at.cos == nil {
		dh := n.cfg.HeadDim()
		invFreq := n.cfg.ropeFrequencies()
		B, T := at.pos.Shape().Dimensions[0], at.pos.Shape().Dimensions[1]
		g := like.Graph()
		// The angle is computed in float32 as Hugging Face does, then cast.
		f := ConvertDType(Const(g, invFreq), dtypes.Float32)
		angle := Mul(ConvertDType(Reshape(at.pos, B, T, 1, 1), dtypes.Float32), Reshape(f, 1, 1, 1, dh/2))
		angle = Concatenate([]*Node{angle, angle}, -1)
		at.cos = ConvertDType(Cos(angle), like.DType())
		at.sin = ConvertDType(Sin(angle), like.DType())
	}
	return at.cos, at.sin
}

// rotate applies rotary embeddings to x [B,T,heads,Dh]:
// x·cos + rotate_half(x)·sin, rotate_half(x) = (−x₂, x₁) for halves x₁, x₂.
func rotate(x, cos, sin *Node) *Node {
	half := x.Shape().Dimensions[3] / 2
	x1, x2 := Slice(x, AxisRange(), AxisRange(), AxisRange(), AxisRange(0, half)), Slice(x, AxisRange(), AxisRange(), AxisRange(), AxisRange(half))
	rot := Concatenate([]*Node{Neg(x2), x1}, -1)
	return Add(Mul(x, cos), Mul(rot, sin))
}

// silu is x·σ(x). σ comes from the fused softmax of the pair (x, 0) and the
// derivative σ + x·σ·(1−σ) is attached by hand, so that neither pass runs
// the backend's scalar Logistic or Exp (see "Speed" in the package doc).
func (n *net) silu(x *Node) *Node {
	pair := Concatenate([]*Node{ExpandAxes(x, -1), ExpandAxes(ZerosLike(x), -1)}, -1)
	sig := StopGradient(Squeeze(Slice(Softmax(pair, -1), AxisRange(), AxisRange(), AxisRange(), AxisRange(0, 1)), -1))
	xs := StopGradient(x)
	return n.withGradient(Mul(xs, sig), x, func(v *Node) *Node {
		return Mul(v, Add(sig, Mul(Mul(xs, sig), OneMinus(sig))))
	})
}
