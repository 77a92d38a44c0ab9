// Package kernel holds the float32 CPU kernels of hacrl's native engine:
// matrix products spread over the machine's cores (x·w, x·wᵀ, xᵀ·y),
// attention, softmax, norms, activations and their gradients, AdamW.
//
// Each kernel has a portable Go loop and may have vector forms; a kernel
// path is one set of them (path.go). The build registers the paths it
// carries — "avx2" on amd64 with GOEXPERIMENT=simd: 8-wide vectors and
// Go-assembly micro-kernels (tile_amd64.s); "neon" on arm64: the products,
// Axpy, Add and Dot on 4-wide fused multiply-adds (tile_arm64.s) — and
// when the package starts it
// installs the best one the CPU runs (cpuid), or the one the environment
// variable HACRL_KERNELS names ("portable" runs no vector instruction).
// Tests run the kernels on every path the CPU runs. MeasurePeaks measures
// the CPU's peak multiply-add rates, the yardstick of the products.
//
// MatMulBT (x·wᵀ) is the product of a layer whose weights are held as a
// checkpoint stores them, [out,in]: it needs no second copy of the weights
// and reads each one from memory once per product, transposing 16 weight
// rows at a time into a panel that stays in the caches; for tall products
// it runs as fast as x·w, for single decoding rows the transposing makes
// it cost up to about twice the multiply-adds' time when the weights are
// in the caches. A decoding batch of 12–16 rows skips the transposing: the
// operands swap roles in the micro-kernel, x's rows becoming its lanes.
//
// Vector functions end with VZEROUPPER (archsimd.ClearAVXUpperBits) and keep
// scalar Go code out of their loops: on the machines measured here legacy
// SSE instructions after 256-bit ones run many times slower, which once made
// scalar tail copies cost more than the vector work around them.
//
// Results depend only on the build and the operands' values, never on the
// number of cores or on how a product is split: every output element is its
// initial value (zero, bias, or itself) plus its multiply-adds in k order,
// on every code path, whichever goroutine computes it.
package kernel

import (
	"fmt"
	"runtime"
	"sync"
)

// colBlock is the width of the column blocks the product is split into; the
// SIMD micro-kernel computes 6 rows × colBlock columns at a time.
const colBlock = 16

// minParallelWork is the number of multiply-adds below which a product stays
// on the calling goroutine: starting goroutines costs more than it saves.
const minParallelWork = 1 << 16

// MatMul sets out = x·w (+ bias) for row-major x [m,k], w [k,n], out [m,n]
// and bias [n] (or nil).
func MatMul(out, x, w, bias []float32, m, k, n int) {
	product{out: out, a: x, w: w, bias: bias, m: m, k: k, n: n, rs: k, ps: 1}.run("MatMul", true)
}

// MatMulSerial is MatMul on the calling goroutine only, for callers that
// spread many small products over the cores themselves.
func MatMulSerial(out, x, w, bias []float32, m, k, n int) {
	product{out: out, a: x, w: w, bias: bias, m: m, k: k, n: n, rs: k, ps: 1}.run("MatMulSerial", false)
}

// MatMulTAdd adds xᵀ·y to out [m,n] for x [k,m] and y [k,n]: a weight
// gradient, summed over the k rows of a batch, without transposing x.
func MatMulTAdd(out, x, y []float32, m, k, n int) {
	product{out: out, a: x, w: y, m: m, k: k, n: n, rs: 1, ps: m, accumulate: true}.run("MatMulTAdd", true)
}

// MatMulTAddSerial is MatMulTAdd on the calling goroutine only.
func MatMulTAddSerial(out, x, y []float32, m, k, n int) {
	product{out: out, a: x, w: y, m: m, k: k, n: n, rs: 1, ps: m, accumulate: true}.run("MatMulTAddSerial", false)
}

// MatMulBT sets out [m,n] = x·wᵀ (+ bias) for x [m,k], w [n,k] and bias
// [n] (or nil): the product with a weight held [out,in] (a torch.nn.Linear
// weight, a [vocab,d] LM head), and the backward pass of x·w. It equals
// MatMul(x, wᵀ) bit for bit, for every m, without a transposed copy of w:
// the vector path transposes one k block of 16 weight rows at a time into
// a panel that stays in the caches, so each weight is read from memory once
// per product, from a single decoding row to thousands of training rows.
func MatMulBT(out, x, w, bias []float32, m, k, n int) {
	product{out: out, a: x, w: w, bias: bias, m: m, k: k, n: n, rs: k, ps: 1, wt: true}.run("MatMulBT", true)
}

