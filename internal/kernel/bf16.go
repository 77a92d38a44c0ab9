package kernel

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// Products with bfloat16 weights.
//
// A bfloat16 is the top half of a float32: widening one is a 16-bit left
// shift, exact. The products below keep weights in memory as bfloat16 bits
// (half the bytes of float32) and widen them as they read them, into
// float32 buffers that stay in the caches: on the vector path, a decoding
// step's x·wᵀ (fewer than 64 rows) widens 64 weight rows × 64 steps at a
// time into the packed path's panels (transposed as MatMulBT transposes
// float32 weights), or, for 12–16 rows, six weight rows at a time for the
// narrow path's tile; other products widen a piece of weights at a time
// and run the float32 product on it. Every output element is still its
// initial value plus its multiply-adds in k order, so each product equals
// its float32 form on the widened weights bit for bit, on every path, for
// every shape and number of cores. A product bound by reading its weights
// from memory — a decoding step of a few rows — reads half as many bytes.
// (CPUs with AVX512_BF16 could multiply the bfloat16 pairs directly with
// vdpbf16ps, which rounds differently; this package does not use it.)

// MatMulBTBF16 sets out [m,n] = x·wᵀ (+ bias) for x [m,k], w [n,k] held as
// bfloat16 bits and bias [n] (or nil): MatMulBT(out, x, widened w, bias),
// bit for bit.
func MatMulBTBF16(out, x []float32, w []uint16, bias []float32, m, k, n int) {
	bf16Product{out: out, x: x, w: w, bias: bias, m: m, k: k, n: n, wt: true}.run("MatMulBTBF16", true)
}

// MatMulBTBF16Serial is MatMulBTBF16 on the calling goroutine only.
func MatMulBTBF16Serial(out, x []float32, w []uint16, bias []float32, m, k, n int) {
	bf16Product{out: out, x: x, w: w, bias: bias, m: m, k: k, n: n, wt: true}.run("MatMulBTBF16Serial", false)
}

// MatMulBF16 sets out [m,n] = x·w (+ bias) for x [m,k], w [k,n] held as
// bfloat16 bits and bias [n] (or nil): MatMul(out, x, widened w, bias),
// bit for bit. It is the backward pass of MatMulBTBF16 (dx = dy·w) and the
// forward product of weights held [in,out].
func MatMulBF16(out, x []float32, w []uint16, bias []float32, m, k, n int) {
	bf16Product{out: out, x: x, w: w, bias: bias, m: m, k: k, n: n}.run("MatMulBF16", true)
}

// MatMulBF16Serial is MatMulBF16 on the calling goroutine only.
func MatMulBF16Serial(out, x []float32, w []uint16, bias []float32, m, k, n int) {
	bf16Product{out: out, x: x, w: w, bias: bias, m: m, k: k, n: n}.run("MatMulBF16Serial", false)
}

// WidenBF16 sets dst[i] to the float32 value of the bfloat16 bits src[i]
// for i < len(src).
func WidenBF16(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	if simdWiden != nil {
		simdWiden(dst, src)
		return
	}
	for i, h := range src {
		dst[i] = math.Float32frombits(uint32(h) << 16)
	}
}

// simdBF16Cols, where the build and CPU allow, computes output columns
// [lo,hi) of a bfloat16 x·wᵀ of fewer than bf16TallRows rows with vector
// instructions (installed with the avx2 path).
var simdBF16Cols func(p bf16Product, lo, hi int)

// simdWiden is the vector form of WidenBF16 (installed with the avx2
// path).
var simdWiden func(dst []float32, src []uint16)

// bf16Product is out [m,n] = x·w (+ bias) for bfloat16 w: [n,k] when wt
// (MatMulBT's layout), else [k,n].
type bf16Product struct {
	out, x, bias []float32
	w            []uint16
	m, k, n      int
	wt           bool
}

// bf16Piece is the most weights a piece of a product of few rows widens at
// a time off the vector path (256 KiB of float32, 1 MiB for 12 rows or
// more, whose narrow path transposes x once per piece). Tall products (bf16TallRows rows or more) widen pieces
// of bf16TallCols outputs, whose float32 product then reuses each weight
// across the rows as MatMulBT's packing does.
const (
	bf16Piece       = 64 << 10
	bf16PieceNarrow = 256 << 10
	bf16TallRows    = packMinRows
	bf16TallCols    = 1024
)

// bf16Buffers recycles the widened pieces and partial outputs.
var bf16Buffers = sync.Pool{New: func() any { return new([]float32) }}

