package kernel

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// fma32 is a·b + c rounded once to float32 (to nearest, ties to even): what
// one NEON FMLA lane computes. a·b is exact in float64 and math.FMA rounds
// the sum once to float64; rounding that to float32 again can differ from
// rounding the exact sum only when it lands exactly halfway between two
// float32 values, and then the exact sum decides.
func fma32(a, b, c float32) float32 {
	r := math.FMA(float64(a), float64(b), float64(c))
	f := float32(r)
	var g float32
	switch {
	case float64(f) < r:
		g = math.Nextafter32(f, float32(math.Inf(1)))
	case float64(f) > r:
		g = math.Nextafter32(f, float32(math.Inf(-1)))
	default:
		return f
	}
	if r != (float64(f)+float64(g))/2 {
		return f
	}
	x := new(big.Float).SetPrec(2000).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	f, _ = x.Float32()
	return f
}

func TestFMA32(t *testing.T) {
	// a·b = 2⁻²⁴ − 2⁻⁷⁰, so a·b + c lies just below the midpoint 1 + 3·2⁻²⁴
	// between c = 1 + 2⁻²³ and 1 + 2⁻²²: rounded to float64 first it
	// becomes the midpoint itself, which a second rounding sends to the
	// even 1 + 2⁻²², while the exact sum rounds down to c.
	a, b, c := float32(0x1p-24+0x1p-47), float32(1-0x1p-23), float32(1+0x1p-23)
	naive := float32(math.FMA(float64(a), float64(b), float64(c)))
	if got := fma32(a, b, c); got != c || naive == c {
		t.Errorf("fma32(%v, %v, %v) = %v, want %v (float32 of the float64 fma: %v)", a, b, c, got, c, naive)
	}
	if got := fma32(3, 5, 7); got != 22 {
		t.Errorf("fma32(3, 5, 7) = %v, want 22", got)
	}
}

// fusedProduct is init + a·w element by element, one fma32 per step in k
// order, with a's element (i,q) at a[i·rs + q·ps] and w's element (q,j) at
// w[q·wq + j·wj]; init is nil for zero, n long for a bias, m·n for rows.
func fusedProduct(init, a, w []float32, m, k, n, rs, ps, wq, wj int) []float32 {
	out := make([]float32, m*n)
	for i := range m {
		for j := range n {
			var s float32
			switch len(init) {
			case 0:
			case n:
				s = init[j]
			default:
				s = init[i*n+j]
			}
			for q := range k {
				s = fma32(a[i*rs+q*ps], w[q*wq+j*wj], s)
			}
			out[i*n+j] = s
		}
	}
	return out
}

// The NEON path is the default on arm64, and the portable loops stay
// available beside it (TestEveryPath runs them).
func TestNEONIsDefault(t *testing.T) {
	if got := Paths(); !slices.Equal(got, []string{"portable", "neon"}) {
		t.Errorf("Paths() = %v, want [portable neon]", got)
	}
	if Path() != "neon" && Path() != "portable" {
		t.Errorf("Path() = %q", Path())
	}
	usePath(t, "auto")
	if Path() != "neon" {
		t.Errorf("auto chose %q, want neon", Path())
	}
}