// MatMulBTSerial is MatMulBT on the calling goroutine only.
func MatMulBTSerial(out, x, w, bias []float32, m, k, n int) {
	product{out: out, a: x, w: w, bias: bias, m: m, k: k, n: n, rs: k, ps: 1, wt: true}.run("MatMulBTSerial", false)
}

// MatMulBTAdd adds x·wᵀ to out [m,n] for x [m,k] and w [n,k].
func MatMulBTAdd(out, x, w []float32, m, k, n int) {
	product{out: out, a: x, w: w, m: m, k: k, n: n, rs: k, ps: 1, wt: true, accumulate: true}.run("MatMulBTAdd", true)
}

// Packed is a weight matrix laid out for the vector products: panels of
// 16 columns of w [k,n], each k×16 contiguous, the last zero-padded. A
// product with it reads the weights sequentially and skips packing them,
// which pays when the same small weights serve many products (the decoding
// steps of a small model) — at the price of a second copy of them.
type Packed struct {
	k, n   int
	w      []float32 // the weights as given: [k,n], or [n,k] when wt
	wt     bool
	panels []float32
}

// Pack lays out w [k,n] for MatMulPacked. w must not change afterwards.
func Pack(w []float32, k, n int) *Packed {
	if len(w) < k*n {
		panic(fmt.Sprintf("kernel: Pack %d×%d: %d elements", k, n, len(w)))
	}
	p := &Packed{k: k, n: n, w: w[:k*n]}
	if simdProduct == nil {
		return p
	}
	p.panels = make([]float32, (n+15)/16*16*k)
	for j := range (n + 15) / 16 {
		width := min(16, n-16*j)
		for q := range k {
			copy(p.panels[(j*k+q)*16:(j*k+q)*16+width], w[q*n+16*j:])
		}
	}
	return p
}

// PackT lays out the transpose of w [n,k] (a weight held [out,in]) for
// MatMulPacked, which then computes x·wᵀ as MatMulBT does, bit for bit. w
// must not change afterwards.
func PackT(w []float32, n, k int) *Packed {
	if len(w) < k*n {
		panic(fmt.Sprintf("kernel: PackT %d×%d: %d elements", n, k, len(w)))
	}
	p := &Packed{k: k, n: n, w: w[:k*n], wt: true}
	if simdProduct == nil {
		return p
	}
	p.panels = make([]float32, (n+15)/16*16*k)
	for j := range (n + 15) / 16 {
		for c := range min(16, n-16*j) {
			for q, v := range w[(16*j+c)*k : (16*j+c+1)*k] {
				p.panels[(j*k+q)*16+c] = v
			}
		}
	}
	return p
}

// MatMulPacked sets out = x·w (+ bias) for x [m,k] and the packed w: the
// same values as MatMul (MatMulBT for PackT), bit for bit.
func MatMulPacked(out, x []float32, w *Packed, bias []float32, m int) {
	product{out: out, a: x, w: w.w, wt: w.wt, pw: w.panels, bias: bias, m: m, k: w.k, n: w.n, rs: w.k, ps: 1}.run("MatMulPacked", true)
}

// MatMulPackedSerial is MatMulPacked on the calling goroutine only.
func MatMulPackedSerial(out, x []float32, w *Packed, bias []float32, m int) {
	product{out: out, a: x, w: w.w, wt: w.wt, pw: w.panels, bias: bias, m: m, k: w.k, n: w.n, rs: w.k, ps: 1}.run("MatMulPackedSerial", false)
}

// packMinRows is the row count from which a product packs its weight
// panels: below it the packing would not be repaid by reuse.
const packMinRows = 64

// product is out [m,n] = a·w (+ bias), or out += a·w when accumulate, where
// a's element (i,p) is a[i·rs + p·ps] and w is row-major [k,n] (or, when
// wt, [n,k]: w's element (p,j) is w[j·k + p]).
type product struct {
	out, a, w, bias []float32
	m, k, n, rs, ps int
	accumulate, wt  bool
	pw              []float32 // w already in panels (Packed), for the vector path
}

