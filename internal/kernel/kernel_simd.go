//go:build amd64 && goexperiment.simd

package kernel

import (
	"math"
	"simd/archsimd"
	"sync"
)

// The AVX2 path: 8-wide float32 vectors, fused multiply-adds and the
// assembly micro-kernels of tile_amd64.s.
var _ = registerPath(path{
	name:    "avx2",
	runs:    archsimd.X86.AVX2() && archsimd.X86.FMA(),
	needs:   "AVX2 and FMA",
	install: installAVX2,
})

// installAVX2 sets the kernel function variables to the AVX2 functions.
func installAVX2() {
	simdProduct, simdAxpy, simdDot, simdAdd = productAVX2, axpyAVX2, dotAVX2, addAVX2
	simdExpShift, simdGELU, simdSiLUMul = expShiftAVX2, geluAVX2, siluMulAVX2
	simdGELUBackward, simdSiLUMulBackward = geluBackwardAVX2, siluMulBackwardAVX2
	simdScores, simdWeightedSum = scoresAVX2, weightedSumAVX2
	expConst = [...]archsimd.Float32x8{
		archsimd.BroadcastFloat32x8(expMax), archsimd.BroadcastFloat32x8(expMin), archsimd.BroadcastFloat32x8(log2e),
		archsimd.BroadcastFloat32x8(-ln2Hi), archsimd.BroadcastFloat32x8(-ln2Lo),
	}
	for i, c := range [...]float32{1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1} {
		expTaylor[i] = archsimd.BroadcastFloat32x8(c)
	}
	erfVectors = erfVectors[:0]
	for _, c := range erfSeries {
		erfVectors = append(erfVectors, archsimd.BroadcastFloat32x8(c))
	}
	simdNormSquares, simdNormScale, simdNormBackward = normSquaresAVX2, normScaleAVX2, normBackwardAVX2
	simdMulAdd, simdSum = mulAddAVX2, sumAVX2
	simdAdamW = adamWAVX2
	simdMax, simdScale, simdCausalSoftmax = maxAVX2, scaleAVX2, causalSoftmaxAVX2
	simdExpScaled, simdIndexAtLeast, simdFirstAtLeast = expScaledAVX2, indexAtLeastAVX2, firstAtLeastAVX2
	simdWiden, simdBF16Cols = widenAVX2, bf16ColsAVX2
}

// productAVX2 computes output columns [lo,hi) of a product: tall products,
// products with w [n,k] (MatMulBT, any m) and pre-packed weights through
// packed panels; others in full blocks of 16 columns six rows at a time on
// the assembly tile straight from the operands, with a partial last block
// through a zero-padded panel; what remains (the last m mod 6 rows of an
// accumulating product, products of fewer than six rows) one row at a
// time. Every output element is its initial value plus the multiply-adds
// in p order on every path.
func productAVX2(p product, lo, hi int) {
	defer archsimd.ClearAVXUpperBits()
	if p.wt && p.pw == nil && p.k > 0 && p.m >= narrowMinRows && p.m <= 16 && p.ps == 1 {
		p.narrowBT(lo, hi)
		return
	}
	if p.k > 0 && (p.m >= packMinRows || p.wt || p.pw != nil) {
		p.packed(lo, hi)
		return
	}
	if full := lo + (hi-lo)/16*16; full < hi && p.k > 0 && p.m >= 6 {
		p.packed(full, hi) // the partial block, zero-padded
		hi = full
	}
	var zeros [16]float32
	for c := lo; c < hi; c += 16 {
		width := min(16, hi-c)
		i := 0
		if width == 16 && p.k > 0 && p.m >= 6 {
			_ = p.w[(p.k-1)*p.n+c+15]
			_ = p.out[(p.m-1)*p.n+c+15]
			init, istride := &zeros[0], uintptr(0)
			if p.bias != nil {
				_ = p.bias[c+15]
				init = &p.bias[c]
			}
			for ; i < p.m; i += 6 {
				if i+6 > p.m {
					if p.accumulate {
						break // the rest row by row: a second tile would add twice
					}
					// The last tile overlaps the one before: its rows come out
					// the same, and the product needs no row-by-row tail.
					i = p.m - 6
				}
				_ = p.a[(i+5)*p.rs+(p.k-1)*p.ps]
				if p.accumulate {
					init, istride = &p.out[i*p.n+c], uintptr(p.n)*4
				}
				tile6x16(p.k, &p.a[i*p.rs], uintptr(p.rs)*4, uintptr(p.ps)*4, &p.w[c], uintptr(p.n)*4,
					init, istride, &p.out[i*p.n+c], uintptr(p.n)*4)
			}
		}
		for ; i < p.m; i++ {
			p.row(i, c, width)
		}
	}
}

// narrowMinRows is the fewest rows narrowBT takes: it computes 16 rows'
// worth of multiply-adds whatever m is, so with fewer rows the transposing
// path wastes less.
const narrowMinRows = 12

