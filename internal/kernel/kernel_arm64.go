//go:build arm64

package kernel

import "sync"

// The NEON path: the matrix products, Axpy, Add and Dot on 4-wide float32
// vectors with fused multiply-adds (tile_arm64.s); the other kernels keep
// their portable loops. NEON (Advanced SIMD) is part of every ARMv8-A CPU,
// so the path runs wherever arm64 code does.
var _ = registerPath(path{
	name:    "neon",
	runs:    true,
	needs:   "NEON",
	install: installNEON,
})

// installNEON sets the kernel function variables to the NEON functions.
func installNEON() {
	simdProduct, simdAxpy, simdAdd, simdDot = productNEON, axpyNEON, addNEON, dotNEON
}

// neonKBlock is the depth of one pass over a product's k: a pass's weight
// panels for a chunk of neonCols columns (128 KiB) stay in the level-2
// cache of any arm64 core while the row tiles sweep them.
const (
	neonKBlock = 256
	neonCols   = 128
)

// neonBuffers recycles the packed weight panels.
var neonBuffers = sync.Pool{New: func() any { return new([]float32) }}

// productNEON computes output columns [lo,hi) of a product, chunk by chunk
// of neonCols columns, each in passes over blocks of neonKBlock steps of
// k. A pass reads the weights of each 16-column panel from w's rows in
// place (a product of fewer than packMinRows rows with w [k,n]), from
// Pack's panels, or from panels it copies them into (w [n,k] transposed
// four steps of 16 rows at a time in registers, tall products, a last
// panel narrower than 16, zero-padded); six rows of x at
// a time run on tile6x16, the m mod 6 rows past them one at a time on
// tile1x64 and tile1x16. Each output element is its initial value plus
// one fused multiply-add per step in k order, its partial sum passing
// through memory between passes, so the split of a product between
// goroutines changes no bit of it.
func productNEON(p product, lo, hi int) {
	if p.k == 0 {
		for i := range p.m {
			row := p.out[i*p.n+lo : i*p.n+hi]
			switch {
			case p.accumulate:
			case p.bias != nil:
				copy(row, p.bias[lo:hi])
			default:
				clear(row)
			}
		}
		return
	}
	bufp := neonBuffers.Get().(*[]float32)
	defer neonBuffers.Put(bufp)
	for c := lo; c < hi; c += neonCols {
		p.neonCols(c, min(hi, c+neonCols), bufp)
	}
}

// neonCols computes output columns [lo,hi) (at most neonCols) of a
// product with k > 0, packing into *bufp (see productNEON).
func (p product) neonCols(lo, hi int, bufp *[]float32) {
	panels := (hi - lo + 15) / 16
	inPlace := p.pw == nil && !p.wt && p.m < packMinRows
	if need := neonKBlock * 16 * panels; p.pw == nil && cap(*bufp) < need {
		*bufp = make([]float32, need)
	}
	buf := *bufp
	var zeros [64]float32
	var scratch [6][16]float32
	for k0 := 0; k0 < p.k; k0 += neonKBlock {
		kc := min(neonKBlock, p.k-k0)
		// Panel j of the pass: its first step's 16 weights at at[j], the
		// next step's stride[j] bytes further; the panels of full width are
		// pstride bytes apart.
		var at [neonCols / 16]*float32
		var stride [neonCols / 16]uintptr
		pstride := uintptr(neonKBlock * 16 * 4)
		switch {
		case p.pw != nil:
			pstride = uintptr(16*p.k) * 4
		case inPlace:
			pstride = 64
		}
		for j := range panels {
			c := lo + 16*j
			width := min(16, hi-c)
			switch {
			case p.pw != nil:
				at[j], stride[j] = &p.pw[(c/16)*16*p.k+16*k0], 64
				continue
			case inPlace && width == 16:
				_ = p.w[(k0+kc-1)*p.n+c+15]
				at[j], stride[j] = &p.w[k0*p.n+c], uintptr(p.n)*4
				continue
			}
			panel := buf[j*neonKBlock*16 : j*neonKBlock*16+kc*16]
			p.packPanel(panel, c, width, k0, kc)
			at[j], stride[j] = &panel[0], 64
		}
		// first is whether the pass starts from the initial values (zero or
		// bias) rather than from out.
		first := k0 == 0 && !p.accumulate
		// init is where the initial values of row i, columns c… come from,
		// and how far apart the rows of the tile are (0: the same row).
		init := func(i, c int) (*float32, uintptr) {
			switch {
			case !first:
				return &p.out[i*p.n+c], uintptr(p.n) * 4
			case p.bias != nil:
				_ = p.bias[c+15]
				return &p.bias[c], 0
			}
			return &zeros[0], 0
		}
		// fill sets the first width columns of the scratch rows to the
		// initial values of rows i… at column c, the rest to zero.
		fill := func(rows, i, c, width int) {
			for r := range rows {
				s := scratch[r][:]
				clear(s)
				switch {
				case !first:
					copy(s[:width], p.out[(i+r)*p.n+c:])
				case p.bias != nil:
					copy(s[:width], p.bias[c:c+width])
				}
			}
		}
		i := 0
		for ; i+6 <= p.m; i += 6 {
			_ = p.a[(i+5)*p.rs+(k0+kc-1)*p.ps]
			x, xstride, xstep := &p.a[i*p.rs+k0*p.ps], uintptr(p.rs)*4, uintptr(p.ps)*4
			for j := range panels {
				c := lo + 16*j
				if width := hi - c; width < 16 {
					fill(6, i, c, width)
					tile6x16(kc, x, xstride, xstep, at[j], stride[j], &scratch[0][0], 64, &scratch[0][0], 64)
					for r := range 6 {
						copy(p.out[(i+r)*p.n+c:(i+r)*p.n+hi], scratch[r][:width])
					}
					continue
				}
				_ = p.out[(i+5)*p.n+c+15]
				from, istride := init(i, c)
				tile6x16(kc, x, xstride, xstep, at[j], stride[j], from, istride, &p.out[i*p.n+c], uintptr(p.n)*4)
			}
		}
		for ; i < p.m; i++ {
			_ = p.a[i*p.rs+(k0+kc-1)*p.ps]
			x, xstep := &p.a[i*p.rs+k0*p.ps], uintptr(p.ps)*4
			for j := 0; j < panels; j++ {
				c := lo + 16*j
				if hi-c >= 64 {
					// Four full panels at once, for sixteen independent sums;
					// init must be 64 contiguous floats.
					from := &zeros[0]
					switch {
					case !first:
						from = &p.out[i*p.n+c]
					case p.bias != nil:
						_ = p.bias[c+63]
						from = &p.bias[c]
					}
					_ = p.out[i*p.n+c+63]
					tile1x64(kc, x, xstep, at[j], stride[j], pstride, from, &p.out[i*p.n+c])
					j += 3
					continue
				}
				if width := hi - c; width < 16 {
					fill(1, i, c, width)
					tile1x16(kc, x, xstep, at[j], stride[j], &scratch[0][0], &scratch[0][0])
					copy(p.out[i*p.n+c:i*p.n+hi], scratch[0][:width])
					continue
				}
				from, _ := init(i, c)
				_ = p.out[i*p.n+c+15]
				tile1x16(kc, x, xstep, at[j], stride[j], from, &p.out[i*p.n+c])
			}
		}
	}
}

