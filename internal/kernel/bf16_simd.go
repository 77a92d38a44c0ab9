//go:build amd64 && goexperiment.simd

package kernel

import (
	"math"
	"simd/archsimd"
)

// The vector widening, where the CPU has AVX2 (WidenBF16 uses it while the
// vector products are installed).
var _ = func() bool {
	if archsimd.X86.AVX2() {
		simdWiden = widenAVX2
	}
	return true
}()

// widenAVX2 widens eight bfloat16 values at a time: zero-extended to 32
// bits and shifted into the top half. The last len mod 8 go one at a time
// after the closing VZEROUPPER.
func widenAVX2(dst []float32, src []uint16) {
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
	archsimd.ClearAVXUpperBits()
	for ; i < n; i++ {
		dst[i] = math.Float32frombits(uint32(src[i]) << 16)
	}
}
