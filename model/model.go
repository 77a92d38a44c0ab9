package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best dot-imported
	"github.com/gomlx/gomlx/core/tensors"
)

// maxCompiledShapes bounds the graphs each Exec compiles (one per distinct
// tuple of input shapes). Length and batch buckets keep the real number far
// below it; GoMLX's default of 32 would be too tight for scoring, prefill and
// decoding across all buckets.
const maxCompiledShapes = 512

// ErrNonFinite is wrapped by Trainer.Apply's error when a gradient holds a
// NaN or an infinity; the step is then not applied.
var ErrNonFinite = errors.New("model: non-finite gradient")

// Model is one decoder-only transformer: its config and its parameters.
// Score and Generate may run concurrently; a Trainer's Apply updates the
// parameters between them.
//
// A float32 model holds one copy of its parameters: on the host (host, the
// native engine's, updated in place by Apply) or as backend tensors
// (params, the graphs'); the first pass of the other engine moves them
// (see host.go), and its LoRA adapters with them. A float64 model always
// holds tensors.
type Model struct {
	cfg     Config
	backend compute.Backend
	dtype   dtypes.DType
	specs   []paramSpec

	// mu guards params, host, dec, baseDec and the adapters' host and params: a
	// native pass holds it shared for the whole pass, Apply and a move
	// between host and tensors exclusively.
	mu     sync.RWMutex
	params []*tensors.Tensor // nil while host holds the parameters
	host   []float32         // every parameter back to back (host.go); nil while params hold them
	dec    *decoder          // the native engine's views of host, built on demand
	// baseDec is, for a model with LoRA adapters, the views of host without
	// the adapters: the native decoder of its Base.
	baseDec *decoder
	// baseOf is, for the model Base returns, the adapted model whose
	// parameters (its one copy of the base) this one reads: it holds none
	// of its own.
	baseOf *Model

	execMu sync.Mutex
	execs  map[string]*Exec

	engine Engine // set by SetEngine

	// bf16 makes the graphs' matrix products bfloat16 (SetComputeDType).
	bf16 bool

	gen *GenerationConfig // the checkpoint's generation_config.json, if it had one

	arenas arenaPool // buffers of native passes, kept between them

	lora *adapters // LoRA adapters (lora.go), or nil; the base is then frozen

	// frozen, when the base is held in bfloat16 (SetFrozenDType), holds its
	// matrix weights; host then holds the other parameters only.
	frozen *frozenBF16

	// sampleBF16 makes Generate read a bfloat16 copy of the product weights
	// (SetSampleDType): sampleDec, made from the decoder sampleOf.
	sampleBF16 bool
	sampleMu   sync.Mutex
	sampleDec  *decoder
	sampleOf   *decoder
}

// SetEngine chooses how Generate, Score, Trainer.Accumulate and
// Trainer.Apply run the model from now on (EngineAuto by default). Call it before using the model
// from several goroutines.
func (m *Model) SetEngine(e Engine) { m.engine = e }

