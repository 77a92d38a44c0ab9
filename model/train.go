package model

import (
	"context"
	"fmt"
	"math"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best dot-imported
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/hacrl/hacrl/internal/kernel"
)

// OptimizerConfig configures AdamW. Zero Beta1, Beta2 and Epsilon mean the
// defaults 0.9, 0.999 and 1e-8; MaxGradNorm ≤ 0 turns clipping off.
type OptimizerConfig struct {
	LearningRate float64 // used by Apply when its learningRate argument is ≤ 0
	WeightDecay  float64 // decoupled decay of matrices and embeddings (not biases or norm gains)
	Beta1, Beta2 float64
	Epsilon      float64
	MaxGradNorm  float64 // clip the global gradient norm to this
}

func (o OptimizerConfig) normalized() OptimizerConfig {
	if o.Beta1 == 0 {
		o.Beta1 = 0.9
	}
	if o.Beta2 == 0 {
		o.Beta2 = 0.999
	}
	if o.Epsilon == 0 {
		o.Epsilon = 1e-8
	}
	return o
}

// Trainer accumulates gradients of a model over micro-batches and applies
// AdamW steps to it. The step, per parameter p with accumulated gradient g:
//
//	g ← g·min(1, MaxGradNorm/(‖g‖+1e-6))      (‖·‖ over all parameters)
//	m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²
//	p ← p − lr·wd·p − lr·(m/(1−β₁ᵗ)) / (√(v/(1−β₂ᵗ)) + ε)
//
// which is PyTorch's AdamW with clip_grad_norm_. A Trainer is not safe for
// concurrent use.
type Trainer struct {
	m   *Model
	opt OptimizerConfig
	// The graph engine's state, as backend tensors: the accumulated gradient
	// (nil when empty) and the moments (nil while the host holds them, or
	// before the first step).
	acc, mom, vel []*tensors.Tensor
	// The native engine's state, flat in the host layout (host.go): the
	// gradient accumulator, kept allocated between steps (pending says it
	// holds a gradient not yet applied), and the moments.
	hostAcc          []float32
	pending          bool
	hostMom, hostVel []float32
	step             int64
}

// NewTrainer returns a trainer for m with zero moments.
func NewTrainer(m *Model, opt OptimizerConfig) (*Trainer, error) {
	opt = opt.normalized()
	for _, f := range []struct {
		name string
		v    float64
		ok   bool
	}{
		{"LearningRate", opt.LearningRate, opt.LearningRate >= 0},
		{"WeightDecay", opt.WeightDecay, opt.WeightDecay >= 0},
		{"Beta1", opt.Beta1, opt.Beta1 > 0 && opt.Beta1 < 1},
		{"Beta2", opt.Beta2, opt.Beta2 > 0 && opt.Beta2 < 1},
		{"Epsilon", opt.Epsilon, opt.Epsilon > 0},
		{"MaxGradNorm", opt.MaxGradNorm, !math.IsNaN(opt.MaxGradNorm)},
	} {
		if !f.ok || math.IsNaN(f.v) {
			return nil, fmt.Errorf("model: optimizer config: field %s is %v, out of range", f.name, f.v)
		}
	}
	if m.baseOf != nil {
		return nil, fmt.Errorf("model: the base of a model with LoRA adapters is frozen: train the adapted model, or a Clone of the base")
	}
	if m.frozen != nil && m.lora == nil {
		return nil, fmt.Errorf("model: the base weights are held in bfloat16 (frozen dtype) and cannot be trained: add LoRA adapters, or load the model in float32")
	}
	return &Trainer{m: m, opt: opt}, nil
}

func (t *Trainer) zeros() []*tensors.Tensor {
	z := make([]*tensors.Tensor, len(t.specs()))
	for i, s := range t.specs() {
		z[i] = tensorFrom(t.m.dtype, make([]float64, s.size()), s.shape)
	}
	return z
}

// specs are the parameters the trainer updates: the adapters of a model
// with LoRA adapters (add them before making the trainer), else all.
func (t *Trainer) specs() []paramSpec {
	if t.m.lora != nil {
		return t.m.lora.specs
	}
	return t.m.specs
}