func (p bf16Product) run(name string, parallel bool) {
	switch {
	case p.m < 0 || p.k < 0 || p.n < 0:
		panic(fmt.Sprintf("kernel: %s: negative shape %d×%d·%d×%d", name, p.m, p.k, p.k, p.n))
	case p.m == 0 || p.n == 0:
		return
	case len(p.out) < p.m*p.n || len(p.w) < p.k*p.n || len(p.x) < p.m*p.k:
		panic(fmt.Sprintf("kernel: %s %d×%d·%d×%d: operands of %d, %d and %d elements", name, p.m, p.k, p.k, p.n, len(p.x), len(p.w), len(p.out)))
	case p.bias != nil && len(p.bias) < p.n:
		panic(fmt.Sprintf("kernel: %s: bias of %d elements for %d columns", name, len(p.bias), p.n))
	}
	if p.m >= bf16TallRows && parallel {
		// Piece by piece, each widened and multiplied on all cores.
		for c := 0; c < p.n; c += bf16TallCols {
			p.piece(c, min(p.n, c+bf16TallCols), true)
		}
		return
	}
	if simdBF16Cols != nil && p.wt && p.k > 0 {
		// Few rows on the vector path: the columns in blocks of 64, split
		// between the workers.
		blocks := (p.n + 63) / 64
		workers := 1
		if parallel {
			workers = min(runtime.GOMAXPROCS(0), blocks, max(1, p.m*p.k*p.n/minParallelWork))
		}
		Parallel(workers, 1, func(lo, hi int) {
			for w := lo; w < hi; w++ {
				simdBF16Cols(p, blocks*w/workers*64, min(p.n, blocks*(w+1)/workers*64))
			}
		})
		return
	}
	piece := bf16Piece
	if p.m >= 12 {
		piece = bf16PieceNarrow
	}
	width := max(16, piece/max(1, p.k)/16*16)
	pieces := (p.n + width - 1) / width
	workers := 1
	if parallel {
		workers = min(runtime.GOMAXPROCS(0), pieces, max(1, p.m*p.k*p.n/minParallelWork))
	}
	Parallel(pieces, (pieces+workers-1)/workers, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			p.piece(i*width, min(p.n, (i+1)*width), false)
		}
	})
}

// piece computes output columns [lo,hi): it widens their weights and runs
// the float32 product on them, on all cores when par, into out directly
// when m is 1 and through a partial output otherwise.
func (p bf16Product) piece(lo, hi int, par bool) {
	cols := hi - lo
	bufp := bf16Buffers.Get().(*[]float32)
	defer bf16Buffers.Put(bufp)
	need := p.k * cols
	if p.m > 1 {
		need += p.m * cols
	}
	if cap(*bufp) < need {
		*bufp = make([]float32, need)
	}
	wf := (*bufp)[:p.k*cols]
	out := p.out[lo:hi]
	if p.m > 1 {
		out = (*bufp)[p.k*cols : need]
	}
	var bias []float32
	if p.bias != nil {
		bias = p.bias[lo:hi]
	}
	if p.wt {
		// Rows [lo,hi) of w [n,k] are contiguous.
		parallel(par, cols, 64, func(a, b int) { WidenBF16(wf[a*p.k:b*p.k], p.w[(lo+a)*p.k:(lo+b)*p.k]) })
		if par {
			MatMulBT(out, p.x, wf, bias, p.m, p.k, cols)
		} else {
			MatMulBTSerial(out, p.x, wf, bias, p.m, p.k, cols)
		}
	} else {
		// Columns [lo,hi) of w [k,n], row by row.
		parallel(par, p.k, 64, func(a, b int) {
			for q := a; q < b; q++ {
				WidenBF16(wf[q*cols:(q+1)*cols], p.w[q*p.n+lo:q*p.n+hi])
			}
		})
		if par {
			MatMul(out, p.x, wf, bias, p.m, p.k, cols)
		} else {
			MatMulSerial(out, p.x, wf, bias, p.m, p.k, cols)
		}
	}
	if p.m > 1 {
		for i := range p.m {
			copy(p.out[i*p.n+lo:i*p.n+hi], out[i*cols:(i+1)*cols])
		}
	}
}

// parallel is Parallel when par, else fn(0, n).
func parallel(par bool, n, minChunk int, fn func(lo, hi int)) {
	if par {
		Parallel(n, minChunk, fn)
		return
	}
	fn(0, n)
}
