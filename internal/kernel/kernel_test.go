package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

func random(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// naive is x·w + bias in float64.
func naive(x, w, bias []float32, m, k, n int) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			s := 0.0
			if bias != nil {
				s = float64(bias[j])
			}
			for p := range k {
				s += float64(x[i*k+p]) * float64(w[p*n+j])
			}
			out[i*n+j] = s
		}
	}
	return out
}

func TestMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ m, k, n int }{
		{1, 1, 1}, {3, 5, 7}, {4, 8, 16}, {5, 9, 17}, {7, 33, 24}, {32, 128, 384}, {33, 64, 344}, {2, 300, 40}, {64, 256, 1031}, {50, 600, 70}, {30, 1100, 48},
	} {
		for _, withBias := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dx%dx%d/bias=%v", tc.m, tc.k, tc.n, withBias), func(t *testing.T) {
				x, w := random(rng, tc.m*tc.k), random(rng, tc.k*tc.n)
				var bias []float32
				if withBias {
					bias = random(rng, tc.n)
				}
				out := random(rng, tc.m*tc.n) // stale values must be overwritten
				MatMul(out, x, w, bias, tc.m, tc.k, tc.n)
				want := naive(x, w, bias, tc.m, tc.k, tc.n)
				for i, v := range out {
					if d := math.Abs(float64(v) - want[i]); d > 1e-4*math.Sqrt(float64(tc.k)) {
						t.Fatalf("out[%d,%d] = %v, want %v", i/tc.n, i%tc.n, v, want[i])
					}
				}
			})
		}
	}
}

// TestMatMulIndependentOfCores checks that the split between goroutines
// does not change a single bit of the result.
func TestMatMulIndependentOfCores(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	// Wide products split by columns, tall narrow ones by rows.
	for _, s := range []struct{ m, k, n int }{{37, 700, 1000}, {301, 300, 40}} {
		m, k, n := s.m, s.k, s.n
		x, w, bias := random(rng, m*k), random(rng, k*n), random(rng, n)
		run := func(procs int) []float32 {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			out := make([]float32, m*n)
			MatMul(out, x, w, bias, m, k, n)
			return out
		}
		one := run(1)
		for _, p := range []int{2, 3, 7} {
			for i, v := range run(p) {
				if v != one[i] {
					t.Fatalf("%v, GOMAXPROCS=%d: out[%d] = %v, with one core %v", s, p, i, v, one[i])
				}
			}
		}
	}
}

func TestMatMulPanicsOnShortOperands(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a short weight")
		}
	}()
	MatMul(make([]float32, 4), make([]float32, 4), make([]float32, 3), nil, 2, 2, 2)
}

func TestDotAxpy(t *testing.T) {
	a, b := []float32{1, 2, 3}, []float32{4, 5, 6, 7}
	if got := Dot(a, b); got != 32 {
		t.Errorf("Dot = %v, want 32", got)
	}
	y := []float32{1, 1}
	Axpy(y, 2, []float32{3, 4, 5})
	if y[0] != 7 || y[1] != 9 {
		t.Errorf("Axpy = %v, want [7 9]", y)
	}
}

func TestParallelCoversRange(t *testing.T) {
	for _, n := range []int{0, 1, 5, 100} {
		seen := make([]int, n)
		ch := make(chan [2]int, 64)
		Parallel(n, 3, func(lo, hi int) { ch <- [2]int{lo, hi} })
		close(ch)
		for r := range ch {
			for i := r[0]; i < r[1]; i++ {
				seen[i]++
			}
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d: index %d covered %d times", n, i, c)
			}
		}
	}
}