func (p product) run(name string, parallel bool) {
	switch {
	case p.m < 0 || p.k < 0 || p.n < 0:
		panic(fmt.Sprintf("kernel: %s: negative shape %d×%d·%d×%d", name, p.m, p.k, p.k, p.n))
	case p.m == 0 || p.n == 0:
		return
	case len(p.out) < p.m*p.n || len(p.w) < p.k*p.n || (p.k > 0 && len(p.a) <= (p.m-1)*p.rs+(p.k-1)*p.ps):
		panic(fmt.Sprintf("kernel: %s %d×%d·%d×%d: operands of %d, %d and %d elements", name, p.m, p.k, p.k, p.n, len(p.a), len(p.w), len(p.out)))
	case p.bias != nil && len(p.bias) < p.n:
		panic(fmt.Sprintf("kernel: %s: bias of %d elements for %d columns", name, len(p.bias), p.n))
	}
	blocks := (p.n + colBlock - 1) / colBlock
	workers := 1
	if parallel {
		workers = min(runtime.GOMAXPROCS(0), max(1, p.m*p.k*p.n/minParallelWork))
	}
	var wg sync.WaitGroup
	switch {
	case workers <= 1:
		p.cols(0, p.n)
	case blocks >= 8*workers || p.m < 12*workers:
		// Columns, in whole blocks: each worker reads all of a.
		workers = min(workers, blocks)
		for i := range workers {
			lo, hi := blocks*i/workers*colBlock, min(p.n, blocks*(i+1)/workers*colBlock)
			wg.Go(func() { p.cols(lo, hi) })
		}
	default:
		// Rows, in whole 6-row tiles: each worker reads all of w.
		tiles := (p.m + 5) / 6
		for i := range workers {
			r0, r1 := tiles*i/workers*6, min(p.m, tiles*(i+1)/workers*6)
			wg.Go(func() { p.rows(r0, r1).cols(0, p.n) })
		}
	}
	wg.Wait()
}

// rows is the part of the product that computes output rows [r0,r1).
func (p product) rows(r0, r1 int) product {
	q := p
	q.out, q.a, q.m = p.out[r0*p.n:], p.a[r0*p.rs:], r1-r0
	return q
}

// cols computes the output columns [lo,hi).
func (p product) cols(lo, hi int) {
	if simdProduct != nil {
		simdProduct(p, lo, hi)
		return
	}
	// Portable: 4×4 blocks of sums in registers, the rest row by row; each
	// element gets its initial value plus the products in k order either way.
	m4, hi4 := p.m/4*4, lo+(hi-lo)/4*4
	for i := 0; i < m4; i += 4 {
		for j := lo; j < hi4; j += 4 {
			p.block4x4(i, j)
		}
	}
	for i := range p.m {
		from := lo
		if i < m4 {
			from = hi4
		}
		if from == hi {
			continue
		}
		row := p.out[i*p.n+from : i*p.n+hi]
		switch {
		case p.accumulate:
		case p.bias != nil:
			copy(row, p.bias[from:hi])
		default:
			clear(row)
		}
		if p.wt {
			// w [n,k]: one element at a time, reading a row of w.
			for j := range row {
				s, wj := row[j], p.w[(from+j)*p.k:(from+j+1)*p.k]
				for q, v := range wj {
					s += p.a[i*p.rs+q*p.ps] * v
				}
				row[j] = s
			}
			continue
		}
		for q := range p.k {
			Axpy(row, p.a[i*p.rs+q*p.ps], p.w[q*p.n+from:q*p.n+hi])
		}
	}
}

// block4x4 computes output rows i…i+3, columns j…j+3 on the portable path.
func (p product) block4x4(i, j int) {
	var c [4][4]float32
	for r := range 4 {
		switch {
		case p.accumulate:
			copy(c[r][:], p.out[(i+r)*p.n+j:])
		case p.bias != nil:
			copy(c[r][:], p.bias[j:j+4])
		}
	}
	c00, c01, c02, c03 := c[0][0], c[0][1], c[0][2], c[0][3]
	c10, c11, c12, c13 := c[1][0], c[1][1], c[1][2], c[1][3]
	c20, c21, c22, c23 := c[2][0], c[2][1], c[2][2], c[2][3]
	c30, c31, c32, c33 := c[3][0], c[3][1], c[3][2], c[3][3]
	// w's element (q, j+c) is w[q·wq + c·wc] (wt: w [n,k] from row j).
	w, wq, wc := p.w[j:], p.n, 1
	if p.wt {
		w, wq, wc = p.w[j*p.k:], 1, p.k
	}
	for q := range p.k {
		at := i*p.rs + q*p.ps
		a0, a1, a2, a3 := p.a[at], p.a[at+p.rs], p.a[at+2*p.rs], p.a[at+3*p.rs]
		at = q * wq
		w0, w1, w2, w3 := w[at], w[at+wc], w[at+2*wc], w[at+3*wc]
		c00 += a0 * w0
		c01 += a0 * w1
		c02 += a0 * w2
		c03 += a0 * w3
		c10 += a1 * w0
		c11 += a1 * w1
		c12 += a1 * w2
		c13 += a1 * w3
		c20 += a2 * w0
		c21 += a2 * w1
		c22 += a2 * w2
		c23 += a2 * w3
		c30 += a3 * w0
		c31 += a3 * w1
		c32 += a3 * w2
		c33 += a3 * w3
	}
	copy(p.out[i*p.n+j:], []float32{c00, c01, c02, c03})
	copy(p.out[(i+1)*p.n+j:], []float32{c10, c11, c12, c13})
	copy(p.out[(i+2)*p.n+j:], []float32{c20, c21, c22, c23})
	copy(p.out[(i+3)*p.n+j:], []float32{c30, c31, c32, c33})
}