// Every product on the NEON path gives each output element exactly its
// initial value plus one fused multiply-add per step in k order: the bits
// of fusedProduct, for MatMul, MatMulBT, MatMulTAdd (x transposed) and
// packed weights, serial and spread over 1, 2, 3 and 7 cores (products
// split by columns and by rows), and within a float64 reference's
// tolerance. The shapes reach every piece of productNEON: whole and
// partial 6-row tiles, single rows on four panels and on one, a last panel
// narrower than 16 columns, weights read in place and packed, two passes
// over k (k > neonKBlock) and two column chunks (n > neonCols).
func TestNEONProductFused(t *testing.T) {
	usePath(t, "neon")
	rng := rand.New(rand.NewPCG(41, 42))
	for _, s := range []struct{ m, k, n int }{
		{1, 1, 1}, {1, 300, 200}, {5, 37, 70}, {6, 16, 16}, {7, 3, 64}, {13, 260, 33}, {70, 300, 130}, {301, 40, 40},
	} {
		m, k, n := s.m, s.k, s.n
		x, w, bias, init := random(rng, m*k), random(rng, k*n), random(rng, n), random(rng, m*n)
		wt := make([]float32, k*n) // w as [n,k]
		Transpose(wt, w, k, n)
		xt := make([]float32, k*m) // x as [k,m]
		Transpose(xt, x, m, k)
		plain, biased := fusedProduct(nil, x, w, m, k, n, k, 1, n, 1), fusedProduct(bias, x, w, m, k, n, k, 1, n, 1)
		added := fusedProduct(init, x, w, m, k, n, k, 1, n, 1)
		addedT := fusedProduct(init, xt, w, m, k, n, 1, m, n, 1)
		packed, packedT := Pack(w, k, n), PackT(wt, n, k)
		for _, tc := range []struct {
			name string
			want []float32
			run  func(out []float32)
		}{
			{"MatMul", plain, func(out []float32) { MatMul(out, x, w, nil, m, k, n) }},
			{"MatMul+bias", biased, func(out []float32) { MatMul(out, x, w, bias, m, k, n) }},
			{"MatMulSerial+bias", biased, func(out []float32) { MatMulSerial(out, x, w, bias, m, k, n) }},
			{"MatMulBT", plain, func(out []float32) { MatMulBT(out, x, wt, nil, m, k, n) }},
			{"MatMulBTSerial+bias", biased, func(out []float32) { MatMulBTSerial(out, x, wt, bias, m, k, n) }},
			{"MatMulBTAdd", added, func(out []float32) { copy(out, init); MatMulBTAdd(out, x, wt, m, k, n) }},
			{"MatMulTAdd", addedT, func(out []float32) { copy(out, init); MatMulTAdd(out, xt, w, m, k, n) }},
			{"MatMulTAddSerial", addedT, func(out []float32) { copy(out, init); MatMulTAddSerial(out, xt, w, m, k, n) }},
			{"MatMulPacked+bias", biased, func(out []float32) { MatMulPacked(out, x, packed, bias, m) }},
			{"MatMulPackedT", plain, func(out []float32) { MatMulPacked(out, x, packedT, nil, m) }},
		} {
			for _, procs := range []int{1, 2, 3, 7} {
				out := random(rng, m*n) // stale values must be overwritten (or added to, after copy)
				func() {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					tc.run(out)
				}()
				for i, v := range out {
					if v != tc.want[i] {
						t.Fatalf("%dx%dx%d %s, GOMAXPROCS=%d: out[%d,%d] = %v (%#08x), want %v (%#08x) from fused multiply-adds in k order",
							m, k, n, tc.name, procs, i/n, i%n, v, math.Float32bits(v), tc.want[i], math.Float32bits(tc.want[i]))
					}
				}
			}
		}
		// The fused reference itself against float64 arithmetic.
		want := naive(x, w, bias, m, k, n)
		for i, v := range biased {
			if d := math.Abs(float64(v) - want[i]); d > 1e-4*math.Sqrt(float64(k)) {
				t.Fatalf("%dx%dx%d: out[%d] = %v, float64 reference %v", m, k, n, i, v, want[i])
			}
		}
	}
}

// Axpy and Add on the NEON path round each element once (Axpy: a fused
// multiply-add, as Go's arm64 compiler also makes of the scalar tail's
// y[i] += a·x[i]); Dot is within float32 rounding of the float64 sum and
// the same bits run to run.
func TestNEONAxpyAddDot(t *testing.T) {
	usePath(t, "neon")
	rng := rand.New(rand.NewPCG(43, 44))
	for _, n := range []int{0, 1, 15, 16, 17, 48, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			x, y := random(rng, n), random(rng, n)
			a := float32(rng.NormFloat64())
			got := slices.Clone(y)
			Axpy(got, a, x)
			for i := range got {
				if want := fma32(a, x[i], y[i]); got[i] != want {
					t.Fatalf("Axpy: y[%d] = %v, want %v", i, got[i], want)
				}
			}
			got = slices.Clone(y)
			Add(got, x)
			for i := range got {
				if want := y[i] + x[i]; got[i] != want {
					t.Fatalf("Add: y[%d] = %v, want %v", i, got[i], want)
				}
			}
			want := 0.0
			for i := range x {
				want += float64(x[i]) * float64(y[i])
			}
			d := Dot(x, y)
			if math.Abs(float64(d)-want) > 1e-6*float64(n+1) {
				t.Errorf("Dot = %v, want %v", d, want)
			}
			if again := Dot(x, y); math.Float32bits(again) != math.Float32bits(d) {
				t.Errorf("Dot = %v, then %v", d, again)
			}
		})
	}
}