// SetComputeDType chooses the dtype of the matrix products: Float32 (the
// default) or BFloat16, mixed precision as PyTorch's autocast and verl's
// FSDP mixed precision do it. With BFloat16 every product of the graphs —
// the linear layers, LoRA's, the two attention products and the LM head —
// takes bfloat16 operands and rounds its result to bfloat16 (the backend
// accumulates in float32), and the result goes on in float32: the
// parameters, the gradient accumulator and the AdamW moments stay float32,
// and so do the embeddings, norms, rotary embeddings, softmax, log-probs,
// entropies and the loss. Gradients flow back through the casts, so the
// backward products are bfloat16 too. The native engine computes in
// float32 only: a bfloat16 model runs on the graphs, even when EngineNative
// was set, as a float64 model does; so SetComputeDType refuses BFloat16 for
// a model set to EngineNative. It also refuses it on GoMLX's Go backend,
// whose bfloat16 products are not to be trusted (see TestGoBackendBF16Products):
// bfloat16 is for the XLA backend. Call it before the model's first pass.
func (m *Model) SetComputeDType(dt dtypes.DType) error {
	switch {
	case dt == dtypes.Float32:
		m.bf16 = false
	case dt != dtypes.BFloat16:
		return fmt.Errorf("model: compute dtype %s: want float32 or bfloat16", dt)
	case m.dtype != dtypes.Float32:
		return fmt.Errorf("model: compute dtype bfloat16 needs float32 parameters, the model has %s", m.dtype)
	case m.engine == EngineNative:
		return fmt.Errorf("model: compute dtype bfloat16 runs on the graph engine; the native engine computes in float32 (engine auto or graph)")
	case m.backend.String() == "go":
		// compute v0.1.3: DotGeneral on bfloat16 operands whose contracted
		// axes are both last (x·Wᵀ, q·kᵀ) gives results off by more than
		// 100% (TestGoBackendBF16Products).
		return fmt.Errorf("model: compute dtype bfloat16 needs the XLA backend (xla:cuda, xla:cpu); GoMLX's Go backend computes some bfloat16 products wrongly")
	default:
		m.bf16 = true
	}
	return nil
}

// ParseComputeDType reads a compute dtype by name: "float32" (or "") or
// "bfloat16" (or "bf16").
func ParseComputeDType(name string) (dtypes.DType, error) {
	switch name {
	case "", "float32", "fp32":
		return dtypes.Float32, nil
	case "bfloat16", "bf16":
		return dtypes.BFloat16, nil
	}
	return 0, fmt.Errorf("compute dtype %q: want float32 or bfloat16", name)
}

// ComputeDType is the dtype of the model's matrix products (SetComputeDType).
func (m *Model) ComputeDType() dtypes.DType {
	if m.bf16 {
		return dtypes.BFloat16
	}
	return m.dtype
}

// Trim drops the buffers the native engine keeps between passes (the
// activations of a training or scoring pass: up to about a gigabyte at real
// sizes); the next pass allocates them afresh. A caller done with a model
// for a while, such as an agent whose turn in a step has ended, trims it so
// that the other models' passes have the memory. The memory goes back to
// the system at the next garbage collection.
func (m *Model) Trim() { m.arenas.trim() }

// New returns a model with freshly initialized weights: normal(0, 0.02)
// matrices and embeddings (residual output projections scaled by 1/√(2·Layers),
// as GPT-2 does), zero biases and unit norm gains, drawn from a generator
// seeded with seed.
func New(b compute.Backend, cfg Config, seed int64) (*Model, error) {
	return newModel(b, cfg, seed, dtypes.Float32)
}

func newModel(b compute.Backend, cfg Config, seed int64, dtype dtypes.DType) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := blankModel(b, cfg.Normalized(), dtype)
	if dtype == dtypes.Float32 {
		m.host = initialFlat(m.specs, seed)
		return m, nil
	}
	m.params = make([]*tensors.Tensor, len(m.specs))
	for i, v := range initialValues(m.specs, seed) {
		m.params[i] = tensorFrom(dtype, v, m.specs[i].shape)
	}
	return m, nil
}

// blankModel returns a model of a validated, normalized config with no
// parameter values yet.
func blankModel(b compute.Backend, cfg Config, dtype dtypes.DType) *Model {
	return &Model{cfg: cfg, backend: b, dtype: dtype, specs: cfg.paramSpecs(), execs: map[string]*Exec{}}
}

// Config returns the model's normalized config.
func (m *Model) Config() Config { return m.cfg }

// NumParams is the number of scalar parameters (a tied LM head counts once).
func (m *Model) NumParams() int64 {
	var n int64
	for _, s := range m.specs {
		n += int64(s.size())
	}
	return n
}