// Step is the number of steps applied so far.
func (t *Trainer) Step() int64 { return t.step }

// Accumulate adds to the accumulated gradient the gradient of the surrogate
// Σ_b Σ_t weights[b][t]·lp[b][t], where lp[b][t] is the log-prob of
// seqs[b].Response[t] (weights[b] has one entry per response token), and
// returns the lp it computed. With weights = dLoss/dlp the accumulated
// gradient is dLoss/dθ; for supervised cross-entropy, weights are
// −1/(number of tokens).
func (t *Trainer) Accumulate(ctx context.Context, seqs []Sequence, weights [][]float32) ([][]float32, error) {
	lp, _, err := t.accumulate(ctx, "Accumulate", seqs, weights, nil)
	return lp, err
}

// AccumulateEntropy is Accumulate for the surrogate
//
//	Σ_b Σ_t weights[b][t]·lp[b][t] + entropy[b][t]·H[b][t]
//
// where H[b][t] = −Σ_v p_v log p_v is the entropy of the model's
// next-token distribution (temperature 1) at the position that predicts
// seqs[b].Response[t]; entropy[b] has one entry per response token. It
// returns lp and H as computed. An entropy bonus of coefficient c on a loss
// that averages the entropy with aggregation weights a[b][t] has entropy =
// −c·a. The gradient of H at that position's logits z is
// dH/dz_j = −p_j (log p_j + H). With entropy == nil it is Accumulate, and
// H is nil.
func (t *Trainer) AccumulateEntropy(ctx context.Context, seqs []Sequence, weights, entropy [][]float32) (lp, H [][]float32, err error) {
	return t.accumulate(ctx, "AccumulateEntropy", seqs, weights, entropy)
}

// accumulate is Accumulate and AccumulateEntropy; op names the caller in
// errors.
func (t *Trainer) accumulate(ctx context.Context, op string, seqs []Sequence, weights, entropy [][]float32) (lp, H [][]float32, err error) {
	if err := t.m.checkSequences(seqs); err != nil {
		return nil, nil, err
	}
	if err := checkRows(op, "weight", seqs, weights); err != nil {
		return nil, nil, err
	}
	if entropy != nil {
		if err := checkRows(op, "entropy weight", seqs, entropy); err != nil {
			return nil, nil, err
		}
	}
	if t.m.native() {
		return t.accumulateNative(seqs, weights, entropy)
	}
	if t.pending { // left by the native engine
		t.acc = t.accTensors()
	}
	np := len(t.specs())
	withEntropy := entropy != nil
	params := t.m.snapshot()
	lp64 := make([][]float64, len(seqs))
	var ent [][]float64
	if withEntropy {
		ent = make([][]float64, len(seqs))
	}
	for _, rows := range planChunks(inputLengths(seqs), t.m.cfg.Vocab) {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		b := packSequences(seqs, rows, weights, entropy)
		args := []any{b.tokens, b.targets, b.weights}
		if withEntropy {
			args = append(args, b.entropy)
		}
		e := t.m.gradExec(withEntropy)
		if t.acc != nil {
			e = t.m.accumulateExec(withEntropy)
			for _, a := range t.acc {
				d, err := DonateTensorBuffer(a, t.m.backend, compute.DeviceNum(0))
				if err != nil {
					return nil, nil, fmt.Errorf("model: %s: %w", op, err)
				}
				args = append(args, d)
			}
			t.acc = nil // donated: gone even if the call fails
		}
		out, err := call(e, params, args...)
		if err != nil {
			return nil, nil, err
		}
		t.acc = out[:np]
		b.unpack(float64s(out[np]), lp64)
		if withEntropy {
			b.unpack(float64s(out[np+1]), ent)
		}
	}
	if withEntropy {
		H = to32(ent)
	}
	return to32(lp64), H, nil
}

// checkRows checks that rows has one row per sequence and one value per
// response token; what names the values in errors.
func checkRows(op, what string, seqs []Sequence, rows [][]float32) error {
	if len(rows) != len(seqs) {
		return fmt.Errorf("model: %s: %d %s rows for %d sequences", op, len(rows), what, len(seqs))
	}
	for i, w := range rows {
		if len(w) != len(seqs[i].Response) {
			return fmt.Errorf("model: %s: sequence %d has %d response tokens but %d %ss",
				op, i, len(seqs[i].Response), len(w), what)
		}
	}
	return nil
}

