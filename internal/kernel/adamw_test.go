package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestAdamW(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	s := AdamWStep{LR: 1e-2, Scale: 0.5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Decay: 0.1, Correction1: 1 - 0.9*0.9, Correction2: 1 - 0.999*0.999}
	for _, n := range []int{1, 8, 13} {
		p, g, m, v := random(rng, n), random(rng, n), random(rng, n), random(rng, n)
		for i := range v {
			v[i] = v[i] * v[i]
		}
		want := make([][4]float64, n)
		for j := range p {
			gj := float64(g[j]) * float64(s.Scale)
			mj := float64(m[j])*0.9 + gj*0.1
			vj := float64(v[j])*0.999 + gj*gj*0.001
			u := (mj / float64(s.Correction1)) / (math.Sqrt(vj/float64(s.Correction2)) + 1e-8)
			want[j] = [4]float64{float64(p[j]) - float64(p[j])*0.1*1e-2 - u*1e-2, mj, vj}
		}
		AdamW(p, g, m, v, s)
		for j := range p {
			if math.Abs(float64(p[j])-want[j][0]) > 1e-6 || math.Abs(float64(m[j])-want[j][1]) > 1e-6 || math.Abs(float64(v[j])-want[j][2]) > 1e-6 {
				t.Errorf("n=%d [%d]: p, m, v = %v, %v, %v; want %v", n, j, p[j], m[j], v[j], want[j][:3])
			}
		}
	}
}

// BenchmarkAdamW reports the bytes of parameters, gradients and moments
// read and written per second (memory-bound on large models).
func BenchmarkAdamW(b *testing.B) {
	const n = 1 << 22
	rng := rand.New(rand.NewPCG(1, 2))
	p, g, m, v := random(rng, n), random(rng, n), random(rng, n), random(rng, n)
	for i := range v {
		v[i] *= v[i]
	}
	s := AdamWStep{LR: 1e-6, Scale: 1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Decay: 0.01, Correction1: 0.1, Correction2: 0.001}
	b.SetBytes(7 * 4 * n) // p, g, m, v read; p, m, v written
	for b.Loop() {
		AdamW(p, g, m, v, s)
	}
}
