package kernel

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// sampleKernels runs test with the vector sampler kernels (where the build
// and CPU have them) and with the portable loops.
func sampleKernels(t *testing.T, test func(t *testing.T)) {
	t.Run("installed", test)
	t.Run("portable", func(t *testing.T) {
		usePath(t, "portable")
		test(t)
	})
}

func TestExpScaled(t *testing.T) {
	sampleKernels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		for _, n := range []int{0, 1, 7, 8, 9, 31, 1000} {
			for _, scale := range []float32{1, 1 / 0.7, 0.5} {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(5 * rng.NormFloat64())
				}
				if n > 2 {
					x[1] = float32(math.Inf(-1)) // weighs nothing
					x[2] = -200                  // underflows: flushed to 0
				}
				shift := float32(3)
				if n > 0 {
					shift = slices.Max(x)
				}
				e := make([]float32, n+1)
				e[n] = 42 // past the end: untouched
				sum := ExpScaled(e, x, shift, scale)
				want := 0.0
				for i, v := range x {
					w := math.Exp(float64((v - shift) * scale))
					if w < math.Exp(-87) {
						w = 0
					}
					want += w
					if d := math.Abs(float64(e[i]) - w); d > 2e-6*w || (w == 0) != (e[i] == 0) {
						t.Fatalf("n=%d scale %v: e[%d] = %v, want %v", n, scale, i, e[i], w)
					}
				}
				if e[n] != 42 {
					t.Fatalf("n=%d: wrote past the end", n)
				}
				if math.Abs(sum-want) > 1e-5*want {
					t.Fatalf("n=%d scale %v: sum %v, want %v", n, scale, sum, want)
				}
				if n > 0 {
					y := slices.Clone(x)
					y[n-1] = float32(math.NaN())
					if s := ExpScaled(e, y, shift, scale); !math.IsNaN(s) {
						t.Fatalf("n=%d: sum %v with a NaN, want NaN", n, s)
					}
				}
			}
		}
	})
}

func TestIndexAtLeast(t *testing.T) {
	sampleKernels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, n := range []int{0, 1, 5, 8, 13, 64, 1001} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			if n > 3 {
				x[3] = float32(math.NaN())
			}
			for _, th := range []float32{float32(math.Inf(-1)), -1, 0.5, 2.5, 100} {
				var want []int32
				first := -1
				for i, v := range x {
					if v >= th {
						want = append(want, int32(i))
						if first < 0 {
							first = i
						}
					}
				}
				got := IndexAtLeast([]int32{-9}, x, th)
				if !slices.Equal(got, append([]int32{-9}, want...)) {
					t.Fatalf("n=%d t=%v: IndexAtLeast %v, want %v", n, th, got, want)
				}
				if f := FirstAtLeast(x, th); f != first {
					t.Fatalf("n=%d t=%v: FirstAtLeast %d, want %d", n, th, f, first)
				}
			}
		}
	})
}
