package kernel

import "math"

// AdamWStep holds the scalars of one AdamW step.
type AdamWStep struct {
	LR, Scale, Beta1, Beta2, Eps, Decay float32
	Correction1, Correction2            float32 // 1 − β₁ᵗ and 1 − β₂ᵗ
}

// AdamW applies one step to parameters p with gradient g (multiplied by
// Scale, the clipping factor) and moments m, v, in place:
//
//	m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²
//	p ← p − lr·decay·p − lr·(m/(1−β₁ᵗ)) / (√(v/(1−β₂ᵗ)) + ε)
func AdamW(p, g, m, v []float32, s AdamWStep) {
	n := len(p)
	g, m, v = g[:n], m[:n], v[:n]
	if simdAdamW != nil {
		simdAdamW(p, g, m, v, s)
		return
	}
	for j := range p {
		gj := g[j] * s.Scale
		m[j] = m[j]*s.Beta1 + gj*(1-s.Beta1)
		v[j] = v[j]*s.Beta2 + gj*gj*(1-s.Beta2)
		update := (m[j] / s.Correction1) / (float32(math.Sqrt(float64(v[j]/s.Correction2))) + s.Eps)
		p[j] = p[j] - p[j]*s.Decay*s.LR - update*s.LR
	}
}

var simdAdamW func(p, g, m, v []float32, s AdamWStep)