// Clone returns an independent copy of the model with the same weights,
// adapters and engine, for instance the frozen reference model of a KL
// penalty.
func (m *Model) Clone() (*Model, error) {
	c := blankModel(m.backend, m.cfg, m.dtype)
	c.engine, c.gen, c.bf16, c.sampleBF16 = m.engine, m.gen, m.bf16, m.sampleBF16
	o := m.owner()
	o.mu.RLock()
	defer o.mu.RUnlock()
	c.frozen = o.frozen          // never modified: shared
	if ad := m.lora; ad != nil { // the clone gets its own copy of the adapters
		c.lora = &adapters{cfg: ad.cfg, mods: ad.mods, specs: ad.specs}
		if ad.host != nil {
			c.lora.host = append([]float32(nil), ad.host...)
		} else {
			c.lora.host = flatFromTensors(ad.specs, ad.params)
		}
	}
	if o.host != nil {
		c.host = append([]float32(nil), o.host...)
		return c, nil
	}
	c.params = make([]*tensors.Tensor, len(o.params))
	for i, p := range o.params {
		t, err := p.LocalClone()
		if err != nil {
			return nil, fmt.Errorf("model: clone %s: %w", m.specs[i].name, err)
		}
		c.params[i] = t
	}
	return c, nil
}

// snapshot returns the parameters as backend tensors for the graphs,
// moving them off the host first if needed. They are never modified in
// place, so the caller may use them while a Trainer installs new ones.
//
// For a model with LoRA adapters the adapters' tensors follow the base
// parameters, as the graphs take them (see Model.exec).
func (m *Model) snapshot() []*tensors.Tensor {
	if o := m.baseOf; o != nil {
		return o.snapshot()[:len(m.specs)]
	}
	m.mu.RLock()
	if p := m.graphParams(); p != nil {
		m.mu.RUnlock()
		return p
	}
	m.mu.RUnlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.frozen != nil {
		panic("model: the graphs take float32 weights, and this model's base is held in bfloat16 (SetFrozenDType): it runs on the native engine only")
	}
	if m.params == nil {
		m.params = tensorsFromFlat(m.specs, m.host)
		m.host, m.dec, m.baseDec = nil, nil, nil
	}
	if ad := m.lora; ad != nil && ad.params == nil {
		ad.params = tensorsFromFlat(ad.specs, ad.host)
		ad.host, m.dec = nil, nil
	}
	return m.graphParams()
}

// graphParams returns the graphs' parameter inputs, or nil if some of them
// are on the host. m.mu must be held.
func (m *Model) graphParams() []*tensors.Tensor {
	if m.params == nil {
		return nil
	}
	if m.lora == nil {
		return m.params
	}
	if m.lora.params == nil {
		return nil
	}
	return append(slices.Clip(m.params), m.lora.params...)
}

// decoder returns the native decoder over the host parameters, moving them
// to the host first if needed, with m.mu held shared: the caller runs its
// pass and then calls release. Apply waits for the pass to end. The
// decoder of Base's model is its adapted model's without the adapters.
func (m *Model) decoder() (dec *decoder, release func(), err error) {
	if o := m.baseOf; o != nil {
		return o.loadDecoder(&o.baseDec, false)
	}
	return m.loadDecoder(&m.dec, true)
}

// loadDecoder returns *slot, m.dec or m.baseDec, building it if needed, as
// decoder does; adapted says whether it carries the adapters.
func (m *Model) loadDecoder(slot **decoder, adapted bool) (dec *decoder, release func(), err error) {
	for {
		m.mu.RLock()
		if *slot != nil {
			return *slot, m.mu.RUnlock, nil
		}
		m.mu.RUnlock()
		m.mu.Lock()
		if *slot == nil {
			if m.host == nil {
				if m.params[0].DType() != dtypes.Float32 {
					m.mu.Unlock()
					return nil, nil, fmt.Errorf("model: native decoder: parameters are %s, want float32", m.params[0].DType())
				}
				m.host = flatFromTensors(m.specs, m.params)
				m.params = nil
			}
			dec := m.newHostDecoder()
			if adapted && m.lora != nil {
				m.lora.attach(dec, m.lora.onHost(), true)
			}
			dec.pack()
			*slot = dec
		}
		m.mu.Unlock()
	}
}

