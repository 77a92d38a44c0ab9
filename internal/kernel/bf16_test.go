package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// randomBF16 returns n normal values rounded to bfloat16 (to nearest, ties
// to even), as bits, with a few special values among them.
func randomBF16(rng *rand.Rand, n int) []uint16 {
	w := make([]uint16, n)
	for i := range w {
		b := math.Float32bits(float32(rng.NormFloat64()))
		w[i] = uint16((b + 0x7fff + (b>>16)&1) >> 16)
	}
	for i, h := range []uint16{0x8000, 0x0001, 0x7f7f, 0xff7f} { // −0, a subnormal, ±the largest
		if i < n {
			w[rng.IntN(n)] = h
		}
	}
	return w
}

// widened is w's float32 values, computed independently of WidenBF16.
func widened(w []uint16) []float32 {
	f := make([]float32, len(w))
	for i, h := range w {
		f[i] = math.Float32frombits(uint32(h) << 16)
	}
	return f
}

// Widening is exact: every bfloat16 bit pattern becomes the float32 with
// those bits on top and zeros below, NaNs and infinities included, at every
// length (whole vectors and tails).
func TestWidenBF16(t *testing.T) {
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 100, len(all)} {
		src := all[len(all)-n:]
		dst := make([]float32, n+1)
		dst[n] = 42
		WidenBF16(dst[:n], src)
		for i, h := range src {
			if got := math.Float32bits(dst[i]); got != uint32(h)<<16 {
				t.Fatalf("n=%d: WidenBF16(%#04x) has bits %#08x, want %#08x", n, h, got, uint32(h)<<16)
			}
		}
		if dst[n] != 42 {
			t.Fatalf("n=%d: WidenBF16 wrote past the end", n)
		}
	}
}

// The bfloat16 products equal their float32 forms on the widened weights
// bit for bit: for every row count (one decoding row, the short tiles, the
// narrow 12–16-row path, several pieces, tall products over several
// pieces), odd k and n, with and without a bias, serial or not.
func TestMatMulBF16MatchesFloat32(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, m := range []int{1, 2, 5, 6, 7, 12, 16, 17, 64, 100} {
		for _, kn := range [][2]int{{5, 7}, {300, 71}, {300, 200}, {1031, 1100}} {
			k, n := kn[0], kn[1]
			if testing.Short() && m > 17 && k > 300 {
				continue // -short (the arm64 run under qemu): the big shape with tail rows only
			}
			x, w, b := random(rng, m*k), randomBF16(rng, n*k), random(rng, n)
			wf := widened(w)
			for _, bias := range [][]float32{nil, b} {
				want, wantT := make([]float32, m*n), make([]float32, m*n)
				MatMulBT(want, x, wf, bias, m, k, n)
				MatMul(wantT, x, wf, bias, m, k, n) // wf as [k,n]
				for _, tc := range []struct {
					name string
					f    func(out, x []float32, w []uint16, bias []float32, m, k, n int)
					want []float32
				}{
					{"MatMulBTBF16", MatMulBTBF16, want}, {"MatMulBTBF16Serial", MatMulBTBF16Serial, want},
					{"MatMulBF16", MatMulBF16, wantT}, {"MatMulBF16Serial", MatMulBF16Serial, wantT},
				} {
					got := random(rng, m*n) // stale values must be overwritten
					tc.f(got, x, w, bias, m, k, n)
					for i := range tc.want {
						if math.Float32bits(got[i]) != math.Float32bits(tc.want[i]) {
							t.Fatalf("%s %dx%dx%d bias=%v: out[%d,%d] = %v, float32 product %v",
								tc.name, m, k, n, bias != nil, i/n, i%n, got[i], tc.want[i])
						}
					}
				}
			}
		}
	}
}

// The split of a bfloat16 product between goroutines changes no bit, and
// degenerate shapes and short operands behave as MatMulBT's do.
func TestMatMulBF16IndependentOfCores(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, s := range []struct{ m, k, n int }{{1, 700, 1000}, {5, 700, 1000}, {16, 700, 1000}, {37, 300, 1000}, {301, 300, 1100}} {
		m, k, n := s.m, s.k, s.n
		if testing.Short() && m > 37 {
			continue // -short (the arm64 run under qemu): the many-row case runs on amd64
		}
		x, w, bias := random(rng, m*k), randomBF16(rng, n*k), random(rng, n)
		for _, f := range []func(out, x []float32, w []uint16, bias []float32, m, k, n int){MatMulBTBF16, MatMulBF16} {
			run := func(procs int) []float32 {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				out := make([]float32, m*n)
				f(out, x, w, bias, m, k, n)
				return out
			}
			one := run(1)
			for _, p := range []int{2, 3, 7} {
				for i, v := range run(p) {
					if math.Float32bits(v) != math.Float32bits(one[i]) {
						t.Fatalf("%v, GOMAXPROCS=%d: out[%d] = %v, with one core %v", s, p, i, v, one[i])
					}
				}
			}
		}
	}
	out := []float32{7, 7, 7, 7}
	MatMulBTBF16(out, nil, nil, []float32{1, 2}, 2, 0, 2)
	if out[0] != 1 || out[1] != 2 || out[2] != 1 || out[3] != 2 {
		t.Errorf("k=0 with bias: out = %v, want [1 2 1 2]", out)
	}
	MatMulBTBF16(nil, nil, nil, nil, 0, 3, 5)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a short weight")
		}
	}()
	MatMulBTBF16(make([]float32, 4), make([]float32, 4), make([]uint16, 3), nil, 2, 2, 2)
}

// BenchmarkMatMulBTBF16 times decoding products (1 and 16 rows) with
// Qwen3-0.6B's shapes — the MLP's up (1024 → 3072) and down (3072 → 1024)
// projections and the LM head (1024 → 151936) — with float32 weights
// (MatMulBT) and bfloat16 weights (MatMulBTBF16), reporting the weights'
// bytes read per second (4 or 2 per weight) and the CPU time per product.
func BenchmarkMatMulBTBF16(b *testing.B) {
	for _, s := range []struct {
		name string
		k, n int
	}{{"up", 1024, 3072}, {"down", 3072, 1024}, {"head", 1024, 151936}} {
		rng := rand.New(rand.NewPCG(1, 1))
		w := randomBF16(rng, s.k*s.n)
		wf := widened(w)
		for _, m := range []int{1, 16} {
			x, out := random(rng, m*s.k), make([]float32, m*s.n)
			for _, dtype := range []string{"float32", "bfloat16"} {
				b.Run(fmt.Sprintf("%s/m=%d/%s", s.name, m, dtype), func(b *testing.B) {
					size := 4
					if dtype == "bfloat16" {
						size = 2
					}
					cpu0 := cpuTime()
					for b.Loop() {
						if size == 4 {
							MatMulBT(out, x, wf, nil, m, s.k, s.n)
						} else {
							MatMulBTBF16(out, x, w, nil, m, s.k, s.n)
						}
					}
					b.ReportMetric(float64(size*s.k*s.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "weight-GB/s")
					// The process's CPU time per product: on a machine shared
					// with other work, wall time measures the share of the
					// cores it got as much as the product.
					b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}
