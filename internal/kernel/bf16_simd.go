//go:build amd64 && goexperiment.simd

package kernel

import (
	"simd/archsimd"
	"unsafe"
)

func widenAVX2(dst []float32, src []uint16) {
	widenVec(dst, src)
	archsimd.ClearAVXUpperBits()
}

// widenVec widens eight bfloat16 values at a time — zero-extended to 32
// bits and shifted into the top half — and the last len mod 8 with integer
// stores (no legacy SSE among the vector code), without the closing
// VZEROUPPER.
func widenVec(dst []float32, src []uint16) {
	n := len(src)
	dst = dst[:n]
	i := 0
	for ; i+32 <= n; i += 32 {
		a := archsimd.LoadUint16x8Slice(src[i:]).ExtendToUint32().ShiftAllLeft(16)
		b := archsimd.LoadUint16x8Slice(src[i+8:]).ExtendToUint32().ShiftAllLeft(16)
		c := archsimd.LoadUint16x8Slice(src[i+16:]).ExtendToUint32().ShiftAllLeft(16)
		d := archsimd.LoadUint16x8Slice(src[i+24:]).ExtendToUint32().ShiftAllLeft(16)
		a.AsFloat32x8().StoreSlice(dst[i:])
		b.AsFloat32x8().StoreSlice(dst[i+8:])
		c.AsFloat32x8().StoreSlice(dst[i+16:])
		d.AsFloat32x8().StoreSlice(dst[i+24:])
	}
	for ; i+8 <= n; i += 8 {
		archsimd.LoadUint16x8Slice(src[i:]).ExtendToUint32().ShiftAllLeft(16).AsFloat32x8().StoreSlice(dst[i:])
	}
	if i < n {
		bits := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[i])), n-i)
		for j, h := range src[i:] {
			bits[j] = uint32(h) << 16
		}
	}
}

// bf16ColsAVX2 computes output columns [lo,hi) of a product x·wᵀ of fewer
// than bf16TallRows rows with bfloat16 w: 12–16 rows (a decoding batch) as
// narrowBT does, widening six weight rows at a time; fewer in blocks of 64
// weight rows, widened and transposed 64 steps at a time into panels, as
// the packed path does; columns past the last whole block of 64 through a
// widened piece. Each output element gets its initial value plus its
// multiply-adds in k order, so the bits are those of every other path.
func bf16ColsAVX2(p bf16Product, lo, hi int) {
	defer archsimd.ClearAVXUpperBits()
	if p.m >= narrowMinRows && p.m <= 16 {
		p.narrowAVX2(lo, hi)
		return
	}
	full := lo + (hi-lo)/64*64
	if full > lo {
		p.blocksAVX2(lo, full)
	}
	if full < hi {
		p.piece(full, hi, false)
	}
}

// narrowAVX2 is narrowBT (kernel_simd.go) on bfloat16 weights: x's rows,
// zero-padded to 16, are transposed once into the tile's lanes, and each
// six weight rows are widened into a buffer the tile broadcasts them from.
func (p bf16Product) narrowAVX2(lo, hi int) {
	bufp := packBuffers.Get().(*[]float32)
	defer packBuffers.Put(bufp)
	k := p.k
	need := 16*k + 16*k + 6*k + 16*(hi-lo)
	if cap(*bufp) < need {
		*bufp = make([]float32, need)
	}
	buf := (*bufp)[:need]
	rows16, xt, wide, outT := buf[:16*k], buf[16*k:32*k], buf[32*k:38*k], buf[38*k:]
	for i := range 16 {
		if i < p.m {
			copy(rows16[i*k:(i+1)*k], p.x[i*k:(i+1)*k])
		} else {
			clear(rows16[i*k : (i+1)*k])
		}
	}
	full := k / 8 * 8
	if full > 0 {
		transpose16(full, &rows16[0], uintptr(k)*4, &xt[0])
	}
	for q := full; q < k; q++ {
		for i := range 16 {
			xt[q*16+i] = rows16[i*k+q]
		}
	}
	var zeros [16]float32
	var init [6][16]float32
	for j := lo; j < hi; j += 6 {
		rows := min(6, hi-j)
		widenVec(wide[:rows*k], p.w[j*k:(j+rows)*k])
		start, istride := &zeros[0], uintptr(0)
		if p.bias != nil {
			for r, b := range p.bias[j : j+rows] {
				for i := range init[r] {
					init[r][i] = b
				}
			}
			start, istride = &init[0][0], 64
		}
		if rows == 6 {
			tile6x16Rows(k, &wide[0], uintptr(k)*4, &xt[0], start, istride, &outT[(j-lo)*16])
		} else {
			tileRows(rows, k, &wide[0], uintptr(k)*4, 4, &xt[0], 64, start, istride, &outT[(j-lo)*16], 64)
		}
	}
	untransposeTiles(p.out, outT, p.m, p.n, lo, hi)
}

// bf16Block is the depth of one pass of blocksAVX2: its four panels (16
// KiB) stay in the level-1 cache.
const bf16Block = 64