// narrowBT computes output columns [lo,hi) of x·wᵀ (w [n,k]) for 8…16 rows
// of x — a decoding step's batch — without transposing w: the roles of the
// operands swap, the tile's six rows are six rows of w, broadcast from
// memory as each streams by once, and its 16 lanes are the rows of x, whose
// transpose [k,16] (zero-padded past m) is small and made once; six rows
// of w at a time run on tile6x16Rows, which prefetches them (a step's
// throughput was bound by their broadcasts waiting on memory). The tiles
// come out transposed and go into out sixteen columns at a time. Each output element is
// still its initial value plus its multiply-adds in p order (a product is
// commutative inside a fused multiply-add), so the bits are those of every
// other path.
func (p product) narrowBT(lo, hi int) {
	bufp := packBuffers.Get().(*[]float32)
	defer packBuffers.Put(bufp)
	need := 16*p.k + 16*p.k // x padded to 16 rows, and its transpose
	if cap(*bufp) < need {
		*bufp = make([]float32, need)
	}
	rows16, xt := (*bufp)[:16*p.k], (*bufp)[16*p.k:need]
	for i := range 16 {
		if i < p.m {
			copy(rows16[i*p.k:(i+1)*p.k], p.a[i*p.rs:i*p.rs+p.k])
		} else {
			clear(rows16[i*p.k : (i+1)*p.k])
		}
	}
	full := p.k / 8 * 8
	if full > 0 {
		transpose16(full, &rows16[0], uintptr(p.k)*4, &xt[0])
	}
	for q := full; q < p.k; q++ {
		for i := range 16 {
			xt[q*16+i] = rows16[i*p.k+q]
		}
	}
	// The tiles write out's transpose, [hi−lo][16], beside x's; it goes
	// into out sixteen columns at a time at the end.
	if cap(*bufp) < need+16*(hi-lo) {
		grown := make([]float32, need+16*(hi-lo))
		copy(grown, (*bufp)[:need])
		*bufp = grown
		rows16, xt = (*bufp)[:16*p.k], (*bufp)[16*p.k:need]
	}
	outT := (*bufp)[need : need+16*(hi-lo)]
	var zeros [16]float32
	var init [6][16]float32
	for j := lo; j < hi; j += 6 {
		rows := min(6, hi-j)
		start, istride := &zeros[0], uintptr(0) // every row from zero
		switch {
		case p.accumulate:
			for i := range p.m {
				for r, v := range p.out[i*p.n+j : i*p.n+j+rows] {
					init[r][i] = v
				}
			}
			start, istride = &init[0][0], 64
		case p.bias != nil:
			for r, b := range p.bias[j : j+rows] {
				for i := range init[r] {
					init[r][i] = b
				}
			}
			start, istride = &init[0][0], 64
		}
		if rows == 6 {
			tile6x16Rows(p.k, &p.w[j*p.k], uintptr(p.k)*4, &xt[0], start, istride, &outT[(j-lo)*16])
		} else {
			tileRows(rows, p.k, &p.w[j*p.k], uintptr(p.k)*4, 4, &xt[0], 64, start, istride, &outT[(j-lo)*16], 64)
		}
	}
	untransposeTiles(p.out, outT, p.m, p.n, lo, hi)
}

// untransposeTiles copies the tiles of the narrow x·wᵀ path into out
// [m,n]'s columns [lo,hi): outT holds, for each of those columns, its m
// (≤ 16) rows at a stride of 16.
func untransposeTiles(out, outT []float32, m, n, lo, hi int) {
	for c0 := lo; c0 < hi; c0 += 16 {
		block := outT[(c0-lo)*16 : (min(hi, c0+16)-lo)*16]
		for i := range m {
			o := out[i*n+c0 : i*n+min(hi, c0+16)]
			for c := range o {
				o[c] = block[c*16+i]
			}
		}
	}
}

// transposeSteps is how many steps of weights transpose16 transposes at a
// time: eight, the 8×8 blocks of its 256-bit registers.
const transposeSteps = 8

// kBlock is the depth of one packed pass: a 6×kBlock tile of a (6 KiB) and
// the kBlock×16 weight panels of a worker's columns (up to 1 MiB at 1024
// columns) stay in the caches while the tiles sweep them.
const kBlock = 256

// kBlockShort is the depth of a pass of a product of fewer than
// packMinRows rows: a chunk's four panels (16 KiB), the 64 weight rows
// being read and those prefetched for the next pass stay in the level-1
// cache (deeper passes measured up to 1.5× slower on weights beyond it).
const kBlockShort = 64

// packBuffers recycles the packed weight panels.
var packBuffers = sync.Pool{New: func() any { return new([]float32) }}

// packed computes output columns [lo,hi) of a product chunk by chunk of
// columns, each in passes over k blocks: each pass copies the block's
// weights for the chunk's full 16-column panels into contiguous panels (w
// [n,k] through an in-register transpose of 16 weight rows), and each 6-row
// tile of a transposed a into a contiguous [k,6] strip, so that the
// micro-kernel reads both sequentially. Strided reads with power-of-two
// strides (a weight row of 1024 floats is 4 KiB) otherwise collide in the
// same cache sets. The panels of one pass stay in the caches, so a weight
// is read from memory once per product however many rows there are.
// Outputs keep their exact values: each element still gets its
// multiply-adds in p order, its partial sum passing through memory between
// blocks. The m mod 6 rows past the last full tile run on tiles of their
// own row count (one or two rows over several panels, for independent
// sums); columns past the last full panel go through zero-padded strips
// and panels and a scratch output tile.
func (p product) packed(lo, hi int) {
	chunk := packCols
	if p.m < packMinRows {
		chunk = packColsShort
	}
	bufp := packBuffers.Get().(*[]float32)
	defer packBuffers.Put(bufp)
	for c := lo; c < hi; c += chunk {
		p.packedCols(c, min(hi, c+chunk), bufp)
	}
}

