package model

import (
	"fmt"
	"math"
	"os"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best dot-imported
	"github.com/gomlx/gomlx/ml/layers/activation"
)

// net is one computation graph's view of a model: the config and the
// parameters as graph nodes, by Hugging Face name.
type net struct {
	cfg    Config
	specs  []paramSpec
	params []*Node // in paramSpecs order
	w      map[string]*Node
	train  bool     // the graph takes gradients: wire the hand-written backward passes
	lora   *loraNet // the LoRA adapters (net_lora.go), or nil
	bf16   bool     // matrix products on bfloat16 operands (Model.SetComputeDType)
}

// dot is DotGeneral(x, xContract, xBatch, y, yContract, yBatch), on
// bfloat16 operands when the model computes in bf16: the result, rounded to
// bfloat16, returns to x's dtype, as under PyTorch's autocast.
func (n *net) dot(x *Node, xContract, xBatch []int, y *Node, yContract, yBatch []int) *Node {
	if !n.bf16 || x.DType() == dtypes.BFloat16 {
		return DotGeneral(x, xContract, xBatch, y, yContract, yBatch)
	}
	return ConvertDType(DotGeneral(toBF16(x), xContract, xBatch, toBF16(y), yContract, yBatch), x.DType())
}

// toBF16 is x in bfloat16.
func toBF16(x *Node) *Node { return ConvertDType(x, dtypes.BFloat16) }

func newNet(cfg Config, specs []paramSpec, params []*Node) *net {
	w := make(map[string]*Node, len(specs))
	for i, s := range specs {
		w[s.name] = params[i]
	}
	return &net{cfg: cfg, specs: specs, params: params, w: w}
}

func (n *net) p(name string) *Node {
	x, ok := n.w[name]
	if !ok {
		panic(fmt.Sprintf("model: no parameter %q", name))
	}
	return x
}

// optional returns the parameter name, or nil if the config has none by that name.
func (n *net) optional(name string) *Node { return n.w[name] }

// attention says where the queries of one forward pass sit and what they may
// see. Keys and values either come from the tokens of the pass itself
// (cache == nil: scoring, training, prompt prefill) or from a KV cache that
// the pass's single new token is written into at slot (decoding).
//
// Layouts are chosen so that both attention products are plain batched
// matrix products on the Go backend (one batch axis, rhs contracted on its
// first non-batch axis): keys are kept transposed, [B,KVH,Dh,S], values as
// [B,KVH,S,Dh].
type attention struct {
	pos      *Node   // [B,T] int32: position id of each query token
	mask     *Node   // [B,T,S] bool: query t may attend key slot s
	causal   bool    // mask is exactly causal: no padding before any row's tokens, no cache
	cache    []*Node // nil, or per layer keys [B,KVH,Dh,S] and values [B,KVH,S,Dh]
	slot     *Node   // scalar int32: the cache slot written by a decoding pass
	bias     *Node   // [B·KVH,G·T,S] additive mask (0 or −1e30), built on first use
	cos, sin *Node   // [B,T,1,Dh] rotary tables (llama), built on first use
}

// newAttention builds positions and mask for queries at cache slots qSlots
// ([T] int32) over S key slots, for rows whose first pad[b] slots are left
// padding. A query sees the keys at slots pad[b]..its own slot; its position
// id is its slot minus pad[b]. A padding query sees only itself, so that no
// softmax row is empty.
func newAttention(qSlots, pad *Node, S int) *attention {
	g := qSlots.Graph()
	B, T := pad.Shape().Dimensions[0], qSlots.Shape().Dimensions[0]
	q := BroadcastToDims(Reshape(qSlots, 1, T, 1), B, T, S)
	k := BroadcastToDims(Iota(g, shapes.Make(dtypes.Int32, 1, 1, S), 2), B, T, S)
	p := BroadcastToDims(Reshape(pad, B, 1, 1), B, T, S)
	mask := LogicalAnd(LessOrEqual(k, q), LogicalOr(GreaterOrEqual(k, p), Equal(k, q)))
	pos := Max(Sub(BroadcastToDims(Reshape(qSlots, 1, T), B, T), BroadcastToDims(Reshape(pad, B, 1), B, T)),
		ScalarZero(g, dtypes.Int32))
	return &attention{pos: pos, mask: mask}
}

