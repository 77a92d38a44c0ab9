package model

import (
	"fmt"
	"strings"

	"github.com/hacrl/hacrl/internal/kernel"
	"github.com/hacrl/hacrl/safetensors"
)

// Frozen base weights in bfloat16.
//
// A model with LoRA adapters trains only the adapters: its base weights are
// read, never written. SetFrozenDType("bfloat16") rounds the base's matrix
// weights — the attention and MLP projections of every layer and an untied
// LM head — once to bfloat16 (to nearest, ties to even, as PyTorch's
// .to(torch.bfloat16)) and keeps only those bits, half the bytes; the
// native engine's products widen them as they read them
// (kernel.MatMulBTBF16, exactly: the model computes what a float32 model
// whose base was rounded to bfloat16 first computes, bit for bit). The
// embeddings (and so a tied LM head), norms and biases stay float32, and so
// does everything trained: the adapters, their gradients and AdamW moments.

// The weight dtypes SetFrozenDType and SetSampleDType take.
const (
	WeightsFloat32  = "float32"
	WeightsBFloat16 = "bfloat16"
)

// frozenBF16 is a base held partly in bfloat16: the matrix weights (specs,
// in paramSpecs order, their bits back to back in bits), while the model's
// host buffer holds the other parameters (hostSpecs) in float32. Both keep
// paramSpecs order, so llama's q, k, v and gate, up weights stay adjacent.
// It is never modified: a Clone shares it.
type frozenBF16 struct {
	hostSpecs, specs []paramSpec
	bits             []uint16
}

// heldInBF16 reports whether a parameter of a family's model is one of the
// matrix weights a bfloat16 base holds in bfloat16.
func heldInBF16(family, name string) bool {
	if name == "lm_head.weight" {
		return true
	}
	if family == "gpt" {
		for _, s := range []string{"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"} {
			if strings.HasSuffix(name, "."+s) {
				return true
			}
		}
		return false
	}
	return strings.HasSuffix(name, "_proj.weight")
}