// packCols is the width of the column chunks a tall product packs at a
// time: one k block of their panels (1 MiB) stays in the level-2 cache
// while every tile of a sweeps it. packColsShort is the chunk of products
// of fewer than packMinRows rows, which use each panel for a few tiles
// only: its panels stay in the level-1 cache from packing to use.
const (
	packCols      = 1024
	packColsShort = 64
)

// packedCols computes output columns [lo,hi) of a product (see packed),
// packing into *bufp.
func (p product) packedCols(lo, hi int, bufp *[]float32) {
	panels := (hi - lo + 15) / 16
	tiles := p.m / 6
	kb := kBlock
	if p.m < packMinRows {
		kb = kBlockShort
	}
	panelFloats, stripFloats := kb*16*panels, 0
	if p.pw != nil {
		panelFloats = 0 // packed once by Pack
	}
	if p.rs == 1 {
		stripFloats = kb * 6 * tiles
	}
	if cap(*bufp) < panelFloats+stripFloats {
		*bufp = make([]float32, panelFloats+stripFloats)
	}
	wp, strips := (*bufp)[:panelFloats], (*bufp)[panelFloats:panelFloats+stripFloats]
	var zeros [64]float32
	var strip [kBlock * 6]float32
	var scratch [6][16]float32
	// Consecutive panels of a block are pstride bytes apart.
	pstride := uintptr(kb * 16 * 4)
	if p.pw != nil {
		pstride = uintptr(16*p.k) * 4
	}
	for k0 := 0; k0 < p.k; k0 += kb {
		kc := min(kb, p.k-k0)
		// panelAt is where panel j of the block starts: packed once by
		// Pack, panel j is [k][16] at (lo/16 + j)·16k.
		panelAt := func(j int) *float32 {
			if p.pw != nil {
				return &p.pw[(lo/16+j)*16*p.k+16*k0]
			}
			return &wp[j*kb*16]
		}
		for j := range panels {
			if p.pw != nil {
				break
			}
			c := lo + 16*j
			width := min(16, hi-c)
			p.packPanel(wp[j*kb*16:j*kb*16+kc*16], c, width, k0, kc)
		}
		if p.rs == 1 && tiles > 0 {
			// Transposed a (xᵀ·y): a step's six values of a tile are
			// adjacent, but consecutive steps sit a whole row of x apart,
			// often a power of two bytes that maps every step to the same
			// few cache sets. Copy the block into [tile][step][6] strips,
			// reading x row by row.
			for q := range kc {
				row := p.a[(k0+q)*p.ps : (k0+q)*p.ps+6*tiles]
				for t := range tiles {
					d := strips[t*kc*6+q*6 : t*kc*6+q*6+6 : t*kc*6+q*6+6]
					s := row[t*6 : t*6+6 : t*6+6]
					d[0], d[1], d[2], d[3], d[4], d[5] = s[0], s[1], s[2], s[3], s[4], s[5]
				}
			}
		}
		// tile runs rows [i, i+rows) of panel j from a: directly on the
		// output when the tile is whole, else through the scratch tile.
		tile := func(i, rows, j int, a *float32, astride, astep uintptr) {
			c := lo + 16*j
			width := min(16, hi-c)
			if width == 16 {
				out := &p.out[i*p.n+c]
				init, istride := out, uintptr(p.n)*4
				if k0 == 0 && !p.accumulate {
					init, istride = &zeros[0], 0
					if p.bias != nil {
						init = &p.bias[c]
					}
				}
				tileRows(rows, kc, a, astride, astep, panelAt(j), 64, init, istride, out, uintptr(p.n)*4)
				return
			}
			for r := range rows {
				switch {
				case k0 > 0 || p.accumulate:
					copy(scratch[r][:width], p.out[(i+r)*p.n+c:])
				case p.bias != nil:
					copy(scratch[r][:width], p.bias[c:c+width])
				default:
					scratch[r] = [16]float32{}
				}
			}
			tile6x16(kc, a, astride, astep, panelAt(j), 64, &scratch[0][0], 64, &scratch[0][0], 64)
			for r := range rows {
				copy(p.out[(i+r)*p.n+c:(i+r)*p.n+c+width], scratch[r][:width])
			}
		}
		for t := range tiles {
			i := 6 * t
			_ = p.a[(i+5)*p.rs+(k0+kc-1)*p.ps]
			a, astride, astep := &p.a[i*p.rs+k0*p.ps], uintptr(p.rs)*4, uintptr(p.ps)*4
			if p.rs == 1 {
				a, astride, astep = &strips[t*kc*6], 4, 24
			}
			for j := range panels {
				tile(i, 6, j, a, astride, astep)
			}
		}
		if rest := p.m - 6*tiles; rest > 0 {
			// The last rows: straight from a on a tile of their count, or
			// from a zero-padded strip (a transposed, or the scratch tile
			// of a partial panel).
			i := 6 * tiles
			_ = p.a[(i+rest-1)*p.rs+(k0+kc-1)*p.ps]
			stripped := false
			for j := 0; j < panels; j++ {
				if g := 4 / rest; rest <= 2 && p.rs != 1 && hi-(lo+16*j) >= 16*g {
					// One or two rows: g panels at once, for independent sums.
					c := lo + 16*j
					out := &p.out[i*p.n+c]
					init, istride := out, uintptr(p.n)*4
					if k0 == 0 && !p.accumulate {
						init, istride = &zeros[0], 0
						if p.bias != nil {
							init = &p.bias[c]
						}
					}
					_ = p.out[(i+rest-1)*p.n+c+16*g-1]
					a := &p.a[i*p.rs+k0*p.ps]
					if rest == 1 {
						tile1x64(kc, a, 0, uintptr(p.ps)*4, panelAt(j), 64, pstride, init, istride, out, uintptr(p.n)*4)
					} else {
						tile2x32(kc, a, uintptr(p.rs)*4, uintptr(p.ps)*4, panelAt(j), 64, pstride, init, istride, out, uintptr(p.n)*4)
					}
					j += g - 1
					continue
				}
				if p.rs != 1 && hi-(lo+16*j) >= 16 {
					tile(i, rest, j, &p.a[i*p.rs+k0*p.ps], uintptr(p.rs)*4, uintptr(p.ps)*4)
					continue
				}
				if !stripped {
					clear(strip[:kc*6])
					for q := range kc {
						for r := range rest {
							strip[q*6+r] = p.a[(i+r)*p.rs+(k0+q)*p.ps]
						}
					}
					stripped = true
				}
				tile(i, rest, j, &strip[0], 4, 24)
			}
		}
	}
}

