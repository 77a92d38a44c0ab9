package model

import (
	"fmt"
	"math/rand/v2"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/hacrl/hacrl/internal/kernel"
)

// A float32 model keeps its parameters in one place at a time: on the host,
// for the native engine, or as backend tensors, for the graphs. The host
// copy is a flat []float32 holding every parameter back to back in
// paramSpecs order, each in its checkpoint layout (torch.nn.Linear weights
// [out,in]). In that order llama's q, k and v projections, their biases,
// and the gate and up projections are adjacent, so each group is one
// matrix for the native products with no copy; the gradient accumulator
// and the AdamW moments use the same layout, so the optimizer step is
// elementwise over matching slices. The backend tensors hold the graph
// layout (Linear weights [in,out]); converting between the two transposes
// those weights and drops the source, so a model never holds two copies.

// flatLayout returns the offset of each spec's values in a flat buffer and
// the buffer's length.
func flatLayout(specs []paramSpec) (offsets []int, total int) {
	offsets = make([]int, len(specs))
	for i, s := range specs {
		offsets[i] = total
		total += s.size()
	}
	return offsets, total
}

// flatViews splits flat into one slice per spec.
func flatViews(specs []paramSpec, flat []float32) [][]float32 {
	off, _ := flatLayout(specs)
	v := make([][]float32, len(specs))
	for i, s := range specs {
		v[i] = flat[off[i] : off[i]+s.size() : off[i]+s.size()]
	}
	return v
}

// flatFromTensors copies tensors in the graph layout into a new flat buffer
// in the checkpoint layout.
func flatFromTensors(specs []paramSpec, ts []*tensors.Tensor) []float32 {
	_, total := flatLayout(specs)
	flat := make([]float32, total)
	for i, dst := range flatViews(specs, flat) {
		s := specs[i]
		copyOut := func(src []float32) {
			if s.transposed { // memory [in,out] → file [out,in]
				kernel.Transpose(dst, src, s.shape[0], s.shape[1])
			} else {
				copy(dst, src)
			}
		}
		if ts[i].DType() == dtypes.Float32 {
			tensors.MustConstFlatData(ts[i], copyOut)
		} else {
			copyOut(float32s(ts[i]))
		}
	}
	return flat
}

// tensorsFromFlat builds float32 tensors in the graph layout from a flat
// buffer in the checkpoint layout.
func tensorsFromFlat(specs []paramSpec, flat []float32) []*tensors.Tensor {
	out := make([]*tensors.Tensor, len(specs))
	for i, src := range flatViews(specs, flat) {
		s := specs[i]
		t := tensors.FromShape(shapes.Make(dtypes.Float32, s.shape...))
		tensors.MustMutableFlatData(t, func(dst []float32) {
			if s.transposed { // file [out,in] → memory [in,out]
				kernel.Transpose(dst, src, s.shape[1], s.shape[0])
			} else {
				copy(dst, src)
			}
		})
		out[i] = t
	}
	return out
}

// initialFlat draws the initial parameters (see initialValues) straight
// into a flat float32 buffer in the checkpoint layout, one value at a time,
// so a large model is never held as float64.
func initialFlat(specs []paramSpec, seed int64) []float32 {
	_, total := flatLayout(specs)
	flat := make([]float32, total)
	rng := initRNG(seed)
	for i, v := range flatViews(specs, flat) {
		s := specs[i]
		for j := range v {
			x := s.fill
			if s.std > 0 {
				x = s.std * rng.NormFloat64()
			}
			v[s.fileIndex(j)] = float32(x) // draw j is element j of the graph layout
		}
	}
	return flat
}

// fileIndex is where element j of the parameter in the graph layout (its
// shape) sits in the checkpoint layout: the same place, or for a
// transposed Linear weight, element (r,c) of [in,out] at (c,r) of [out,in].
func (p paramSpec) fileIndex(j int) int {
	if !p.transposed {
		return j
	}
	r, c := j/p.shape[1], j%p.shape[1]
	return c*p.shape[0] + r
}

// initRNG is the generator of the initial parameters.
func initRNG(seed int64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), 0x6861637270726d73)) // "hacrprms"
}

// sumSquares is Σ x² over v in float64, summed in fixed chunks so that the
// result does not depend on the number of cores.
func sumSquares(v []float32) float64 {
	const chunk = 1 << 16
	parts := make([]float64, (len(v)+chunk-1)/chunk)
	kernel.Parallel(len(parts), 8, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			s := 0.0
			for _, x := range v[p*chunk : min(len(v), (p+1)*chunk)] {
				s += float64(x) * float64(x)
			}
			parts[p] = s
		}
	})
	sq := 0.0
	for _, s := range parts {
		sq += s
	}
	return sq
}

// paramValues returns parameter i's values in the graph layout (its spec's
// shape), wherever the model holds them. For tests and checks.
func (m *Model) paramValues(i int) []float64 {
	m = m.owner()
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.params != nil {
		return float64s(m.params[i])
	}
	s := m.specs[i]
	var src []float32
	if m.frozen != nil {
		src = m.frozen.values(m.host, s.name)
	} else {
		src = flatViews(m.specs, m.host)[i]
	}
	v := make([]float64, len(src))
	for j := range src {
		v[j] = float64(src[s.fileIndex(j)])
	}
	return v
}

// setParamValues replaces parameter i's values, given in the graph layout.
// For tests.
func (m *Model) setParamValues(i int, v []float64) {
	m = m.owner()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.specs[i]
	if len(v) != s.size() {
		panic(fmt.Sprintf("model: setParamValues %s: %d values for %d", s.name, len(v), s.size()))
	}
	if m.params != nil {
		m.params[i] = tensorFrom(m.dtype, v, s.shape)
		return
	}
	if m.frozen != nil {
		panic("model: setParamValues: the base is held in bfloat16")
	}
	m.dec, m.baseDec = nil, nil // their packed weights, if any, are stale
	dst := flatViews(m.specs, m.host)[i]
	for j, x := range v {
		dst[s.fileIndex(j)] = float32(x)
	}
}