// install takes the parameters a graph step trained, in the graph layout:
// the adapters of a model with LoRA adapters, else all its parameters.
func (m *Model) install(params []*tensors.Tensor) {
	m.mu.Lock()
	if m.lora != nil {
		m.lora.params, m.lora.host = params, nil
	} else {
		m.params, m.host, m.baseDec = params, nil, nil
	}
	m.dec = nil
	m.mu.Unlock()
}

// owner is the model holding m's parameters: m, or for Base's model the
// adapted model.
func (m *Model) owner() *Model {
	if m.baseOf != nil {
		return m.baseOf
	}
	return m
}

// exec returns the named Exec, building it on first use. fn receives the
// network (parameters bound to the first inputs: the base parameters, then
// the LoRA adapters' if m has any) and the remaining inputs. An Exec built
// for a model with adapters is kept apart from one built without, or with
// adapters of another configuration: the name it is kept under says which.
func (m *Model) exec(name string, fn func(n *net, in []*Node) []*Node) *Exec {
	np, ad, bf16 := len(m.specs), m.lora, m.bf16
	if ad != nil {
		name += ad.execKey()
	}
	if bf16 {
		name += "+bf16"
	}
	return m.rawExec(name, func(in []*Node) []*Node {
		n := newNet(m.cfg, m.specs, in[:np])
		n.bf16 = bf16
		in = in[np:]
		if ad != nil {
			n.lora = newLoRANet(ad, in[:len(ad.specs)])
			in = in[len(ad.specs):]
		}
		return fn(n, in)
	})
}

// rawExec returns the named Exec of a graph function of plain inputs.
func (m *Model) rawExec(name string, fn func(in []*Node) []*Node) *Exec {
	m.execMu.Lock()
	defer m.execMu.Unlock()
	if e, ok := m.execs[name]; ok {
		return e
	}
	e, err := NewExec(m.backend, fn)
	if err != nil {
		panic(fmt.Sprintf("model: build %s exec: %v", name, err)) // only a wrong graph-function signature gets here
	}
	e = e.WithName(name).SetMaxCache(maxCompiledShapes)
	m.execs[name] = e
	return e
}

// call runs an Exec on params followed by extra inputs.
func call(e *Exec, params []*tensors.Tensor, extra ...any) ([]*tensors.Tensor, error) {
	args := make([]any, 0, len(params)+len(extra))
	for _, p := range params {
		args = append(args, p)
	}
	args = append(args, extra...)
	out, err := e.Call(args...)
	if err != nil {
		return nil, fmt.Errorf("model: run %s: %w", e.Name(), err)
	}
	return out, nil
}

// tensorFrom builds a tensor of dtype from float64 values.
func tensorFrom(dtype dtypes.DType, v []float64, shape []int) *tensors.Tensor {
	if dtype == dtypes.Float64 {
		return tensors.FromFlatDataAndDimensions(append([]float64(nil), v...), shape...)
	}
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	return tensors.FromFlatDataAndDimensions(f, shape...)
}

// float64s copies a float32 or float64 tensor's values.
func float64s(t *tensors.Tensor) []float64 {
	switch t.DType() {
	case dtypes.Float64:
		return tensors.MustCopyFlatData[float64](t)
	case dtypes.Float32:
		f := tensors.MustCopyFlatData[float32](t)
		v := make([]float64, len(f))
		for i, x := range f {
			v[i] = float64(x)
		}
		return v
	}
	panic(fmt.Sprintf("model: unexpected dtype %s", t.DType()))
}

// float32s copies a float32 or float64 tensor's values as float32.
func float32s(t *tensors.Tensor) []float32 {
	if t.DType() == dtypes.Float32 {
		return tensors.MustCopyFlatData[float32](t)
	}
	v := float64s(t)
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	return f
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