// tile6x16 is the assembly micro-kernel (tile_amd64.s): six output rows
// (ostride bytes apart) of 16 columns are their initial values (rows
// istride bytes apart from init) plus six rows of a (xstride bytes apart;
// consecutive p xstep bytes apart) times a 16-column panel of w (rows
// wstride bytes apart) over k steps.
//
//go:noescape
func tile6x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr,
	init *float32, istride uintptr, out *float32, ostride uintptr)

// tileRows is tile6x16 for the first rows (1…6) of the tile.
func tileRows(rows, k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr,
	init *float32, istride uintptr, out *float32, ostride uintptr) {
	switch rows {
	case 1:
		tile1x16(k, x, xstride, xstep, w, wstride, init, istride, out, ostride)
	case 2:
		tile2x16(k, x, xstride, xstep, w, wstride, init, istride, out, ostride)
	case 3:
		tile3x16(k, x, xstride, xstep, w, wstride, init, istride, out, ostride)
	case 4:
		tile4x16(k, x, xstride, xstep, w, wstride, init, istride, out, ostride)
	case 5:
		tile5x16(k, x, xstride, xstep, w, wstride, init, istride, out, ostride)
	default:
		tile6x16(k, x, xstride, xstep, w, wstride, init, istride, out, ostride)
	}
}

// tile1x64 and tile2x32 are the tiles of one and two rows over four and
// two 16-column panels, pstride bytes apart (tile_amd64.s).
//
//go:noescape
func tile1x64(k int, x *float32, xstride, xstep uintptr, w *float32, wstride, pstride uintptr, init *float32, istride uintptr, out *float32, ostride uintptr)

//go:noescape
func tile2x32(k int, x *float32, xstride, xstep uintptr, w *float32, wstride, pstride uintptr, init *float32, istride uintptr, out *float32, ostride uintptr)

// tile1x16 … tile5x16 are tile6x16 for fewer rows (tile_amd64.s).
//
//go:noescape
func tile1x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr, init *float32, istride uintptr, out *float32, ostride uintptr)

//go:noescape
func tile2x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr, init *float32, istride uintptr, out *float32, ostride uintptr)

//go:noescape
func tile3x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr, init *float32, istride uintptr, out *float32, ostride uintptr)

//go:noescape
func tile4x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr, init *float32, istride uintptr, out *float32, ostride uintptr)

//go:noescape
func tile5x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr, init *float32, istride uintptr, out *float32, ostride uintptr)

// tile6x16Rows is tile6x16 for narrowBT (tile_amd64.s): six rows of x,
// each k contiguous floats (xstep 4 bytes), xstride bytes apart and read
// with prefetching; w a [k,16] panel (wstride 64 bytes); out six rows of 16
// floats, 64 bytes apart.
//
//go:noescape
func tile6x16Rows(k int, x *float32, xstride uintptr, w *float32, init *float32, istride uintptr, out *float32)

// transpose16 is the assembly transpose (tile_amd64.s): dst[q·16+c] =
// w[c·wstride bytes + q] for the 16 rows c of w and q < k, k a multiple of
// 8.
//
//go:noescape
func transpose16(k int, w *float32, wstride uintptr, dst *float32)