// blocksAVX2 computes output columns [lo,hi) (hi−lo a multiple of 64) of
// a product of fewer than bf16TallRows rows, 64 columns at a time in
// passes over k: each pass transposes and widens the block's 64 weight
// rows over bf16Block steps into four 16-column panels, and runs
// the tiles over them: six rows at a time, then the rest on one tile of 64
// (one row) or 32 (two) columns for independent sums, or of 16. A partial
// sum passes through out between passes.
func (p bf16Product) blocksAVX2(lo, hi int) {
	const kb = bf16Block
	bufp := bf16Buffers.Get().(*[]float32)
	defer bf16Buffers.Put(bufp)
	if cap(*bufp) < 64*kb {
		*bufp = make([]float32, 64*kb)
	}
	panels := (*bufp)[:64*kb]
	panelBits := unsafe.Slice((*uint32)(unsafe.Pointer(&panels[0])), len(panels))
	var zeros [64]float32
	k, n := p.k, p.n
	ostride, xstride := uintptr(n)*4, uintptr(k)*4
	tiles := p.m / 6
	for c := lo; c < hi; c += 64 {
		for k0 := 0; k0 < k; k0 += kb {
			kc := min(kb, k-k0)
			full := kc / 8 * 8
			for j := range 4 {
				rows := p.w[(c+16*j)*k+k0:]
				if full > 0 {
					transposeWiden16(full, rows, k, panels[j*kc*16:])
				}
				for q := full; q < kc; q++ { // integer moves: no legacy SSE
					for col := range 16 {
						panelBits[(j*kc+q)*16+col] = uint32(rows[col*k+q]) << 16
					}
				}
			}
			// initial is where the rows from i of columns col… start: zero
			// or the bias in the first pass, the partial sums after it.
			initial := func(i, col int) (*float32, uintptr) {
				switch {
				case k0 > 0:
					return &p.out[i*n+col], ostride
				case p.bias != nil:
					return &p.bias[col], 0
				}
				return &zeros[0], 0
			}
			pstride := uintptr(kc*16) * 4
			for t := range tiles {
				i := 6 * t
				for j := range 4 {
					init, istride := initial(i, c+16*j)
					tile6x16(kc, &p.x[i*k+k0], xstride, 4, &panels[j*kc*16], 64, init, istride, &p.out[i*n+c+16*j], ostride)
				}
			}
			i := 6 * tiles
			switch rest := p.m - i; rest {
			case 0:
			case 1:
				init, istride := initial(i, c)
				tile1x64(kc, &p.x[i*k+k0], 0, 4, &panels[0], 64, pstride, init, istride, &p.out[i*n+c], ostride)
			case 2:
				for j := 0; j < 4; j += 2 {
					init, istride := initial(i, c+16*j)
					tile2x32(kc, &p.x[i*k+k0], xstride, 4, &panels[j*kc*16], 64, pstride, init, istride, &p.out[i*n+c+16*j], ostride)
				}
			default:
				for j := range 4 {
					init, istride := initial(i, c+16*j)
					tileRows(rest, kc, &p.x[i*k+k0], xstride, 4, &panels[j*kc*16], 64, init, istride, &p.out[i*n+c+16*j], ostride)
				}
			}
		}
	}
}

// transposeWiden16 writes panel[q·16+c] = the float32 value of w[c·ws+q]
// for the 16 rows c of w (ws elements apart) and q < k, k a multiple of 8:
// the transpose of 16×8 blocks in 16-bit lanes (three rounds of
// interleaves) and the widening as an interleave with zeros. The rows go
// into the vectors' halves in the order that makes the widening's two
// interleaves come out as columns 0–7 and 8–15.
func transposeWiden16(k int, w []uint16, ws int, panel []float32) {
	var zero archsimd.Uint16x16
	_ = w[15*ws+k-1]
	_ = panel[16*k-1]
	pair := func(a, b, q int) archsimd.Uint16x16 {
		return zero.SetLo(archsimd.LoadUint16x8Slice(w[a*ws+q:])).SetHi(archsimd.LoadUint16x8Slice(w[b*ws+q:]))
	}
	for q := 0; q < k; q += 8 {
		// Lower halves rows 0–3, 8–11; upper halves rows 4–7, 12–15.
		v0, v1, v2, v3 := pair(0, 4, q), pair(1, 5, q), pair(2, 6, q), pair(3, 7, q)
		v4, v5, v6, v7 := pair(8, 12, q), pair(9, 13, q), pair(10, 14, q), pair(11, 15, q)
		a0, a1 := v0.InterleaveLoGrouped(v1).AsUint32x8(), v0.InterleaveHiGrouped(v1).AsUint32x8()
		a2, a3 := v2.InterleaveLoGrouped(v3).AsUint32x8(), v2.InterleaveHiGrouped(v3).AsUint32x8()
		a4, a5 := v4.InterleaveLoGrouped(v5).AsUint32x8(), v4.InterleaveHiGrouped(v5).AsUint32x8()
		a6, a7 := v6.InterleaveLoGrouped(v7).AsUint32x8(), v6.InterleaveHiGrouped(v7).AsUint32x8()
		b0, b1 := a0.InterleaveLoGrouped(a2).AsUint64x4(), a0.InterleaveHiGrouped(a2).AsUint64x4()
		b2, b3 := a1.InterleaveLoGrouped(a3).AsUint64x4(), a1.InterleaveHiGrouped(a3).AsUint64x4()
		b4, b5 := a4.InterleaveLoGrouped(a6).AsUint64x4(), a4.InterleaveHiGrouped(a6).AsUint64x4()
		b6, b7 := a5.InterleaveLoGrouped(a7).AsUint64x4(), a5.InterleaveHiGrouped(a7).AsUint64x4()
		out := panel[q*16 : q*16+128 : q*16+128]
		for i, c := range [8]archsimd.Uint64x4{
			b0.InterleaveLoGrouped(b4), b0.InterleaveHiGrouped(b4), b1.InterleaveLoGrouped(b5), b1.InterleaveHiGrouped(b5),
			b2.InterleaveLoGrouped(b6), b2.InterleaveHiGrouped(b6), b3.InterleaveLoGrouped(b7), b3.InterleaveHiGrouped(b7),
		} {
			h := c.AsUint16x16()
			zero.InterleaveLoGrouped(h).AsFloat32x8().StoreSlice(out[i*16:])
			zero.InterleaveHiGrouped(h).AsFloat32x8().StoreSlice(out[i*16+8:])
		}
	}
}
