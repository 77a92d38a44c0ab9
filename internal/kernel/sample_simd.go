//go:build amd64 && goexperiment.simd

package kernel

import (
	"math"
	"math/bits"
	"simd/archsimd"
)

func expScaledAVX2(e, x []float32, shift, scale float32) float64 {
	s, k, floor := archsimd.BroadcastFloat32x8(shift), archsimd.BroadcastFloat32x8(scale), archsimd.BroadcastFloat32x8(expFloor)
	var sum archsimd.Float32x8
	var nan uint8
	n := len(x)
	i := 0
	for ; i+8 <= n; i += 8 {
		t := archsimd.LoadFloat32x8Slice(x[i:]).Sub(s).Mul(k)
		v := exp8(t).Masked(t.GreaterEqual(floor))
		nan |= t.IsNaN().ToBits()
		v.StoreSlice(e[i:])
		sum = sum.Add(v)
	}
	total := float64(hsum(sum))
	if i < n {
		t := load8(x[i:]).Sub(s).Mul(k)
		v := exp8(t).Masked(t.GreaterEqual(floor))
		nan |= t.IsNaN().ToBits() & (1<<(n-i) - 1)
		store8(v, e[i:])
		var lanes [8]float32
		v.Store(&lanes)
		for j := range n - i {
			total += float64(lanes[j])
		}
	}
	archsimd.ClearAVXUpperBits()
	if nan != 0 {
		return math.NaN()
	}
	return total
}

func indexAtLeastAVX2(dst []int32, x []float32, t float32) []int32 {
	n := len(x)
	dst = growInt32(dst, n)
	out := dst[len(dst):cap(dst)] // room for every index: no call inside the loop
	k := 0
	tv := archsimd.BroadcastFloat32x8(t)
	i := 0
	for ; i+8 <= n; i += 8 {
		for m := archsimd.LoadFloat32x8Slice(x[i:]).GreaterEqual(tv).ToBits(); m != 0; m &= m - 1 {
			out[k] = int32(i + bits.TrailingZeros8(m))
			k++
		}
	}
	archsimd.ClearAVXUpperBits()
	for ; i < n; i++ {
		if x[i] >= t {
			out[k] = int32(i)
			k++
		}
	}
	return dst[:len(dst)+k]
}

func firstAtLeastAVX2(x []float32, t float32) int {
	n := len(x)
	tv := archsimd.BroadcastFloat32x8(t)
	i := 0
	for ; i+8 <= n; i += 8 {
		if m := archsimd.LoadFloat32x8Slice(x[i:]).GreaterEqual(tv).ToBits(); m != 0 {
			archsimd.ClearAVXUpperBits()
			return i + bits.TrailingZeros8(m)
		}
	}
	archsimd.ClearAVXUpperBits()
	for ; i < n; i++ {
		if x[i] >= t {
			return i
		}
	}
	return -1
}

// growInt32 returns s with room for at least n more elements.
func growInt32(s []int32, n int) []int32 {
	if cap(s)-len(s) >= n {
		return s
	}
	g := make([]int32, len(s), len(s)+n)
	copy(g, s)
	return g
}