// row computes columns [c, c+width) (width ≤ 16) of output row i.
func (p product) row(i, c, width int) {
	h := min(8, width)
	o := p.out[i*p.n+c : i*p.n+c+width]
	var c0, c1 archsimd.Float32x8
	switch {
	case p.accumulate:
		c0, c1 = load8(o[:h]), load8(o[h:])
	case p.bias != nil:
		c0, c1 = load8(p.bias[c:c+h]), load8(p.bias[c+h:c+width])
	}
	at := i * p.rs
	for q := range p.k {
		wq := p.w[q*p.n+c : q*p.n+c+width]
		a := archsimd.BroadcastFloat32x8(p.a[at])
		c0, c1 = a.MulAdd(load8(wq[:h]), c0), a.MulAdd(load8(wq[h:]), c1)
		at += p.ps
	}
	store2(o, c0, c1)
}

// store2 stores the first len(s) of the 16 lanes of (v0, v1) into s.
func store2(s []float32, v0, v1 archsimd.Float32x8) {
	if len(s) == 16 {
		v0.StoreSlice(s)
		v1.StoreSlice(s[8:])
		return
	}
	h := min(8, len(s))
	store8(v0, s[:h])
	store8(v1, s[h:])
}

func axpyAVX2(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	av := archsimd.BroadcastFloat32x8(a)
	i := 0
	for ; i+8 <= len(y); i += 8 {
		av.MulAdd(archsimd.LoadFloat32x8Slice(x[i:]), archsimd.LoadFloat32x8Slice(y[i:])).StoreSlice(y[i:])
	}
	if i < len(y) {
		store8(av.MulAdd(load8(x[i:]), load8(y[i:])), y[i:])
	}
	archsimd.ClearAVXUpperBits()
}

func addAVX2(y, x []float32) {
	x = x[:len(y)]
	i := 0
	for ; i+32 <= len(y); i += 32 {
		archsimd.LoadFloat32x8Slice(y[i:]).Add(archsimd.LoadFloat32x8Slice(x[i:])).StoreSlice(y[i:])
		archsimd.LoadFloat32x8Slice(y[i+8:]).Add(archsimd.LoadFloat32x8Slice(x[i+8:])).StoreSlice(y[i+8:])
		archsimd.LoadFloat32x8Slice(y[i+16:]).Add(archsimd.LoadFloat32x8Slice(x[i+16:])).StoreSlice(y[i+16:])
		archsimd.LoadFloat32x8Slice(y[i+24:]).Add(archsimd.LoadFloat32x8Slice(x[i+24:])).StoreSlice(y[i+24:])
	}
	for ; i < len(y); i += 8 {
		store8(load8(y[i:]).Add(load8(x[i:])), y[i:])
	}
	archsimd.ClearAVXUpperBits()
}

func dotAVX2(a, b []float32) float32 {
	b = b[:len(a)]
	var s archsimd.Float32x8
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s = archsimd.LoadFloat32x8Slice(a[i:]).MulAdd(archsimd.LoadFloat32x8Slice(b[i:]), s)
	}
	if i < len(a) {
		s = load8(a[i:]).MulAdd(load8(b[i:]), s)
	}
	r := hsum(s)
	archsimd.ClearAVXUpperBits()
	return r
}

// Constants of exp: e^x = 2^n·e^r with n = round(x/ln2) and r = x − n·ln2,
// ln2 split in two so that n·ln2Hi is exact.
const (
	log2e  = 1.44269504088896341
	ln2Hi  = 0.693359375
	ln2Lo  = -2.12194440e-4
	expMax = 88.0
	expMin = -87.0
)

// expConst holds expMax, expMin, log2e, −ln2Hi and −ln2Lo, and expTaylor
// the Taylor coefficients 1/7!, …, 1/1!, 1, broadcast (set by init).
var (
	expConst  [5]archsimd.Float32x8
	expTaylor [8]archsimd.Float32x8
)

// exp8 is e^x lane by lane: the range reduction above, e^r by its Taylor
// series to r⁷/7! (|r| ≤ ln2/2: within an ulp or two), and 2^n built in
// the exponent bits.
func exp8(x archsimd.Float32x8) archsimd.Float32x8 {
	x = x.Min(expConst[0]).Max(expConst[1])
	n := x.Mul(expConst[2]).RoundToEven()
	r := n.MulAdd(expConst[3], x)
	r = n.MulAdd(expConst[4], r)
	p := expTaylor[0]
	for _, c := range expTaylor[1:] {
		p = p.MulAdd(r, c)
	}
	scale := n.ConvertToInt32().Add(archsimd.BroadcastInt32x8(127)).ShiftAllLeft(23).AsFloat32x8()
	return p.Mul(scale)
}

func expShiftAVX2(x []float32, shift float32) float32 {
	total := expShiftVec(x, shift)
	archsimd.ClearAVXUpperBits()
	return total
}

// expShiftVec sets x to exp(x − shift) and returns the sum, without the
// closing VZEROUPPER (for callers that go on with vector code).
func expShiftVec(x []float32, shift float32) float32 {
	s := archsimd.BroadcastFloat32x8(shift)
	var sum archsimd.Float32x8
	i := 0
	for ; i+8 <= len(x); i += 8 {
		e := exp8(archsimd.LoadFloat32x8Slice(x[i:]).Sub(s))
		e.StoreSlice(x[i:])
		sum = sum.Add(e)
	}
	total := hsum(sum)
	if i < len(x) {
		e := exp8(load8(x[i:]).Sub(s))
		store8(e, x[i:])
		var lanes [8]float32
		e.Store(&lanes)
		for j := range len(x) - i {
			total += lanes[j]
		}
	}
	return total
}

