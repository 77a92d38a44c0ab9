package kernel

import "math"

// Norm normalizes one row x: LayerNorm when center (x̂ = (x − mean)/σ),
// RMSNorm otherwise (x̂ = x/rms), with σ² (or rms²) the mean square plus
// eps. It writes x̂ to xhat, x̂·w (+ b if not nil) to out, and returns 1/σ.
func Norm(out, xhat, x, w, b []float32, eps float64, center bool) float32 {
	d := len(x)
	out, xhat, w = out[:d], xhat[:d], w[:d]
	var mean float32
	if center {
		mean = Sum(x) / float32(d)
	}
	var sq float32
	if simdNormSquares != nil {
		sq = simdNormSquares(xhat, x, mean)
	} else {
		for i, v := range x {
			xhat[i] = v - mean
			sq += xhat[i] * xhat[i]
		}
	}
	rstd := float32(1 / math.Sqrt(float64(sq)/float64(d)+eps))
	if simdNormScale != nil {
		simdNormScale(out, xhat, w, b, rstd)
		return rstd
	}
	for i := range xhat {
		xhat[i] *= rstd
		out[i] = xhat[i] * w[i]
		if b != nil {
			out[i] += b[i]
		}
	}
	return rstd
}

// NormBackward adds to dx the gradient through Norm for output gradient
// dy: with g = dy⊙w, dx += (g − mean(g) − x̂·mean(g⊙x̂))·rstd for LayerNorm,
// dx += (g − x̂·mean(g⊙x̂))·rstd for RMSNorm. scratch holds len(dy) floats.
func NormBackward(dx, dy, xhat, w, scratch []float32, rstd float32, center bool) {
	d := len(dy)
	g := scratch[:d]
	for i := range g {
		g[i] = dy[i] * w[i]
	}
	var mean float32
	if center {
		mean = Sum(g) / float32(d)
	}
	dot := Dot(g, xhat) / float32(d)
	if simdNormBackward != nil {
		simdNormBackward(dx[:d], g, xhat[:d], mean, dot, rstd)
		return
	}
	for i := range g {
		dx[i] += (g[i] - mean - xhat[i]*dot) * rstd
	}
}

// MulAdd adds a⊙b to y (len(y) elements): a norm gain's gradient.
func MulAdd(y, a, b []float32) {
	if simdMulAdd != nil {
		simdMulAdd(y, a, b)
		return
	}
	a, b = a[:len(y)], b[:len(y)]
	for i := range y {
		y[i] += a[i] * b[i]
	}
}

// Sum is Σ x[i].
func Sum(x []float32) float32 {
	if simdSum != nil {
		return simdSum(x)
	}
	var s float32
	for _, v := range x {
		s += v
	}
	return s
}

var (
	simdNormSquares  func(xhat, x []float32, mean float32) float32
	simdNormScale    func(out, xhat, w, b []float32, rstd float32)
	simdNormBackward func(dx, g, xhat []float32, mean, dot, rstd float32)
	simdMulAdd       func(y, a, b []float32)
	simdSum          func(x []float32) float32
)