// accumulateNative is accumulate on the native decoder: the gradient is
// added to the accumulator on the host.
func (t *Trainer) accumulateNative(seqs []Sequence, weights, entropy [][]float32) (lp, H [][]float32, err error) {
	if t.acc != nil { // left by the graph engine
		t.hostAcc, t.acc, t.pending = flatFromTensors(t.specs(), t.acc), nil, true
	}
	if t.hostAcc == nil {
		_, total := flatLayout(t.specs())
		t.hostAcc = make([]float32, total)
	}
	lp64, ent, err := t.m.nativeGradients(seqs, weights, entropy, t.hostAcc)
	if err != nil {
		return nil, nil, err
	}
	t.pending = true
	if entropy != nil {
		H = to32(ent)
	}
	return to32(lp64), H, nil
}

// accTensors returns the accumulated gradient as tensors (for the graphs)
// and clears the accumulator.
func (t *Trainer) accTensors() []*tensors.Tensor {
	if t.acc != nil {
		acc := t.acc
		t.acc = nil
		return acc
	}
	acc := tensorsFromFlat(t.specs(), t.hostAcc)
	t.hostAcc, t.pending = nil, false
	return acc
}

// graphMoments returns the moments as tensors, moving them from the host
// (or making zeros) first if needed.
func (t *Trainer) graphMoments() (mom, vel []*tensors.Tensor) {
	if t.mom == nil {
		if t.hostMom != nil {
			t.mom, t.vel = tensorsFromFlat(t.specs(), t.hostMom), tensorsFromFlat(t.specs(), t.hostVel)
			t.hostMom, t.hostVel = nil, nil
		} else {
			t.mom, t.vel = t.zeros(), t.zeros()
		}
	}
	return t.mom, t.vel
}

// nativeMoments returns the moments on the host, moving them from the
// tensors (or making zeros) first if needed.
func (t *Trainer) nativeMoments() (mom, vel []float32) {
	if t.hostMom == nil {
		if t.mom != nil {
			t.hostMom, t.hostVel = flatFromTensors(t.specs(), t.mom), flatFromTensors(t.specs(), t.vel)
			t.mom, t.vel = nil, nil
		} else {
			_, total := flatLayout(t.specs())
			t.hostMom, t.hostVel = make([]float32, total), make([]float32, total)
		}
	}
	return t.hostMom, t.hostVel
}

// surrogateGrads returns the gradients of Σ weights·lp (+ Σ entropy·H when
// entropy is not nil) with respect to the trainable parameters (every
// parameter, or an adapted model's adapters), lp [B,T] and, with entropy,
// H [B,T].
func surrogateGrads(n *net, tokens, targets, weights, entropy *Node) (grads []*Node, lp, ent *Node) {
	n.train = true
	lp, ent = n.tokenLogProbs(n.head(fullSequence(n, tokens)), targets, entropy != nil)
	surrogate := ReduceAllSum(Mul(ConvertDType(weights, lp.DType()), lp))
	if entropy != nil {
		surrogate = Add(surrogate, ReduceAllSum(Mul(ConvertDType(entropy, ent.DType()), ent)))
	}
	params, _ := n.trainable()
	return Gradient(surrogate, params...), lp, ent
}

// gradExec: tokens, targets, weights[, entropy weights] → gradients… (of
// the trainable parameters), lp[, H].
func (m *Model) gradExec(withEntropy bool) *Exec {
	return m.exec(trainExecName("grad", withEntropy), func(n *net, in []*Node) []*Node {
		return surrogateOutputs(n, in, withEntropy, false)
	})
}

// accumulateExec: tokens, targets, weights[, entropy weights], accumulated
// gradients… → accumulated + new gradients…, lp[, H].
func (m *Model) accumulateExec(withEntropy bool) *Exec {
	return m.exec(trainExecName("accumulate", withEntropy), func(n *net, in []*Node) []*Node {
		return surrogateOutputs(n, in, withEntropy, true)
	})
}