// erfVectors are erfSeries's coefficients broadcast to all lanes (set by
// init where the CPU has AVX2).
var erfVectors []archsimd.Float32x8

// erf8 is erf lane by lane (see erfSeries).
func erf8(z archsimd.Float32x8) archsimd.Float32x8 {
	t := z.Min(archsimd.BroadcastFloat32x8(erfRange)).Max(archsimd.BroadcastFloat32x8(-erfRange)).
		Mul(archsimd.BroadcastFloat32x8(1.0 / erfRange))
	u := t.Mul(t).Mul(archsimd.BroadcastFloat32x8(2)).Sub(archsimd.BroadcastFloat32x8(1))
	u2 := u.Add(u)
	var b1, b2 archsimd.Float32x8
	for k := len(erfVectors) - 1; k >= 1; k-- {
		b1, b2 = u2.MulAdd(b1, erfVectors[k].Sub(b2)), b1
	}
	return t.Mul(u.MulAdd(b1, erfVectors[0].Sub(b2)))
}

func geluAVX2(out, cdf, x []float32) {
	x = x[:len(out)]
	half, one, invSqrt2 := archsimd.BroadcastFloat32x8(0.5), archsimd.BroadcastFloat32x8(1), archsimd.BroadcastFloat32x8(1/math.Sqrt2)
	i := 0
	for ; i+8 <= len(out); i += 8 {
		v := archsimd.LoadFloat32x8Slice(x[i:])
		c := erf8(v.Mul(invSqrt2)).Add(one).Mul(half)
		v.Mul(c).StoreSlice(out[i:])
		if cdf != nil {
			c.StoreSlice(cdf[i:])
		}
	}
	if i < len(out) {
		v := load8(x[i:])
		c := erf8(v.Mul(invSqrt2)).Add(one).Mul(half)
		store8(v.Mul(c), out[i:])
		if cdf != nil {
			store8(c, cdf[i:])
		}
	}
	archsimd.ClearAVXUpperBits()
}

func siluMulAVX2(out, gate, up []float32) {
	gate, up = gate[:len(out)], up[:len(out)]
	one := archsimd.BroadcastFloat32x8(1)
	silu := func(g, u archsimd.Float32x8) archsimd.Float32x8 {
		var zero archsimd.Float32x8
		return g.Mul(u).Div(exp8(zero.Sub(g)).Add(one))
	}
	i := 0
	for ; i+8 <= len(out); i += 8 {
		silu(archsimd.LoadFloat32x8Slice(gate[i:]), archsimd.LoadFloat32x8Slice(up[i:])).StoreSlice(out[i:])
	}
	if i < len(out) {
		store8(silu(load8(gate[i:]), load8(up[i:])), out[i:])
	}
	archsimd.ClearAVXUpperBits()
}

func scoresAVX2(s, q, keys []float32, stride int) {
	j := 0
	for ; j+32 <= len(s); j += 32 { // four independent chains of 8 slots
		var a0, a1, a2, a3 archsimd.Float32x8
		for d, qd := range q {
			k := keys[d*stride+j : d*stride+j+32]
			b := archsimd.BroadcastFloat32x8(qd)
			a0 = b.MulAdd(archsimd.LoadFloat32x8Slice(k), a0)
			a1 = b.MulAdd(archsimd.LoadFloat32x8Slice(k[8:]), a1)
			a2 = b.MulAdd(archsimd.LoadFloat32x8Slice(k[16:]), a2)
			a3 = b.MulAdd(archsimd.LoadFloat32x8Slice(k[24:]), a3)
		}
		a0.StoreSlice(s[j:])
		a1.StoreSlice(s[j+8:])
		a2.StoreSlice(s[j+16:])
		a3.StoreSlice(s[j+24:])
	}
	for ; j < len(s); j += 8 {
		w := min(8, len(s)-j)
		var a archsimd.Float32x8
		for d, qd := range q {
			a = archsimd.BroadcastFloat32x8(qd).MulAdd(load8(keys[d*stride+j:d*stride+j+w]), a)
		}
		store8(a, s[j:j+w])
	}
	archsimd.ClearAVXUpperBits()
}