// forward maps tokens [B,T] to the last block's output [B,T,D] (head turns it
// into logits) and returns each layer's keys and values ([B,KVH,T,Dh] without
// a cache, the updated caches with one).
func (n *net) forward(tokens *Node, at *attention) (hidden *Node, kv []*Node) {
	x := n.embed(tokens, at)
	kv = make([]*Node, 0, 2*n.cfg.Layers)
	for l := range n.cfg.Layers {
		var k, v *Node
		if n.cfg.Family == "gpt" {
			x, k, v = n.gptBlock(l, x, at)
		} else {
			x, k, v = n.llamaBlock(l, x, at)
		}
		kv = append(kv, k, v)
	}
	return x, kv
}

func (n *net) embed(tokens *Node, at *attention) *Node {
	x := Gather(n.p(n.cfg.embeddingName()), ExpandAxes(tokens, -1))
	if n.cfg.Family == "gpt" {
		// Padding past MaxSeq (a length bucket may exceed it) reads the last
		// position; its output is never used.
		pos := MinScalar(at.pos, float64(n.cfg.MaxSeq-1))
		x = Add(x, Gather(n.p("wpe.weight"), ExpandAxes(pos, -1)))
	}
	return x
}

// head applies the final norm and the LM head: logits = norm(x)·Wᵀ, W [V,D].
func (n *net) head(x *Node) *Node {
	if n.cfg.Family == "gpt" {
		x = layerNorm(x, n.p("ln_f.weight"), n.p("ln_f.bias"), n.cfg.NormEps)
	} else {
		x = rmsNorm(x, n.p("model.norm.weight"), n.cfg.NormEps)
	}
	w := n.optional("lm_head.weight")
	if w == nil {
		w = n.p(n.cfg.embeddingName())
	}
	return n.dot(x, []int{2}, nil, w, []int{1}, nil)
}

// attend runs causal multi-head attention of layer l on queries q
// [B,T,H,Dh], keys kT [B,KVH,Dh,T] and values v [B,KVH,T,Dh]; with a cache,
// the new key and value (T = 1) are first written into the layer's cache at
// the decoding slot. Query head h uses key/value head h/(H/KVH), as Hugging
// Face's repeat_kv does. It returns the heads' outputs as [B,T,H·Dh] and the
// keys and values attended to.
func (n *net) attend(l int, q, kT, v *Node, at *attention) (out, keys, values *Node) {
	if at.cache != nil {
		kT = writeSlot(at.cache[2*l], kT, at.slot, 3)
		v = writeSlot(at.cache[2*l+1], v, at.slot, 2)
	}
	B, T, H, Dh := q.Shape().Dimensions[0], q.Shape().Dimensions[1], q.Shape().Dimensions[2], q.Shape().Dimensions[3]
	KVH, S := kT.Shape().Dimensions[1], kT.Shape().Dimensions[3]
	G := H / KVH
	decomposed := func() *Node {
		q := TransposeAllDims(MulScalar(q, 1/math.Sqrt(float64(Dh))), 0, 2, 1, 3) // [B,H,T,Dh]
		q = Reshape(q, B*KVH, G*T, Dh)
		o := n.attentionProducts(q, Reshape(kT, B*KVH, Dh, S), Reshape(v, B*KVH, S, Dh), at.maskBias(KVH, G, q.DType()))
		o = Transpose(Reshape(o, B, H, T, Dh), 1, 2) // [B,T,H,Dh]
		return Reshape(o, B, T, H*Dh)
	}
	use, vjp := n.fusedAttention(q.Graph().Backend().Capabilities(), at, Dh)
	if !use {
		return decomposed(), kT, v
	}
	fused := func() *Node {
		o, _ := BackendFusedScaledDotProductAttention(toBF16(headsFirst(q)), toBF16(TransposeAllDims(kT, 0, 1, 3, 2)), toBF16(v),
			compute.AttentionAxesLayoutBHSD, &compute.ScaledDotProductAttentionConfig{Scale: 1 / math.Sqrt(float64(Dh)), Causal: true})
		return Reshape(ConvertDType(headsFirst(o), q.DType()), B, T, H*Dh) // [B,H,T,Dh] → [B,T,H·Dh]
	}
	out, _ = InternalFusedOpCaller(fused, decomposed, !vjp)
	return out, kT, v
}