// tile6x16 is the 6×16 micro-kernel (tile_arm64.s): six output rows
// (ostride bytes apart) of 16 columns are their initial values (rows
// istride bytes apart from init) plus six rows of x (xstride bytes apart;
// consecutive steps xstep bytes apart) times a 16-column panel of w (steps
// wstride bytes apart) over k ≥ 0 steps.
//
//go:noescape
func tile6x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr,
	init *float32, istride uintptr, out *float32, ostride uintptr)

// tile1x64 is one row over four 16-column panels, pstride bytes apart
// (tile_arm64.s); init and out are 64 contiguous floats.
//
//go:noescape
func tile1x64(k int, x *float32, xstep uintptr, w *float32, wstride, pstride uintptr, init *float32, out *float32)

// tile1x16 is one row over one panel (tile_arm64.s); init and out are 16
// contiguous floats.
//
//go:noescape
func tile1x16(k int, x *float32, xstep uintptr, w *float32, wstride uintptr, init *float32, out *float32)

// transposeSteps is how many steps of weights transpose16 transposes at a
// time: four, the 4×4 blocks of its 128-bit registers.
const transposeSteps = 4

// transpose16 sets dst[q·16+c] = w[c·wstride bytes + q] for the 16 rows c
// of w and q < k, k a multiple of 4 (tile_arm64.s).
//
//go:noescape
func transpose16(k int, w *float32, wstride uintptr, dst *float32)

// axpy4 adds a·x to y over n elements, n a multiple of 16 (tile_arm64.s).
//
//go:noescape
func axpy4(n int, y *float32, a float32, x *float32)

// add16 adds x to y over n elements, n a multiple of 16 (tile_arm64.s).
//
//go:noescape
func add16(n int, y, x *float32)

// dot16 sets acc to the partial sums of a·b over n elements, n a multiple
// of 16: acc[l] sums the products of the elements i ≡ l (mod 16)
// (tile_arm64.s).
//
//go:noescape
func dot16(n int, a, b *float32, acc *[16]float32)

func axpyNEON(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	n := len(y) / 16 * 16
	if n > 0 {
		axpy4(n, &y[0], a, &x[0])
	}
	for i := n; i < len(y); i++ {
		y[i] += a * x[i]
	}
}

func addNEON(y, x []float32) {
	x = x[:len(y)]
	n := len(y) / 16 * 16
	if n > 0 {
		add16(n, &y[0], &x[0])
	}
	for i := n; i < len(y); i++ {
		y[i] += x[i]
	}
}

func dotNEON(a, b []float32) float32 {
	b = b[:len(a)]
	n := len(a) / 16 * 16
	var acc [16]float32
	if n > 0 {
		dot16(n, &a[0], &b[0], &acc)
	}
	// The sixteen partial sums pairwise, in a fixed order, then the tail.
	for w := 8; w >= 1; w /= 2 {
		for l := range w {
			acc[l] += acc[l+w]
		}
	}
	s := acc[0]
	for i := n; i < len(a); i++ {
		s += a[i] * b[i]
	}
	return s
}