func weightedSumAVX2(o, p, values []float32) {
	dh := len(o)
	switch dh {
	case 32:
		var a0, a1, a2, a3 archsimd.Float32x8
		for j, pj := range p {
			v := values[j*32 : j*32+32 : j*32+32]
			b := archsimd.BroadcastFloat32x8(pj)
			a0 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(v[0:8])), a0)
			a1 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(v[8:16])), a1)
			a2 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(v[16:24])), a2)
			a3 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(v[24:32])), a3)
		}
		a0.StoreSlice(o)
		a1.StoreSlice(o[8:])
		a2.StoreSlice(o[16:])
		a3.StoreSlice(o[24:])
	case 64:
		var a0, a1, a2, a3, a4, a5, a6, a7 archsimd.Float32x8
		for j, pj := range p {
			v := values[j*64 : j*64+64 : j*64+64]
			b := archsimd.BroadcastFloat32x8(pj)
			a0 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(v[0:8])), a0)
			a1 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(v[8:16])), a1)
			a2 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(v[16:24])), a2)
			a3 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(v[24:32])), a3)
			a4 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(v[32:40])), a4)
			a5 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(v[40:48])), a5)
			a6 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(v[48:56])), a6)
			a7 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(v[56:64])), a7)
		}
		a0.StoreSlice(o)
		a1.StoreSlice(o[8:])
		a2.StoreSlice(o[16:])
		a3.StoreSlice(o[24:])
		a4.StoreSlice(o[32:])
		a5.StoreSlice(o[40:])
		a6.StoreSlice(o[48:])
		a7.StoreSlice(o[56:])
	default:
		clear(o)
		for j, pj := range p {
			axpyAVX2(o, pj, values[j*dh:])
		}
	}
	archsimd.ClearAVXUpperBits()
}

func geluBackwardAVX2(dx, dy, x, cdf []float32) {
	dy, x, cdf = dy[:len(dx)], x[:len(dx)], cdf[:len(dx)]
	negHalf, invSqrt2Pi := archsimd.BroadcastFloat32x8(-0.5), archsimd.BroadcastFloat32x8(float32(1/math.Sqrt(2*math.Pi)))
	slope := func(v, c archsimd.Float32x8) archsimd.Float32x8 {
		pdf := exp8(v.Mul(v).Mul(negHalf)).Mul(invSqrt2Pi)
		return v.MulAdd(pdf, c)
	}
	i := 0
	for ; i+8 <= len(dx); i += 8 {
		slope(archsimd.LoadFloat32x8Slice(x[i:]), archsimd.LoadFloat32x8Slice(cdf[i:])).Mul(archsimd.LoadFloat32x8Slice(dy[i:])).StoreSlice(dx[i:])
	}
	if i < len(dx) {
		store8(slope(load8(x[i:]), load8(cdf[i:])).Mul(load8(dy[i:])), dx[i:])
	}
	archsimd.ClearAVXUpperBits()
}

func siluMulBackwardAVX2(dGate, dUp, dOut, gate, up []float32) {
	n := len(dOut)
	dGate, dUp, gate, up = dGate[:n], dUp[:n], gate[:n], up[:n]
	one := archsimd.BroadcastFloat32x8(1)
	var zero archsimd.Float32x8
	grads := func(d, g, u archsimd.Float32x8) (dg, du archsimd.Float32x8) {
		sig := one.Div(exp8(zero.Sub(g)).Add(one))
		ds := d.Mul(sig)
		return ds.Mul(u).Mul(g.MulAdd(one.Sub(sig), one)), ds.Mul(g)
	}
	i := 0
	for ; i+8 <= n; i += 8 {
		dg, du := grads(archsimd.LoadFloat32x8Slice(dOut[i:]), archsimd.LoadFloat32x8Slice(gate[i:]), archsimd.LoadFloat32x8Slice(up[i:]))
		dg.StoreSlice(dGate[i:])
		du.StoreSlice(dUp[i:])
	}
	if i < n {
		dg, du := grads(load8(dOut[i:]), load8(gate[i:]), load8(up[i:]))
		store8(dg, dGate[i:])
		store8(du, dUp[i:])
	}
	archsimd.ClearAVXUpperBits()
}

// hsum adds the lanes of v in a fixed order.
func hsum(v archsimd.Float32x8) float32 {
	var l [8]float32
	v.Store(&l)
	return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]))
}

func sumAVX2(x []float32) float32 {
	var s archsimd.Float32x8
	i := 0
	for ; i+8 <= len(x); i += 8 {
		s = s.Add(archsimd.LoadFloat32x8Slice(x[i:]))
	}
	if i < len(x) {
		s = s.Add(load8(x[i:]))
	}
	r := hsum(s)
	archsimd.ClearAVXUpperBits()
	return r
}

func normSquaresAVX2(xhat, x []float32, mean float32) float32 {
	x = x[:len(xhat)]
	m := archsimd.BroadcastFloat32x8(mean)
	var s archsimd.Float32x8
	i := 0
	for ; i+8 <= len(x); i += 8 {
		c := archsimd.LoadFloat32x8Slice(x[i:]).Sub(m)
		c.StoreSlice(xhat[i:])
		s = c.MulAdd(c, s)
	}
	if i < len(x) {
		c := load8(x[i:]).Sub(m)
		store8(c, xhat[i:])
		var l [8]float32
		c.Store(&l)
		for j := len(x) - i; j < 8; j++ {
			l[j] = 0 // lanes past the end held −mean
		}
		c = archsimd.LoadFloat32x8(&l)
		s = c.MulAdd(c, s)
	}
	r := hsum(s)
	archsimd.ClearAVXUpperBits()
	return r
}