// FusedAttentionEnv names the environment variable that, set to 0, keeps
// the graphs on their own attention where the backend offers a fused one.
const FusedAttentionEnv = "HACRL_FUSED_ATTENTION"

// fusedAttention reports whether a pass's attention runs as the backend's
// fused scaled-dot-product attention (on XLA's CUDA plugin, cuDNN's flash
// attention, forward and backward) and whether the backend has its
// backward pass too (otherwise the gradient is that of the decomposed
// attention). It does when the backend offers the op and the fused op
// computes exactly what the decomposed attention does, in the model's
// precision: a pass without a KV cache whose mask is causal (scoring and
// training: rows right-padded, so every real token sees exactly the tokens
// before it), products in bfloat16 (cuDNN's flash attention takes half
// precision only), heads a multiple of 8 wide; and FusedAttentionEnv is
// not 0. Decoding and prefills of left-padded prompts keep the decomposed
// attention, as do float32 models.
func (n *net) fusedAttention(caps compute.Capabilities, at *attention, headDim int) (use, vjp bool) {
	if !n.bf16 || at.cache != nil || !at.causal || headDim%8 != 0 || os.Getenv(FusedAttentionEnv) == "0" {
		return false, false
	}
	return caps.Operations[compute.OpTypeFusedScaledDotProductAttention], caps.Operations[compute.OpTypeFusedScaledDotProductAttentionVJP]
}

// attentionProducts is softmax(q·kT + bias)·v for q [b,n,Dh], kT [b,Dh,S], v
// [b,S,Dh] and bias [b,n,S]; it returns [b,n,Dh].
//
// In a training graph its backward pass is written out rather than left to
// autodiff, which would contract two of the four gradient products over the
// last axis of their right operand (dS·kTᵀ and dO·vᵀ): the Go backend runs
// those small products on a dot-product-per-element kernel many times slower
// than its broadcast kernel. Here every product is [b,n,k]·[b,k,m], the
// layout of the forward pass, with the needed operands transposed
// explicitly. With dO the adjoint of the output and P the probabilities:
//
//	dP = dO·vᵀ,  dS = P ⊙ (dP − Σ_s dP⊙P),  dq = dS·k,  dkT = qᵀ·dS,  dv = Pᵀ·dO
func (n *net) attentionProducts(q, kT, v, bias *Node) *Node {
	bmm := func(x, y *Node) *Node { return n.dot(x, []int{2}, []int{0}, y, []int{1}, []int{0}) }
	probs := Softmax(Add(bmm(q, kT), bias), -1)
	o := bmm(probs, v)
	if !n.train {
		return o
	}
	// GoMLX attaches custom gradients to single nodes only, so q, kT and v
	// travel as one flat vector; q comes first and has the output's size, so
	// the output's adjoint is the vector's leading part.
	nq, nk, nv := q.Shape().Size(), kT.Shape().Size(), v.Shape().Size()
	packed := Concatenate([]*Node{Reshape(q, nq), Reshape(kT, nk), Reshape(v, nv)}, 0)
	q, kT, v, probs, o = StopGradient(q), StopGradient(kT), StopGradient(v), StopGradient(probs), StopGradient(o)
	packed = IdentityWithCustomGradient(packed, func(_, adj *Node) *Node {
		dO := Reshape(Slice(adj, AxisRange(0, nq)), o.Shape().Dimensions...)
		dP := bmm(dO, TransposeAllDims(v, 0, 2, 1))
		dS := Mul(probs, Sub(dP, ReduceAndKeep(Mul(dP, probs), ReduceSum, -1)))
		dq := bmm(dS, TransposeAllDims(kT, 0, 2, 1))
		dkT := bmm(TransposeAllDims(q, 0, 2, 1), dS)
		dv := bmm(TransposeAllDims(probs, 0, 2, 1), dO)
		return Concatenate([]*Node{Reshape(dq, nq), Reshape(dkT, nk), Reshape(dv, nv)}, 0)
	})
	zero := Sub(packed, StopGradient(packed)) // value 0; its adjoint reaches the custom gradient
	return Add(o, Reshape(Slice(zero, AxisRange(0, nq)), o.Shape().Dimensions...))
}

