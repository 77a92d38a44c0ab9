package model

import (
	"fmt"
	"math"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best dot-imported
	"github.com/gomlx/gomlx/ml/layers/activation"
)

// net is one computation graph's view of a model: the config and the
// parameters as graph nodes, by Hugging Face name.
type net struct {
	cfg    Config
	params []*Node // in paramSpecs order
	w      map[string]*Node
}

func newNet(cfg Config, specs []paramSpec, params []*Node) *net {
	w := make(map[string]*Node, len(specs))
	for i, s := range specs {
		w[s.name] = params[i]
	}
	return &net{cfg: cfg, params: params, w: w}
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
type attention struct {
	pos      *Node   // [B,T] int32: position id of each query token
	mask     *Node   // [B,T,S] bool: query t may attend key slot s
	cache    []*Node // nil, or 2·Layers tensors [B,KVH,S,Dh]: keys and values of each layer
	slot     *Node   // scalar int32: the cache slot written by a decoding pass
	cos, sin *Node   // [B,1,T,Dh] rotary tables (llama), built on first use
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
		x = Add(x, Gather(n.p("wpe.weight"), ExpandAxes(at.pos, -1)))
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
	return DotGeneral(x, []int{2}, nil, w, []int{1}, nil)
}

// attend runs causal multi-head attention of layer l. q is [B,H,T,Dh], k and
// v are [B,KVH,T,Dh]; with a cache, k and v (T = 1) are first written into
// the layer's cache at the decoding slot. Query head h uses key/value head
// h/(H/KVH), as Hugging Face's repeat_kv does. It returns the heads'
// outputs as [B,T,H·Dh] and the keys and values attended to.
func (n *net) attend(l int, q, k, v *Node, at *attention) (out, keys, values *Node) {
	if at.cache != nil {
		k = writeSlot(at.cache[2*l], k, at.slot)
		v = writeSlot(at.cache[2*l+1], v, at.slot)
	}
	B, H, T, Dh := q.Shape().Dimensions[0], q.Shape().Dimensions[1], q.Shape().Dimensions[2], q.Shape().Dimensions[3]
	KVH, S := k.Shape().Dimensions[1], k.Shape().Dimensions[2]
	G := H / KVH
	q = Reshape(MulScalar(q, 1/math.Sqrt(float64(Dh))), B, KVH, G*T, Dh)
	scores := DotGeneral(q, []int{3}, []int{0, 1}, k, []int{3}, []int{0, 1}) // [B,KVH,G·T,S]
	scores = Reshape(scores, B, KVH, G, T, S)
	mask := BroadcastToDims(Reshape(at.mask, B, 1, 1, T, S), B, KVH, G, T, S)
	scores = Where(mask, scores, Scalar(q.Graph(), q.DType(), -1e30))
	probs := Reshape(Softmax(scores, -1), B, KVH, G*T, S)
	o := DotGeneral(probs, []int{3}, []int{0, 1}, v, []int{2}, []int{0, 1}) // [B,KVH,G·T,Dh]
	o = Transpose(Reshape(o, B, H, T, Dh), 1, 2)                            // [B,T,H,Dh]
	return Reshape(o, B, T, H*Dh), k, v
}

// writeSlot returns cache [B,KVH,S,Dh] with x [B,KVH,1,Dh] written at slot.
// The Go backend has no DynamicUpdateSlice, so this selects with a one-hot
// mask over the slots.
func writeSlot(cache, x, slot *Node) *Node {
	dims := cache.Shape().Dimensions
	S := dims[2]
	hit := Equal(Iota(cache.Graph(), shapes.Make(dtypes.Int32, S), 0), slot)
	hit = BroadcastToDims(Reshape(hit, 1, 1, S, 1), dims...)
	return Where(hit, BroadcastToDims(x, dims...), cache)
}

// headsFirst turns a projection [B,T,heads·Dh] into [B,heads,T,Dh].
func headsFirst(x *Node, heads int) *Node {
	d := x.Shape().Dimensions
	return Transpose(Reshape(x, d[0], d[1], heads, d[2]/heads), 1, 2)
}

// layerNorm is (x−mean)/√(var+eps)·gain + bias over the last axis.
func layerNorm(x, gain, bias *Node, eps float64) *Node {
	out, _ := InternalFusedOpCaller(
		func() *Node { return BackendFusedLayerNorm(x, []int{-1}, eps, gain, bias) },
		func() *Node {
			mean := ReduceAndKeep(x, ReduceMean, -1)
			c := Sub(x, mean)
			variance := ReduceAndKeep(Square(c), ReduceMean, -1)
			return Add(Mul(Mul(c, Rsqrt(AddScalar(variance, eps))), lastAxis(gain, x)), lastAxis(bias, x))
		}, true)
	return out
}

// rmsNorm is x/√(mean(x²)+eps)·gain over the last axis.
func rmsNorm(x, gain *Node, eps float64) *Node {
	ms := ReduceAndKeep(Square(x), ReduceMean, -1)
	return Mul(Mul(x, Rsqrt(AddScalar(ms, eps))), lastAxis(gain, x))
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
func activate(name string, x *Node) *Node {
	switch name {
	case "relu":
		return activation.Relu(x)
	case "gelu_new":
		out, _ := InternalFusedOpCaller(
			func() *Node { return BackendFusedGelu(x, false) },
			func() *Node { return activation.GeluApproximate(x) }, true)
		return out
	default: // "gelu", exact: x·Φ(x)
		return activation.Gelu(x)
	}
}
