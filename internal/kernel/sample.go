package kernel

import "math"

// ExpScaled sets e[i] = exp((x[i] − shift)·scale) for the len(x) elements
// of x and returns Σ e[i], added in a fixed order (the same on every run
// and core count): a softmax's unnormalized weights at temperature 1/scale.
// An exponent below −87 (float32's normal range ends near −87.3) gives
// exactly 0, so a logit of −Inf weighs nothing. A NaN exponent (a NaN in x,
// or ∞ − ∞) makes the sum NaN. Exponents are meant to be at most 0 (shift
// the largest x); the vector code clamps those above 88.
func ExpScaled(e, x []float32, shift, scale float32) float64 {
	e = e[:len(x)]
	if simdExpScaled != nil {
		return simdExpScaled(e, x, shift, scale)
	}
	total := 0.0
	for i, v := range x {
		t := (v - shift) * scale
		e[i] = 0
		if t >= expFloor {
			e[i] = float32(math.Exp(float64(t)))
		}
		if t != t { // NaN
			total = math.NaN()
		}
		total += float64(e[i])
	}
	return total
}

// expFloor is the smallest exponent ExpScaled does not flush to 0.
const expFloor = -87

// IndexAtLeast appends to dst the indices i, in increasing order, with
// x[i] ≥ t, and returns it. NaN is never at least t.
func IndexAtLeast(dst []int32, x []float32, t float32) []int32 {
	if simdIndexAtLeast != nil {
		return simdIndexAtLeast(dst, x, t)
	}
	for i, v := range x {
		if v >= t {
			dst = append(dst, int32(i))
		}
	}
	return dst
}

// FirstAtLeast is the lowest index i with x[i] ≥ t, or −1 if there is none.
func FirstAtLeast(x []float32, t float32) int {
	if simdFirstAtLeast != nil {
		return simdFirstAtLeast(x, t)
	}
	for i, v := range x {
		if v >= t {
			return i
		}
	}
	return -1
}

var (
	simdExpScaled    func(e, x []float32, shift, scale float32) float64
	simdIndexAtLeast func(dst []int32, x []float32, t float32) []int32
	simdFirstAtLeast func(x []float32, t float32) int
)