// maskBias returns the attention mask as an additive bias [B·KVH,G·T,S]:
// 0 where a query may attend, −1e30 where not. It is built once per graph.
func (at *attention) maskBias(kvHeads, group int, dtype dtypes.DType) *Node {
	if at.bias == nil {
		B, T, S := at.mask.Shape().Dimensions[0], at.mask.Shape().Dimensions[1], at.mask.Shape().Dimensions[2]
		g := at.mask.Graph()
		bias := Where(at.mask, ScalarZero(g, dtype), Scalar(g, dtype, -1e30))
		bias = BroadcastToDims(Reshape(bias, B, 1, 1, T, S), B, kvHeads, group, T, S)
		at.bias = StopGradient(Reshape(bias, B*kvHeads, group*T, S))
	}
	return at.bias
}

// writeSlot returns cache plus x (of size 1 on axis, 2 or 3) placed at slot
// along axis. Each cache slot is written exactly once and holds zeros until
// then (prefill pads with zeros), so adding is writing. The Go backend has no
// DynamicUpdateSlice; the placement is an outer product of x with a one-hot
// row, a plain batched matmul, which avoids broadcasting the whole cache.
func writeSlot(cache, x, slot *Node, axis int) *Node {
	dims := cache.Shape().Dimensions
	BK, S := dims[0]*dims[1], dims[axis]
	hit := ConvertDType(Equal(Iota(cache.Graph(), shapes.Make(dtypes.Int32, S), 0), slot), cache.DType())
	var placed *Node
	if axis == 3 { // keys [B,KVH,Dh,S]: x [BK,Dh,1] · hit [BK,1,S]
		hit = BroadcastToDims(Reshape(hit, 1, 1, S), BK, 1, S)
		placed = DotGeneral(Reshape(x, BK, dims[2], 1), []int{2}, []int{0}, hit, []int{1}, []int{0})
	} else { // values [B,KVH,S,Dh]: hit [BK,S,1] · x [BK,1,Dh]
		hit = BroadcastToDims(Reshape(hit, 1, S, 1), BK, S, 1)
		placed = DotGeneral(hit, []int{2}, []int{0}, Reshape(x, BK, 1, dims[3]), []int{1}, []int{0})
	}
	return Add(cache, Reshape(placed, dims...))
}

// splitHeads reshapes a projection [B,T,heads·Dh] to [B,T,heads,Dh].
func splitHeads(x *Node, heads int) *Node {
	d := x.Shape().Dimensions
	return Reshape(x, d[0], d[1], heads, d[2]/heads)
}

// keysTransposed turns keys [B,T,KVH,Dh] into the attention layout [B,KVH,Dh,T].
func keysTransposed(k *Node) *Node { return TransposeAllDims(k, 0, 2, 3, 1) }