func trainExecName(name string, withEntropy bool) string {
	if withEntropy {
		return name + "+entropy"
	}
	return name
}

// surrogateOutputs is the body of gradExec and accumulateExec (accumulate:
// the inputs end with the accumulated gradients, added to the new ones).
func surrogateOutputs(n *net, in []*Node, withEntropy, accumulate bool) []*Node {
	var entropy *Node
	rest := in[3:]
	if withEntropy {
		entropy, rest = in[3], in[4:]
	}
	grads, lp, ent := surrogateGrads(n, in[0], in[1], in[2], entropy)
	if accumulate {
		for i, a := range rest {
			grads[i] = Add(a, grads[i])
		}
	}
	out := append(grads, lp)
	if withEntropy {
		out = append(out, ent)
	}
	return out
}

// Apply takes one AdamW step with the accumulated gradient at learningRate
// (the config's LearningRate if ≤ 0), clears the accumulator and returns the
// global gradient norm before clipping. If the gradient holds a NaN or an
// infinity, it returns an error wrapping ErrNonFinite, leaves the parameters
// and moments untouched and still clears the accumulator.
func (t *Trainer) Apply(ctx context.Context, learningRate float64) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if t.acc == nil && !t.pending {
		return 0, fmt.Errorf("model: Apply: no gradient accumulated since the last step")
	}
	if learningRate <= 0 {
		learningRate = t.opt.LearningRate
	}
	// The gradient and its norm, where the engine keeps them.
	var host []float32
	var acc []*tensors.Tensor
	var norm float64
	if t.m.native() {
		if t.acc != nil { // left by the graph engine
			t.hostAcc, t.acc = flatFromTensors(t.specs(), t.acc), nil
		}
		host = t.hostAcc
		defer t.clearHostAcc()
		norm = math.Sqrt(sumSquares(host))
	} else {
		acc = t.accTensors()
		out, err := call(t.m.normExec(), acc)
		if err != nil {
			return 0, err
		}
		norm = float64s(out[0])[0]
	}
	if !finite(norm) {
		return norm, fmt.Errorf("model: Apply at step %d: gradient norm is %v: %w", t.step+1, norm, ErrNonFinite)
	}
	st := adamStep{lr: learningRate, scale: 1, step: t.step + 1}
	if t.opt.MaxGradNorm > 0 {
		st.scale = min(1, t.opt.MaxGradNorm/(norm+1e-6))
	}
	st.bc1 = 1 - math.Pow(t.opt.Beta1, float64(st.step))
	st.bc2 = 1 - math.Pow(t.opt.Beta2, float64(st.step))
	var err error
	if host != nil {
		err = t.adamHost(host, st)
	} else {
		err = t.adamGraph(acc, st)
	}
	if err != nil {
		return 0, err
	}
	t.step = st.step
	return norm, nil
}

// adamStep holds the scalars of one AdamW step: the learning rate, the
// clipping factor, the step number and the bias corrections 1−β₁ᵗ, 1−β₂ᵗ.
type adamStep struct {
	lr, scale, bc1, bc2 float64
	step                int64
}

// Release drops the native engine's gradient accumulator, a float32 per
// parameter, when it holds no gradient waiting for Apply; the next
// Accumulate allocates it afresh. A learner whose updates for a step are
// done releases it, so that agents trained one after another in one process
// need one accumulator's memory at a time, not one each. The memory goes
// back to the system at the next garbage collection.
func (t *Trainer) Release() {
	if !t.pending {
		t.hostAcc = nil
	}
}

// clearHostAcc empties the native gradient accumulator, keeping its memory.
func (t *Trainer) clearHostAcc() {
	kernel.Parallel(len(t.hostAcc), 1<<20, func(lo, hi int) { clear(t.hostAcc[lo:hi]) })
	t.pending = false
}