func normScaleAVX2(out, xhat, w, b []float32, rstd float32) {
	r := archsimd.BroadcastFloat32x8(rstd)
	n := len(xhat)
	for i := 0; i < n; i += 8 {
		xh := load8(xhat[i:n]).Mul(r)
		store8(xh, xhat[i:n])
		y := xh.Mul(load8(w[i:n]))
		if b != nil {
			y = y.Add(load8(b[i:n]))
		}
		store8(y, out[i:n])
	}
	archsimd.ClearAVXUpperBits()
}

func normBackwardAVX2(dx, g, xhat []float32, mean, dot, rstd float32) {
	m, dt, r := archsimd.BroadcastFloat32x8(mean), archsimd.BroadcastFloat32x8(dot), archsimd.BroadcastFloat32x8(rstd)
	n := len(dx)
	for i := 0; i < n; i += 8 {
		gi := load8(g[i:n]).Sub(m).Sub(load8(xhat[i:n]).Mul(dt))
		store8(gi.MulAdd(r, load8(dx[i:n])), dx[i:n])
	}
	archsimd.ClearAVXUpperBits()
}

func mulAddAVX2(y, a, b []float32) {
	n := len(y)
	a, b = a[:n], b[:n]
	for i := 0; i < n; i += 8 {
		store8(load8(a[i:]).MulAdd(load8(b[i:]), load8(y[i:])), y[i:])
	}
	archsimd.ClearAVXUpperBits()
}

func adamWAVX2(p, g, m, v []float32, s AdamWStep) {
	b := archsimd.BroadcastFloat32x8
	st := adamVectors{scale: b(s.Scale), b1: b(s.Beta1), c1: b(1 - s.Beta1), b2: b(s.Beta2), c2: b(1 - s.Beta2),
		bc1: b(s.Correction1), bc2: b(s.Correction2), eps: b(s.Eps), lr: b(s.LR), decay: b(s.Decay * s.LR)}
	n := len(p)
	i := 0
	for ; i+8 <= n; i += 8 { // whole vectors: plain loads, much faster than masked ones
		pj, mj, vj := st.step(archsimd.LoadFloat32x8Slice(p[i:]), archsimd.LoadFloat32x8Slice(g[i:]),
			archsimd.LoadFloat32x8Slice(m[i:]), archsimd.LoadFloat32x8Slice(v[i:]))
		mj.StoreSlice(m[i:])
		vj.StoreSlice(v[i:])
		pj.StoreSlice(p[i:])
	}
	if i < n {
		pj, mj, vj := st.step(load8(p[i:n]), load8(g[i:n]), load8(m[i:n]), load8(v[i:n]))
		store8(mj, m[i:n])
		store8(vj, v[i:n])
		store8(pj, p[i:n])
	}
	archsimd.ClearAVXUpperBits()
}

// adamVectors are an AdamWStep's scalars broadcast to all lanes.
type adamVectors struct {
	scale, b1, c1, b2, c2, bc1, bc2, eps, lr, decay archsimd.Float32x8
}

// step is AdamW on eight parameters: it returns the new p, m and v.
func (s *adamVectors) step(p, g, m, v archsimd.Float32x8) (archsimd.Float32x8, archsimd.Float32x8, archsimd.Float32x8) {
	gj := g.Mul(s.scale)
	m = m.Mul(s.b1).Add(gj.Mul(s.c1))
	v = v.Mul(s.b2).Add(gj.Mul(gj).Mul(s.c2))
	update := m.Div(s.bc1).Div(v.Div(s.bc2).Sqrt().Add(s.eps))
	p = p.Sub(p.Mul(s.decay)).Sub(update.Mul(s.lr))
	return p, m, v
}

func maxAVX2(x []float32) float32 {
	top := maxVec(x)
	archsimd.ClearAVXUpperBits()
	return top
}

// maxVec is the largest element of a non-empty x, without the closing
// VZEROUPPER.
func maxVec(x []float32) float32 {
	n := len(x)
	if n < 8 {
		top := x[0]
		for _, v := range x[1:] {
			top = max(top, v)
		}
		return top
	}
	m := archsimd.LoadFloat32x8Slice(x)
	for i := 8; i < n; i += 8 { // the last 8 overlapping: max does not mind
		m = m.Max(archsimd.LoadFloat32x8Slice(x[min(i, n-8):]))
	}
	var l [8]float32
	m.Store(&l)
	return max(max(max(l[0], l[1]), max(l[2], l[3])), max(max(l[4], l[5]), max(l[6], l[7])))
}

func scaleAVX2(x []float32, a float32) {
	scaleVec(x, a)
	archsimd.ClearAVXUpperBits()
}

// scaleVec multiplies x by a, without the closing VZEROUPPER.
func scaleVec(x []float32, a float32) {
	av := archsimd.BroadcastFloat32x8(a)
	n := len(x)
	for i := 0; i < n; i += 8 {
		store8(load8(x[i:n]).Mul(av), x[i:n])
	}
}

// causalSoftmaxAVX2 is CausalSoftmax in one call: each row is Softmax's
// maximum, exponentials and scaling, with one VZEROUPPER at the end.
func causalSoftmaxAVX2(p []float32, T int) {
	for t := range T {
		row := p[t*T : (t+1)*T]
		x := row[:t+1]
		scaleVec(x, 1/expShiftVec(x, maxVec(x)))
		clear(row[t+1:])
	}
	archsimd.ClearAVXUpperBits()
}