// headsFirst turns [B,T,heads,Dh] into [B,heads,T,Dh].
func headsFirst(x *Node) *Node { return TransposeAllDims(x, 0, 2, 1, 3) }

// layerNorm is (x−mean)/√(var+eps)·gain + bias over the last axis.
func layerNorm(x, gain, bias *Node, eps float64) *Node {
	out, _ := InternalFusedOpCaller(
		func() *Node { return BackendFusedLayerNorm(x, []int{-1}, eps, gain, bias) },
		func() *Node {
			mean := ReduceAndKeep(x, ReduceMean, -1)
			c := Sub(x, mean)
			variance := ReduceAndKeep(Square(c), ReduceMean, -1)
			return Add(Mul(Div(c, Sqrt(AddScalar(variance, eps))), lastAxis(gain, x)), lastAxis(bias, x))
		}, true)
	return out
}

// rmsNorm is x/√(mean(x²)+eps)·gain over the last axis.
func rmsNorm(x, gain *Node, eps float64) *Node {
	ms := ReduceAndKeep(Square(x), ReduceMean, -1)
	return Mul(Div(x, Sqrt(AddScalar(ms, eps))), lastAxis(gain, x))
}

// lastAxis reshapes a vector v to broadcast along the last axis of x.
func lastAxis(v, x *Node) *Node {
	dims := make([]int, x.Rank())
	for i := range dims {
		dims[i] = 1
	}
	dims[len(dims)-1] = v.Shape().Size()
	return Reshape(v, dims...)
}

// activate applies the gpt MLP activation.
func (n *net) activate(name string, x *Node) *Node {
	switch name {
	case "relu":
		return activation.Relu(x)
	case "gelu_new":
		out, _ := InternalFusedOpCaller(
			func() *Node { return BackendFusedGelu(x, false) },
			func() *Node { return activation.GeluApproximate(x) }, true)
		return out
	default: // "gelu", exact: x·Φ(x)
		return n.gelu(x)
	}
}

// gelu is exact GELU, x·Φ(x), with its derivative Φ(x) + x·φ(x) attached by
// hand: Φ(x) is recovered from the forward value as gelu(x)/x (and 1/2 + x·φ(0)
// where |x| < 1e-4, within 1e-12 of it), so the backward pass evaluates no Erf,
// which the Go backend computes one element at a time in float64.
func (n *net) gelu(x *Node) *Node {
	y := activation.Gelu(x)
	if !n.train {
		return y
	}
	y, xs := StopGradient(y), StopGradient(x)
	return n.withGradient(y, x, func(v *Node) *Node {
		g := x.Graph()
		sq := Square(xs)
		small := LessThan(sq, Scalar(g, xs.DType(), 1e-8))
		invSqrt2Pi := 1 / math.Sqrt(2*math.Pi)
		cdf := Where(small, AddScalar(MulScalar(xs, invSqrt2Pi), 0.5), Div(y, Where(small, OnesLike(xs), xs)))
		pdf := MulScalar(Exp(MulScalar(sq, -0.5)), invSqrt2Pi)
		return Mul(v, Add(cdf, Mul(xs, pdf)))
	})
}

// withGradient returns value, through which, in a training graph, the
// adjoint v of a node shaped like x reaches x as vjp(v). value must not
// depend on x through any differentiable path of its own.
func (n *net) withGradient(value, x *Node, vjp func(v *Node) *Node) *Node {
	if !n.train {
		return value
	}
	xi := IdentityWithCustomGradient(x, func(_, v *Node) *Node { return vjp(v) })
	zero := Sub(xi, StopGradient(xi)) // value 0, shaped like x
	if !zero.Shape().Equal(value.Shape()) {
		zero = ReduceSum(zero, -1) // the log-sum-exp case: value is x reduced over its last axis
	}
	return Add(value, zero)
}
