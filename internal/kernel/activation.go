package kernel

import "math"

// Softmax replaces x by exp(x − max x) / Σ exp(x − max x).
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	Scale(x, 1/expShift(x, Max(x)))
}

// expShift sets x to exp(x − shift) and returns the sum.
func expShift(x []float32, shift float32) float32 {
	if simdExpShift != nil {
		return simdExpShift(x, shift)
	}
	var total float32
	for i, v := range x {
		x[i] = float32(math.Exp(float64(v - shift)))
		total += x[i]
	}
	return total
}

// CausalSoftmax applies Softmax to row t of the row-major [T,T] matrix p
// over its first t+1 entries and zeroes the rest: the attention
// probabilities of a causal sequence from its scores.
func CausalSoftmax(p []float32, T int) {
	if simdCausalSoftmax != nil {
		simdCausalSoftmax(p[:T*T], T)
		return
	}
	for t := range T {
		row := p[t*T : (t+1)*T]
		Softmax(row[:t+1])
		clear(row[t+1:])
	}
}

// Scale multiplies x by a.
func Scale(x []float32, a float32) {
	if simdScale != nil {
		simdScale(x, a)
		return
	}
	for i := range x {
		x[i] *= a
	}
}

// LogSumExp returns log Σ exp(x) and Σ exp(x − max x), computed stably,
// and leaves exp(x[i] − max x) in e (len(x) elements).
func LogSumExp(e, x []float32) (lse, sum float64) {
	e = e[:len(x)]
	copy(e, x)
	top := Max(x)
	s := expShift(e, top)
	return float64(top) + math.Log(float64(s)), float64(s)
}

// Max is the largest element of a non-empty x.
func Max(x []float32) float32 {
	if simdMax != nil {
		return simdMax(x)
	}
	top := x[0]
	for _, v := range x {
		top = max(top, v)
	}
	return top
}

// GELU sets out[i] = x[i]·Φ(x[i]), exact GELU: Φ(x) = 0.5·(1 + erf(x/√2)),
// and, if cdf is not nil, cdf[i] = Φ(x[i]) (for GELUBackward). erf comes
// from a Chebyshev series within 3e-7 of math.Erf (erfSeries).
func GELU(out, cdf, x []float32) {
	if simdGELU != nil {
		simdGELU(out, cdf, x)
		return
	}
	x = x[:len(out)]
	for i, v := range x {
		c := 0.5 * (1 + erf32(v*(1/math.Sqrt2)))
		out[i] = v * c
		if cdf != nil {
			cdf[i] = c
		}
	}
}

// SiLUMul sets out[i] = silu(gate[i])·up[i], silu(x) = x·σ(x): Llama's
// gated MLP.
func SiLUMul(out, gate, up []float32) {
	if simdSiLUMul != nil {
		simdSiLUMul(out, gate, up)
		return
	}
	gate, up = gate[:len(out)], up[:len(out)]
	for i, g := range gate {
		out[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}

// GELUBackward sets dx[i] = dy[i]·GELU′(x[i]), GELU′(x) = Φ(x) + x·φ(x),
// with Φ(x[i]) = cdf[i] as GELU gave it.
func GELUBackward(dx, dy, x, cdf []float32) {
	if simdGELUBackward != nil {
		simdGELUBackward(dx, dy, x, cdf)
		return
	}
	dy, x, cdf = dy[:len(dx)], x[:len(dx)], cdf[:len(dx)]
	for i, v := range x {
		pdf := float32(math.Exp(float64(-0.5*v*v)) / math.Sqrt(2*math.Pi))
		dx[i] = dy[i] * (cdf[i] + v*pdf)
	}
}

// SiLUMulBackward is the gradient of out = silu(gate)·up: with σ = σ(gate),
// dGate = dOut·up·σ·(1 + gate·(1−σ)) and dUp = dOut·gate·σ.
func SiLUMulBackward(dGate, dUp, dOut, gate, up []float32) {
	if simdSiLUMulBackward != nil {
		simdSiLUMulBackward(dGate, dUp, dOut, gate, up)
		return
	}
	n := len(dOut)
	dGate, dUp, gate, up = dGate[:n], dUp[:n], gate[:n], up[:n]
	for i, d := range dOut {
		g := gate[i]
		sig := 1 / (1 + float32(math.Exp(float64(-g))))
		dGate[i] = d * up[i] * sig * (1 + g*(1-sig))
		dUp[i] = d * g * sig
	}
}

var (
	simdCausalSoftmax   func(p []float32, T int)
	simdMax             func(x []float32) float32
	simdScale           func(x []float32, a float32)
	simdGELUBackward    func(dx, dy, x, cdf []float32)
	simdSiLUMulBackward func(dGate, dUp, dOut, gate, up []float32)
	simdExpShift        func(x []float32, shift float32) float32 // x ← exp(x − shift); returns Σ
	simdGELU            func(out, cdf, x []float32)
	simdSiLUMul         func(out, gate, up []float32)
)

// erfRange bounds the argument of the erf series: |erf(x)| rounds to 1 in
// float32 beyond it.
const erfRange = 4

// erfSeries holds the Chebyshev coefficients of g(u) = erf(R·t)/t, with
// t = √((u+1)/2) on [0,1] and R = erfRange: erf is odd, so erf(z)/z is even
// and smooth, a short series in u = 2(z/R)² − 1. They are computed from
// math.Erf at the Chebyshev nodes (interpolation, within a few ulp of the
// minimax series); 18 terms reach float32's rounding.
var erfSeries = chebyshev(18, 64, func(u float64) float64 {
	t := math.Sqrt((u + 1) / 2)
	if t < 1e-8 {
		return erfRange * 2 / math.Sqrt(math.Pi)
	}
	return math.Erf(erfRange*t) / t
})

// chebyshev returns the first n coefficients c (with c[0] halved) of the
// Chebyshev interpolant of f on [−1,1] through m nodes: f ≈ Σ c_k T_k.
func chebyshev(n, m int, f func(float64) float64) []float32 {
	c := make([]float32, n)
	for k := range n {
		s := 0.0
		for j := range m {
			th := math.Pi * (float64(j) + 0.5) / float64(m)
			s += f(math.Cos(th)) * math.Cos(float64(k)*th)
		}
		c[k] = float32(2 * s / float64(m))
	}
	c[0] /= 2
	return c
}

// erf32 is the scalar form of the vector erf: the series by Clenshaw's
// recurrence.
func erf32(z float32) float32 {
	z = min(max(z, -erfRange), erfRange)
	t := z / erfRange
	u := 2*t*t - 1
	var b1, b2 float32
	for k := len(erfSeries) - 1; k >= 1; k-- {
		b1, b2 = 2*u*b1-b2+erfSeries[k], b1
	}
	return t * (u*b1 - b2 + erfSeries[0])
}
