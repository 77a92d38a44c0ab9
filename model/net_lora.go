package model

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best dot-imported
)

// loraNet is one computation graph's view of a model's LoRA adapters (see
// adapters): their tensors as graph nodes in the graph layout, A [in,r]
// and B [r,out], by module path. A graph of an adapted model takes them as
// inputs after the base parameters; a training graph differentiates with
// respect to them only, the base being frozen.
type loraNet struct {
	specs  []paramSpec
	params []*Node // in specs order
	scale  float64
	a, b   map[string]*Node // by module path (model.layers.0.self_attn.q_proj, …)
}

func newLoRANet(ad *adapters, params []*Node) *loraNet {
	ln := &loraNet{specs: ad.specs, params: params, scale: ad.cfg.scale(),
		a: make(map[string]*Node, len(ad.mods)), b: make(map[string]*Node, len(ad.mods))}
	index := make(map[string]*Node, len(ad.specs))
	for i, s := range ad.specs {
		index[s.name] = params[i]
	}
	for _, mod := range ad.mods {
		ln.a[mod.path] = index[peftPrefix+mod.path+loraASuffix]
		ln.b[mod.path] = index[peftPrefix+mod.path+loraBSuffix]
	}
	return ln
}

// trainable returns the parameters a training graph differentiates and
// AdamW updates, with their specs: the adapters of an adapted model, else
// every parameter.
func (n *net) trainable() ([]*Node, []paramSpec) {
	if n.lora != nil {
		return n.lora.params, n.lora.specs
	}
	return n.params, n.specs
}

// adapt returns y, the output of module path's linear layer for input x,
// plus its adapters' output scale·(x·A)·B if the module has adapters.
func (n *net) adapt(y, x *Node, path string) *Node {
	return n.adaptColumns(y, n.loraInput(x, path), path, 0, y.Shape().Dimensions[y.Rank()-1])
}

// loraInput returns scale·x·A [...,r] of module path, the adapters' inner
// activations, or nil if the module has no adapters.
func (n *net) loraInput(x *Node, path string) *Node {
	if n.lora == nil {
		return nil
	}
	a, ok := n.lora.a[path]
	if !ok {
		return nil
	}
	return MulScalar(n.linear(x, a, nil), n.lora.scale)
}

// adaptColumns returns y plus u·B[:, lo:hi], the adapters' output on
// columns [lo,hi) of module path, for u from loraInput; y itself when u
// is nil. A fused product computed in parts (GPT-2's c_attn) takes each
// part's columns of one u.
func (n *net) adaptColumns(y, u *Node, path string, lo, hi int) *Node {
	if u == nil {
		return y
	}
	b := n.lora.b[path]
	if lo != 0 || hi != b.Shape().Dimensions[1] {
		b = Slice(b, AxisRange(), AxisRange(lo, hi))
	}
	return Add(y, n.linear(u, b, nil))
}