func BenchmarkMatMul(b *testing.B) {
	for _, s := range []struct{ m, k, n int }{{32, 128, 384}, {32, 128, 512}, {32, 512, 128}, {32, 256, 1024}, {32, 1024, 256}, {2048, 128, 384}, {2048, 512, 128}, {128, 2048, 384}, {2048, 256, 1024}} {
		b.Run(fmt.Sprintf("%dx%dx%d", s.m, s.k, s.n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			x, w, out := random(rng, s.m*s.k), random(rng, s.k*s.n), make([]float32, s.m*s.n)
			for b.Loop() {
				MatMul(out, x, w, nil, s.m, s.k, s.n)
			}
			b.ReportMetric(float64(2*s.m*s.k*s.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func TestDotAxpyLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 100} {
		a, b := random(rng, n), random(rng, n)
		want := 0.0
		for i := range a {
			want += float64(a[i]) * float64(b[i])
		}
		if got := Dot(a, b); math.Abs(float64(got)-want) > 1e-5*float64(n+1) {
			t.Errorf("Dot of %d = %v, want %v", n, got, want)
		}
		z := append([]float32(nil), b...)
		Add(z, a)
		for i := range z {
			if z[i] != b[i]+a[i] {
				t.Fatalf("Add of %d: z[%d] = %v, want %v", n, i, z[i], b[i]+a[i])
			}
		}
		y := append([]float32(nil), b...)
		Axpy(y, 0.5, a)
		for i := range y {
			if w := float64(b[i]) + 0.5*float64(a[i]); math.Abs(float64(y[i])-w) > 1e-6 {
				t.Fatalf("Axpy of %d: y[%d] = %v, want %v", n, i, y[i], w)
			}
		}
	}
}

func TestAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct{ dh, n, stride int }{{32, 1, 64}, {32, 37, 64}, {8, 64, 64}, {16, 70, 96}, {12, 5, 8}, {64, 33, 40}, {80, 9, 9}} {
		q, keys, values := random(rng, tc.dh), random(rng, tc.dh*tc.stride), random(rng, tc.stride*tc.dh)
		out, scores := make([]float32, tc.dh), make([]float32, tc.n)
		Attention(out, q, keys, values, scores, tc.n, tc.stride)
		logits := make([]float64, tc.n)
		top := math.Inf(-1)
		for j := range logits {
			for d := range tc.dh {
				logits[j] += float64(q[d]) * float64(keys[d*tc.stride+j])
			}
			top = max(top, logits[j])
		}
		total := 0.0
		for j := range logits {
			logits[j] = math.Exp(logits[j] - top)
			total += logits[j]
		}
		for d := range tc.dh {
			want := 0.0
			for j := range logits {
				want += logits[j] / total * float64(values[j*tc.dh+d])
			}
			if math.Abs(float64(out[d])-want) > 2e-5 {
				t.Fatalf("dh=%d n=%d: out[%d] = %v, want %v", tc.dh, tc.n, d, out[d], want)
			}
		}
	}
}

func TestTranspose(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, s := range [][2]int{{1, 1}, {3, 70}, {65, 33}, {300, 129}} {
		src := random(rng, s[0]*s[1])
		dst := make([]float32, len(src))
		Transpose(dst, src, s[0], s[1])
		for r := range s[0] {
			for c := range s[1] {
				if dst[c*s[0]+r] != src[r*s[1]+c] {
					t.Fatalf("%v: dst[%d,%d] != src[%d,%d]", s, c, r, r, c)
				}
			}
		}
	}
}

func TestMatMulSerialMatchesMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	m, k, n := 40, 70, 130
	x, w, b := random(rng, m*k), random(rng, k*n), random(rng, n)
	a, s := make([]float32, m*n), make([]float32, m*n)
	MatMul(a, x, w, b, m, k, n)
	MatMulSerial(s, x, w, b, m, k, n)
	for i := range a {
		if a[i] != s[i] {
			t.Fatalf("out[%d]: MatMul %v, MatMulSerial %v", i, a[i], s[i])
		}
	}
}

func TestMatMulTAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, tc := range []struct{ m, k, n int }{{1, 1, 1}, {6, 5, 16}, {13, 70, 33}, {128, 300, 40}, {7, 1, 130}} {
		x, y := random(rng, tc.k*tc.m), random(rng, tc.k*tc.n)
		xt := make([]float32, len(x))
		Transpose(xt, x, tc.k, tc.m)
		init := random(rng, tc.m*tc.n)
		want := naive(xt, y, nil, tc.m, tc.k, tc.n)
		for _, serial := range []bool{false, true} {
			out := append([]float32(nil), init...)
			if serial {
				MatMulTAddSerial(out, x, y, tc.m, tc.k, tc.n)
			} else {
				MatMulTAdd(out, x, y, tc.m, tc.k, tc.n)
			}
			for i, v := range out {
				if d := math.Abs(float64(v) - float64(init[i]) - want[i]); d > 1e-4*math.Sqrt(float64(tc.k)) {
					t.Fatalf("%v serial=%v: out[%d] = %v, want %v", tc, serial, i, v, float64(init[i])+want[i])
				}
			}
		}
	}
}

// Every path (the packed blocks of a tall product, the plain tiles, the row
// by row tail) gives each output element the same multiply-adds in the same
// order: one row computed alone equals the same row of a tall product.
func TestMatMulPathsAgreeBitwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	m, k, n := 40, 600, 70
	x, w, b := random(rng, m*k), random(rng, k*n), random(rng, n)
	all := make([]float32, m*n)
	MatMul(all, x, w, b, m, k, n)
	six := make([]float32, 6*n)
	MatMul(six, x[6*k:12*k], w, b, 6, k, n)
	for i := range m {
		one := make([]float32, n)
		MatMul(one, x[i*k:(i+1)*k], w, b, 1, k, n)
		for j := range n {
			if one[j] != all[i*n+j] {
				t.Fatalf("row %d col %d: alone %v, in the product %v", i, j, one[j], all[i*n+j])
			}
			if i >= 6 && i < 12 && six[(i-6)*n+j] != all[i*n+j] {
				t.Fatalf("row %d col %d: in a 6-row product %v, in the tall product %v", i, j, six[(i-6)*n+j], all[i*n+j])
			}
		}
	}
}