// SetFrozenDType chooses how the frozen base of a model with LoRA adapters
// is held: WeightsFloat32 (the default) or WeightsBFloat16, the base's matrix
// weights rounded once to bfloat16 and kept as such (see above). Rounding
// cannot be undone: setting float32 afterwards is refused. It needs LoRA
// adapters (call it after AddLoRA or LoadAdapters: a fully fine-tuned model
// trains every weight) and the native engine (EngineNative, or EngineAuto
// on the Go backend): the graphs take float32 weights; SetEngine must not
// choose them afterwards. Afterwards MergeLoRA is refused, and
// Save writes the base as held, its bfloat16 values widened exactly.
func (m *Model) SetFrozenDType(dtype string) error {
	switch {
	case dtype == WeightsFloat32 || dtype == "":
		if m.frozen != nil {
			return fmt.Errorf("model: frozen dtype float32: the base weights were rounded to bfloat16 already")
		}
		return nil
	case dtype != WeightsBFloat16:
		return fmt.Errorf("model: frozen dtype %q: want %q or %q", dtype, WeightsFloat32, WeightsBFloat16)
	case m.frozen != nil:
		return nil
	case m.lora == nil || m.baseOf != nil:
		return fmt.Errorf("model: frozen dtype bfloat16 needs a model with LoRA adapters (its base is frozen); a fully fine-tuned model trains every weight")
	case !m.native():
		return fmt.Errorf("model: frozen dtype bfloat16 runs on the native engine (engine native, or auto on the Go backend), which reads bfloat16 weights; the graphs take float32")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.host == nil {
		m.host, m.params = flatFromTensors(m.specs, m.params), nil
	}
	fz := &frozenBF16{}
	keep, bf := 0, 0
	for _, s := range m.specs {
		if heldInBF16(m.cfg.Family, s.name) {
			fz.specs = append(fz.specs, s)
			bf += s.size()
		} else {
			fz.hostSpecs = append(fz.hostSpecs, s)
			keep += s.size()
		}
	}
	host := make([]float32, 0, keep)
	fz.bits = make([]uint16, 0, bf)
	for i, v := range flatViews(m.specs, m.host) {
		if !heldInBF16(m.cfg.Family, m.specs[i].name) {
			host = append(host, v...)
			continue
		}
		for _, x := range v {
			fz.bits = append(fz.bits, safetensors.Float32ToBFloat16(x))
		}
	}
	m.host, m.frozen, m.dec, m.baseDec = host, fz, nil, nil
	return nil
}

// FrozenDType is how the model's frozen base is held: WeightsFloat32 or
// WeightsBFloat16 (SetFrozenDType).
func (m *Model) FrozenDType() string {
	if m.owner().frozen != nil {
		return WeightsBFloat16
	}
	return WeightsFloat32
}

// WeightBytes is the memory the model's parameters take as held: its base
// (4 bytes a float32 value, 2 a bfloat16 one, 8 a float64 one) and its
// adapters (float32). The optimizer's state and activations come on top.
func (m *Model) WeightBytes() int64 {
	o := m.owner()
	o.mu.RLock()
	defer o.mu.RUnlock()
	size := int64(4)
	if m.dtype.Size() > 0 {
		size = int64(m.dtype.Size())
	}
	var n int64
	if fz := o.frozen; fz != nil {
		n = 4*int64(len(o.host)) + 2*int64(len(fz.bits))
	} else {
		n = size * m.NumParams()
	}
	if ad := m.lora; ad != nil {
		_, total := flatLayout(ad.specs)
		n += 4 * int64(total)
	}
	return n
}

// newHostDecoder returns the decoder views of m.host (and, for a bfloat16
// base, of its bits), without adapters.
func (m *Model) newHostDecoder() *decoder {
	fz := m.frozen
	if fz == nil {
		return newDecoder(m.cfg, m.specs, m.host)
	}
	dec := newDecoder(m.cfg, fz.hostSpecs, m.host)
	fz.attach(dec)
	dec.serialParts = 4*len(m.host)+2*len(fz.bits) <= serialPartsMaxBytes
	return dec
}

// attach gives dec's products their bfloat16 weights: dec was built over
// the host parameters alone, which lack them.
func (fz *frozenBF16) attach(dec *decoder) {
	views, at := map[string][]uint16{}, map[string]int{}
	off := 0
	for _, s := range fz.specs {
		views[s.name], at[s.name] = fz.bits[off:off+s.size():off+s.size()], off
		off += s.size()
	}
	// span is the bits from the first to the last of the named weights,
	// adjacent in paramSpecs order, as newDecoder's span.
	span := func(first, last string) []uint16 {
		if views[first] == nil {
			return nil
		}
		lo, hi := at[first], at[last]+len(views[last])
		return fz.bits[lo:hi:hi]
	}
	set := func(p *proj, wb []uint16) {
		if wb == nil {
			return
		}
		if len(wb) != p.in*p.out {
			panic(fmt.Sprintf("model: bfloat16 base: %d weights for a %d×%d product", len(wb), p.out, p.in))
		}
		p.w, p.wb = nil, wb
	}
	if v := views["lm_head.weight"]; v != nil {
		dec.tied = false
		set(&dec.head, v)
	}
	for l := range dec.layers {
		ly := &dec.layers[l]
		if dec.cfg.Family == "gpt" {
			p := fmt.Sprintf("h.%d.", l)
			set(&ly.qkv, views[p+"attn.c_attn.weight"])
			set(&ly.out, views[p+"attn.c_proj.weight"])
			set(&ly.up, views[p+"mlp.c_fc.weight"])
			set(&ly.down, views[p+"mlp.c_proj.weight"])
			continue
		}
		p := fmt.Sprintf("model.layers.%d.", l)
		a := p + "self_attn."
		set(&ly.qkv, span(a+"q_proj.weight", a+"v_proj.weight"))
		set(&ly.out, views[a+"o_proj.weight"])
		set(&ly.up, span(p+"mlp.gate_proj.weight", p+"mlp.up_proj.weight"))
		set(&ly.down, views[p+"mlp.down_proj.weight"])
	}
}

// values returns the float32 values of the named parameter as held (a
// bfloat16 weight widened into a new slice, else the view of host), in the
// checkpoint layout.
func (fz *frozenBF16) values(host []float32, name string) []float32 {
	off := 0
	for _, s := range fz.specs {
		if s.name == name {
			v := make([]float32, s.size())
			kernel.WidenBF16(v, fz.bits[off:off+s.size()])
			return v
		}
		off += s.size()
	}
	off = 0
	for _, s := range fz.hostSpecs {
		if s.name == name {
			return host[off : off+s.size()]
		}
		off += s.size()
	}
	panic("model: no parameter " + name)
}

// entries is the package's entries function for a bfloat16 base: one
// safetensors entry per spec, the bfloat16 weights widened to float32 as
// the writer reaches them and encoded as dtype (exactly, unless dtype is
// float16).
func (fz *frozenBF16) entries(specs []paramSpec, host []float32, dtype string) []safetensors.Entry {
	out := make([]safetensors.Entry, len(specs))
	for i, s := range specs {
		out[i] = safetensors.Entry{Name: s.name, DType: dtype, Shape: s.fileShape(), Data: func() ([]byte, error) {
			t, err := safetensors.FromFloat32As(dtype, s.fileShape(), fz.values(host, s.name))
			return t.Data, err
		}}
	}
	return out
}