// adamGraph applies the step with the adamw graph on the backend.
func (t *Trainer) adamGraph(acc []*tensors.Tensor, st adamStep) error {
	scalar := func(v float64) *tensors.Tensor {
		if t.m.dtype == dtypes.Float64 {
			return tensors.FromScalar(v)
		}
		return tensors.FromScalar(float32(v))
	}
	args := []any{scalar(st.lr), scalar(st.scale), scalar(st.bc1), scalar(st.bc2)}
	mom, vel := t.graphMoments()
	for _, group := range [][]*tensors.Tensor{acc, mom, vel} {
		for _, x := range group {
			d, err := DonateTensorBuffer(x, t.m.backend, compute.DeviceNum(0))
			if err != nil {
				return fmt.Errorf("model: Apply: %w", err)
			}
			args = append(args, d)
		}
	}
	np := len(t.specs())
	out, err := call(t.m.adamExec(t.opt), t.m.snapshot(), args...)
	if err != nil {
		return err
	}
	t.m.install(out[:np])
	t.mom, t.vel = out[np:2*np], out[2*np:]
	return nil
}

// adamHost applies the step on the host, for models on the native engine:
// the same AdamW update, elementwise in float32, in place on the host
// parameters while no pass reads them.
func (t *Trainer) adamHost(grads []float32, st adamStep) error {
	o := t.opt
	ks := kernel.AdamWStep{LR: float32(st.lr), Scale: float32(st.scale), Beta1: float32(o.Beta1), Beta2: float32(o.Beta2),
		Eps: float32(o.Epsilon), Correction1: float32(st.bc1), Correction2: float32(st.bc2)}
	mom, vel := t.nativeMoments()
	m := t.m
	m.mu.Lock()
	defer m.mu.Unlock()
	specs, params := m.specs, m.host
	if m.lora != nil {
		specs, params = m.lora.specs, m.lora.onHost()
	} else if m.host == nil { // the parameters are tensors: a graph pass ran since the gradient was taken
		m.host, m.params = flatFromTensors(m.specs, m.params), nil
		params = m.host
	}
	off, _ := flatLayout(specs)
	for i, spec := range specs {
		s := ks
		if spec.decay {
			s.Decay = float32(o.WeightDecay)
		}
		lo, n := off[i], spec.size()
		p, g, mi, vi := params[lo:lo+n], grads[lo:lo+n], mom[lo:lo+n], vel[lo:lo+n]
		kernel.Parallel(n, 1<<14, func(lo, hi int) {
			kernel.AdamW(p[lo:hi], g[lo:hi], mi[lo:hi], vi[lo:hi], s)
		})
	}
	m.dec = nil // a small model's packed weights are stale: the next pass packs them again
	if m.lora == nil {
		m.baseDec = nil
	}
	return nil
}

// normExec: gradients… → ‖g‖ (global L2 norm).
func (m *Model) normExec() *Exec {
	return m.rawExec("norm", func(grads []*Node) []*Node {
		sq := ReduceAllSum(Square(grads[0]))
		for _, g := range grads[1:] {
			sq = Add(sq, ReduceAllSum(Square(g)))
		}
		return []*Node{Sqrt(sq)}
	})
}

// adamExec: lr, clip scale, 1−β₁ᵗ, 1−β₂ᵗ, gradients…, m…, v… → params…,
// m…, v…, over the trainable parameters (every parameter, or an adapted
// model's adapters).
func (m *Model) adamExec(o OptimizerConfig) *Exec {
	return m.exec(fmt.Sprintf("adamw%+v", o), func(n *net, in []*Node) []*Node {
		trainable, specs := n.trainable()
		np := len(trainable)
		lr, scale, bc1, bc2 := in[0], in[1], in[2], in[3]
		grads, mom, vel := in[4:4+np], in[4+np:4+2*np], in[4+2*np:]
		params := make([]*Node, np)
		for i, p := range trainable {
			g := Mul(grads[i], scale)
			mom[i] = Add(MulScalar(mom[i], o.Beta1), MulScalar(g, 1-o.Beta1))
			vel[i] = Add(MulScalar(vel[i], o.Beta2), MulScalar(Square(g), 1-o.Beta2))
			update := Div(Div(mom[i], bc1), AddScalar(Sqrt(Div(vel[i], bc2)), o.Epsilon))
			if specs[i].decay && o.WeightDecay > 0 {
				p = Sub(p, Mul(MulScalar(p, o.WeightDecay), lr))
			}
			params[i] = Sub(p, Mul(update, lr))
		}
		return append(append(params, mom...), vel...)
	})
}