// x·wᵀ (+ bias) from w [n,k] equals, bit for bit, x times w transposed by
// hand, for every row count (single decoding rows, partial and whole 6-row
// tiles, tall products), k with several blocks and a remainder of steps
// that is not a multiple of 8, columns that are not a multiple of 16 and
// span several packing chunks; spread over the cores and serial, setting
// and adding to out.
func TestMatMulBT(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for _, m := range []int{1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 16, 17, 64, 100} {
		for _, kn := range [][2]int{{5, 7}, {300, 70}, {520, 1100}, {64, 33}} {
			k, n := kn[0], kn[1]
			if testing.Short() && m > 17 && k > 300 {
				continue // -short (the arm64 run under qemu): the big shape with tail rows only
			}
			x, w, b := random(rng, m*k), random(rng, n*k), random(rng, n)
			wt := make([]float32, len(w))
			Transpose(wt, w, n, k)
			init := random(rng, m*n)
			for _, bias := range [][]float32{nil, b} {
				want := make([]float32, m*n)
				MatMul(want, x, wt, bias, m, k, n)
				for _, serial := range []bool{false, true} {
					got := random(rng, m*n) // stale values must be overwritten
					if serial {
						MatMulBTSerial(got, x, w, bias, m, k, n)
					} else {
						MatMulBT(got, x, w, bias, m, k, n)
					}
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("%dx%dx%d bias=%v serial=%v: out[%d] = %v, want %v", m, k, n, bias != nil, serial, i, got[i], want[i])
						}
					}
				}
			}
			// Adding: each row is its old value plus the same products, as
			// a one-row MatMul with the old row as its bias.
			want := make([]float32, m*n)
			for i := range m {
				MatMul(want[i*n:(i+1)*n], x[i*k:(i+1)*k], wt, init[i*n:(i+1)*n], 1, k, n)
			}
			got := append([]float32(nil), init...)
			MatMulBTAdd(got, x, w, m, k, n)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%dx%dx%d: MatMulBTAdd out[%d] = %v, want %v", m, k, n, i, got[i], want[i])
				}
			}
		}
	}
}

// MatMulBT's split between goroutines (by columns for few rows, by rows for
// tall narrow products) changes no bit of the result, and degenerate
// shapes and short operands behave as MatMul's do.
func TestMatMulBTIndependentOfCores(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, s := range []struct{ m, k, n int }{{1, 700, 1000}, {5, 700, 1000}, {16, 700, 1000}, {37, 300, 1000}, {301, 300, 40}} {
		m, k, n := s.m, s.k, s.n
		x, w, bias := random(rng, m*k), random(rng, n*k), random(rng, n)
		run := func(procs int) []float32 {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			out := make([]float32, m*n)
			MatMulBT(out, x, w, bias, m, k, n)
			return out
		}
		one := run(1)
		for _, p := range []int{2, 3, 7} {
			for i, v := range run(p) {
				if v != one[i] {
					t.Fatalf("%v, GOMAXPROCS=%d: out[%d] = %v, with one core %v", s, p, i, v, one[i])
				}
			}
		}
	}
	// k = 0: the bias (or zero); m = 0 or n = 0: nothing.
	out := []float32{7, 7, 7, 7}
	MatMulBT(out, nil, nil, []float32{1, 2}, 2, 0, 2)
	if out[0] != 1 || out[1] != 2 || out[2] != 1 || out[3] != 2 {
		t.Errorf("k=0 with bias: out = %v, want [1 2 1 2]", out)
	}
	MatMulBT(nil, nil, nil, nil, 0, 3, 5)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a short weight")
		}
	}()
	MatMulBT(make([]float32, 4), make([]float32, 4), make([]float32, 3), nil, 2, 2, 2)
}

