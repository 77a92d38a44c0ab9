package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestNormAndBackward(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, d := range []int{1, 5, 8, 13, 64, 100} {
		for _, center := range []bool{true, false} {
			x, w, b, dy := random(rng, d), random(rng, d), random(rng, d), random(rng, d)
			for i := range x {
				x[i] += 3 // an offset that centering must remove
			}
			out, xhat := make([]float32, d), make([]float32, d)
			rstd := Norm(out, xhat, x, w, b, 1e-5, center)
			mean := 0.0
			if center {
				for _, v := range x {
					mean += float64(v) / float64(d)
				}
			}
			sq := 0.0
			for _, v := range x {
				sq += (float64(v) - mean) * (float64(v) - mean) / float64(d)
			}
			wantR := 1 / math.Sqrt(sq+1e-5)
			if math.Abs(float64(rstd)-wantR) > 1e-5*wantR {
				t.Fatalf("d=%d center=%v: rstd %v, want %v", d, center, rstd, wantR)
			}
			for i := range x {
				xh := (float64(x[i]) - mean) * wantR
				if math.Abs(float64(xhat[i])-xh) > 1e-4 || math.Abs(float64(out[i])-(xh*float64(w[i])+float64(b[i]))) > 1e-4 {
					t.Fatalf("d=%d center=%v: x̂[%d] %v out %v, want %v and %v", d, center, i, xhat[i], out[i], xh, xh*float64(w[i])+float64(b[i]))
				}
			}
			// Backward against central differences of Σ dy·out.
			dx := make([]float32, d)
			NormBackward(dx, dy, xhat, w, make([]float32, d), rstd, center)
			f := func(x []float32) float64 {
				o, xh := make([]float32, d), make([]float32, d)
				Norm(o, xh, x, w, b, 1e-5, center)
				s := 0.0
				for i := range o {
					s += float64(dy[i]) * float64(o[i])
				}
				return s
			}
			for i := range x {
				const h = 1e-2
				xp, xm := append([]float32(nil), x...), append([]float32(nil), x...)
				xp[i] += h
				xm[i] -= h
				num := (f(xp) - f(xm)) / (2 * h)
				if math.Abs(float64(dx[i])-num) > 2e-2*max(1, math.Abs(num)) {
					t.Fatalf("d=%d center=%v: dx[%d] = %v, finite difference %v", d, center, i, dx[i], num)
				}
			}
		}
	}
}

func TestSumMulAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, n := range []int{0, 3, 8, 17} {
		a, b, y := random(rng, n), random(rng, n), random(rng, n)
		s := 0.0
		for _, v := range a {
			s += float64(v)
		}
		if got := Sum(a); math.Abs(float64(got)-s) > 1e-5*float64(n+1) {
			t.Errorf("Sum of %d = %v, want %v", n, got, s)
		}
		want := make([]float64, n)
		for i := range y {
			want[i] = float64(y[i]) + float64(a[i])*float64(b[i])
		}
		MulAdd(y, a, b)
		for i := range y {
			if math.Abs(float64(y[i])-want[i]) > 1e-6 {
				t.Errorf("MulAdd of %d: y[%d] = %v, want %v", n, i, y[i], want[i])
			}
		}
	}
}