// simdProduct, when the build and CPU allow, computes the output columns
// [lo,hi) of a product with vector instructions.
var simdProduct func(p product, lo, hi int)

// simdAxpy and simdDot are the vector forms of Axpy and Dot, when available.
var (
	simdAxpy func(y []float32, a float32, x []float32)
	simdAdd  func(y, x []float32)
	simdDot  func(a, b []float32) float32
)

// Axpy adds a·x to y (len(y) elements).
func Axpy(y []float32, a float32, x []float32) {
	if simdAxpy != nil {
		simdAxpy(y, a, x)
		return
	}
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// Add adds x to y (len(y) elements).
func Add(y, x []float32) {
	if simdAdd != nil {
		simdAdd(y, x)
		return
	}
	x = x[:len(y)]
	for i := range y {
		y[i] += x[i]
	}
}

// Dot is Σ a[i]·b[i] over len(a) elements.
func Dot(a, b []float32) float32 {
	if simdDot != nil {
		return simdDot(a, b)
	}
	b = b[:len(a)]
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// Transpose writes the [cols,rows] transpose of the row-major [rows,cols]
// matrix src into dst, in tiles, spread over the cores.
func Transpose(dst, src []float32, rows, cols int) {
	const tile = 32
	if len(src) < rows*cols || len(dst) < rows*cols {
		panic(fmt.Sprintf("kernel: Transpose %d×%d: %d and %d elements", rows, cols, len(src), len(dst)))
	}
	Parallel((rows+tile-1)/tile, max(1, (1<<14)/(tile*max(1, cols))), func(lo, hi int) {
		for r0 := lo * tile; r0 < min(rows, hi*tile); r0 += tile {
			for c0 := 0; c0 < cols; c0 += tile {
				for r := r0; r < min(rows, r0+tile); r++ {
					for c := c0; c < min(cols, c0+tile); c++ {
						dst[c*rows+r] = src[r*cols+c]
					}
				}
			}
		}
	})
}

// Parallel runs fn over [0,n) split into contiguous ranges, one per core
// (at most), each at least minChunk long, and waits for them.
func Parallel(n, minChunk int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), max(1, n/max(1, minChunk)))
	if workers <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := range workers {
		lo, hi := n*i/workers, n*(i+1)/workers
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

// Attention sets out [dh] to softmax(q·K)·V over n key slots for one query
// q [dh] (already scaled): keys are held transposed, row d of K at
// keys[d·stride:], so slot s of key row d is keys[d·stride+s]; value slot s
// is values[s·dh:(s+1)·dh]. scores needs n elements of scratch space.
func Attention(out, q, keys, values, scores []float32, n, stride int) {
	dh := len(q)
	s := scores[:n]
	if simdScores != nil {
		simdScores(s, q, keys, stride)
	} else {
		clear(s)
		for d, qd := range q {
			Axpy(s, qd, keys[d*stride:])
		}
	}
	Softmax(s)
	o := out[:dh]
	if simdWeightedSum != nil {
		simdWeightedSum(o, s, values)
		return
	}
	clear(o)
	for j, p := range s {
		Axpy(o, p, values[j*dh:])
	}
}

// simdScores sets s[j] = Σ_d q[d]·keys[d·stride+j]; simdWeightedSum sets
// o = Σ_j p[j]·values[j·len(o):].
var (
	simdScores      func(s, q, keys []float32, stride int)
	simdWeightedSum func(o, p, values []float32)
)
