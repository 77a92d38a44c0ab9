package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestErfSeries(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 200000; i++ {
		z := -6 + 12*float64(i)/200000
		worst = max(worst, math.Abs(float64(erf32(float32(z)))-math.Erf(z)))
	}
	if worst > 3e-7 {
		t.Errorf("erf series: max error %.2g, want ≤ 3e-7", worst)
	}
}

// activationInputs covers both signs, the erf clamp, exp's clamps and
// lengths with vector tails.
func activationInputs() [][]float32 {
	rng := rand.New(rand.NewPCG(7, 8))
	var xs [][]float32
	for _, n := range []int{1, 7, 8, 13, 64, 100} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(4 * rng.NormFloat64())
		}
		xs = append(xs, x)
	}
	return append(xs, []float32{-100, -30, -8, -5.7, -1e-3, 0, 1e-7, 2, 5.7, 8, 30, 100, 88.5})
}

func TestGELU(t *testing.T) {
	for _, x := range activationInputs() {
		out, cdf := make([]float32, len(x)), make([]float32, len(x))
		GELU(out, cdf, x)
		for i, v := range x {
			if w := 0.5 * (1 + math.Erf(float64(v)/math.Sqrt2)); math.Abs(float64(cdf[i])-w) > 3e-7 {
				t.Errorf("GELU's Φ(%v) = %v, want %v", v, cdf[i], w)
			}
			want := 0.5 * float64(v) * (1 + math.Erf(float64(v)/math.Sqrt2))
			// erf's own error (3e-7) scaled by x/2, plus float32 rounding.
			if d := math.Abs(float64(out[i]) - want); d > 1.5e-7*math.Abs(float64(v))+1e-6*max(1, math.Abs(want)) {
				t.Errorf("GELU(%v) = %v, want %v", v, out[i], want)
			}
		}
	}
}

func TestSiLUMul(t *testing.T) {
	for _, x := range activationInputs() {
		up := make([]float32, len(x))
		for i := range up {
			up[i] = float32(i%5) - 1.5
		}
		out := make([]float32, len(x))
		SiLUMul(out, x, up)
		for i, g := range x {
			want := float64(g) / (1 + math.Exp(-float64(g))) * float64(up[i])
			if d := math.Abs(float64(out[i]) - want); d > 1e-6*max(1, math.Abs(want)) {
				t.Errorf("SiLUMul(%v, %v) = %v, want %v", g, up[i], out[i], want)
			}
		}
	}
}

// expSum is max x and Σ exp(x − max x) in float64.
func expSum(x []float32) (top, sum float64) {
	top = math.Inf(-1)
	for _, v := range x {
		top = max(top, float64(v))
	}
	for _, v := range x {
		sum += math.Exp(float64(v) - top)
	}
	return top, sum
}

func TestSoftmax(t *testing.T) {
	for _, x := range activationInputs() {
		got := append([]float32(nil), x...)
		Softmax(got)
		top, total := expSum(x)
		for i, v := range x {
			want := math.Exp(float64(v)-top) / total
			if d := math.Abs(float64(got[i]) - want); d > 3e-6*want+1e-9 {
				t.Errorf("Softmax of %d: [%d] = %v, want %v", len(x), i, got[i], want)
			}
		}
	}
}

func BenchmarkGELU(b *testing.B) {
	x := activationInputs()[4]
	x = append(append(append(x, x...), x...), x...)
	out := make([]float32, len(x))
	for b.Loop() {
		GELU(out, nil, x)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(x)), "ns/element")
}

func TestGELUBackward(t *testing.T) {
	for _, x := range activationInputs() {
		dy := make([]float32, len(x))
		for i := range dy {
			dy[i] = float32(i%3) - 0.7
		}
		dx, y, cdf := make([]float32, len(x)), make([]float32, len(x)), make([]float32, len(x))
		GELU(y, cdf, x)
		GELUBackward(dx, dy, x, cdf)
		for i, v := range x {
			v := float64(v)
			want := float64(dy[i]) * (0.5*(1+math.Erf(v/math.Sqrt2)) + v*math.Exp(-v*v/2)/math.Sqrt(2*math.Pi))
			if d := math.Abs(float64(dx[i]) - want); d > 1e-6*max(1, math.Abs(want)) {
				t.Errorf("GELUBackward at %v: %v, want %v", v, dx[i], want)
			}
		}
	}
}

func TestSiLUMulBackward(t *testing.T) {
	for _, g := range activationInputs() {
		up, dOut := make([]float32, len(g)), make([]float32, len(g))
		for i := range up {
			up[i], dOut[i] = float32(i%5)-1.5, float32(i%3)-0.7
		}
		dg, du := make([]float32, len(g)), make([]float32, len(g))
		SiLUMulBackward(dg, du, dOut, g, up)
		for i, v := range g {
			v := float64(v)
			sig := 1 / (1 + math.Exp(-v))
			wg := float64(dOut[i]) * float64(up[i]) * sig * (1 + v*(1-sig))
			wu := float64(dOut[i]) * v * sig
			if math.Abs(float64(dg[i])-wg) > 1e-6*max(1, math.Abs(wg)) || math.Abs(float64(du[i])-wu) > 1e-6*max(1, math.Abs(wu)) {
				t.Errorf("SiLUMulBackward at %v: (%v, %v), want (%v, %v)", v, dg[i], du[i], wg, wu)
			}
		}
	}
}

func TestLogSumExp(t *testing.T) {
	for _, x := range activationInputs() {
		e := make([]float32, len(x))
		lse, sum := LogSumExp(e, x)
		top, want := expSum(x)
		if math.Abs(sum-want) > 1e-5*want || math.Abs(lse-(top+math.Log(want))) > 1e-5 {
			t.Errorf("LogSumExp of %d: (%v, %v), want (%v, %v)", len(x), lse, sum, top+math.Log(want), want)
		}
		for i, v := range x {
			if w := math.Exp(float64(v) - top); math.Abs(float64(e[i])-w) > 3e-6*w+1e-30 {
				t.Errorf("LogSumExp of %d: e[%d] = %v, want %v", len(x), i, e[i], w)
			}
		}
	}
}

func TestMaxScale(t *testing.T) {
	for _, x := range activationInputs() {
		top := float32(math.Inf(-1))
		for _, v := range x {
			top = max(top, v)
		}
		if got := Max(x); got != top {
			t.Errorf("Max of %d = %v, want %v", len(x), got, top)
		}
		y := append([]float32(nil), x...)
		Scale(y, 0.25)
		for i := range y {
			if y[i] != x[i]*0.25 {
				t.Fatalf("Scale of %d: [%d] = %v, want %v", len(x), i, y[i], x[i]*0.25)
			}
		}
	}
}

// The one-call causal softmax equals Softmax row by row, bit for bit.
func TestCausalSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, T := range []int{1, 5, 8, 9, 17, 63} {
		p := make([]float32, T*T)
		for i := range p {
			p[i] = float32(3 * rng.NormFloat64())
		}
		want := append([]float32(nil), p...)
		for r := range T {
			row := want[r*T : (r+1)*T]
			Softmax(row[:r+1])
			clear(row[r+1:])
		}
		CausalSoftmax(p, T)
		for i := range p {
			if p[i] != want[i] {
				t.Fatalf("T=%d: p[%d] = %v, row by row %v", T, i, p[i], want[i])
			}
		}
	}
}