// BenchmarkTrainingShapes times the products of a gpt d=256 training step
// on 2048 tokens: the forward projections and the weight gradients (xᵀ·y).
func BenchmarkTrainingShapes(b *testing.B) {
	for _, s := range []struct {
		m, k, n    int
		transposed bool
	}{{2048, 256, 768, false}, {2048, 256, 1024, false}, {2048, 1024, 256, false},
		{256, 2048, 768, true}, {256, 2048, 1024, true}, {1024, 2048, 256, true}} {
		name := fmt.Sprintf("%dx%dx%d", s.m, s.k, s.n)
		if s.transposed {
			name += "/xT·y"
		}
		b.Run(name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			x, w, out := random(rng, s.m*s.k), random(rng, s.k*s.n), make([]float32, s.m*s.n)
			for b.Loop() {
				if s.transposed {
					MatMulTAdd(out, x, w, s.m, s.k, s.n)
				} else {
					MatMul(out, x, w, nil, s.m, s.k, s.n)
				}
			}
			b.ReportMetric(float64(2*s.m*s.k*s.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkLinearShapes times the Linear layers of Qwen2.5-0.5B (d=896,
// vocabulary 151,936) with their weights [out,in] as the checkpoint holds
// them (MatMulBT): decoding rows (1–16) are bound by reading the weights
// (MB/s counts weight bytes), training rows by the multiply-adds
// (GFLOP/s). Each shape's weights are made only when one of its benchmarks
// runs.
func BenchmarkLinearShapes(b *testing.B) {
	for _, s := range []struct {
		name string
		k, n int
	}{{"qkv", 896, 1152}, {"o_proj", 896, 896}, {"gate_up", 896, 9728}, {"down", 4864, 896}, {"head", 896, 151936}} {
		b.Run(s.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			w := make([]float32, s.k*s.n)
			for i := range w {
				w[i] = rng.Float32() - 0.5
			}
			for _, m := range []int{1, 8, 16, 64, 1024} {
				if m == 1024 && s.n > 100000 {
					continue
				}
				x, out := random(rng, m*s.k), make([]float32, m*s.n)
				b.Run(fmt.Sprintf("m=%d", m), func(b *testing.B) {
					b.SetBytes(int64(s.k * s.n * 4))
					for b.Loop() {
						MatMulBT(out, x, w, nil, m, s.k, s.n)
					}
					b.ReportMetric(float64(2*m*s.k*s.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		})
	}
}

// A packed weight gives MatMul's values bit for bit, and a PackT weight
// MatMulBT's, on every path (tall, short, partial panels, fewer than six
// rows, several k blocks).
func TestMatMulPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for _, s := range []struct{ m, k, n int }{{1, 5, 7}, {4, 33, 16}, {16, 128, 344}, {13, 300, 70}, {32, 300, 40}, {70, 600, 130}} {
		x, w, b := random(rng, s.m*s.k), random(rng, s.k*s.n), random(rng, s.n)
		wt := make([]float32, len(w))
		Transpose(wt, w, s.k, s.n) // [n,k]
		for _, pw := range []*Packed{Pack(w, s.k, s.n), PackT(wt, s.n, s.k)} {
			for _, bias := range [][]float32{nil, b} {
				want, got, serial := make([]float32, s.m*s.n), make([]float32, s.m*s.n), make([]float32, s.m*s.n)
				MatMul(want, x, w, bias, s.m, s.k, s.n)
				MatMulPacked(got, x, pw, bias, s.m)
				MatMulPackedSerial(serial, x, pw, bias, s.m)
				for i := range want {
					if got[i] != want[i] || serial[i] != want[i] {
						t.Fatalf("%v wt=%v bias=%v: out[%d] = %v (serial %v), want %v", s, pw.wt, bias != nil, i, got[i], serial[i], want[i])
					}
				}
			}
		}
	}
}
