//go:build amd64 && goexperiment.simd && race

package kernel

import "simd/archsimd"

// Under the race detector, archsimd's masked loads and stores of slices
// shorter than a vector fail its pointer checks (they view the slice as a
// whole vector), so short tails go through a local array. Normal builds
// keep the masked forms (tail_simd.go): the scalar copies here would mix
// legacy SSE instructions into vector code, which this kind of CPU
// penalizes heavily.

// load8 loads up to 8 floats of s (zeros past its end).
func load8(s []float32) archsimd.Float32x8 {
	if len(s) >= 8 {
		return archsimd.LoadFloat32x8Slice(s)
	}
	var t [8]float32
	copy(t[:], s)
	return archsimd.LoadFloat32x8(&t)
}

// store8 stores the first min(8, len(s)) lanes of v into s.
func store8(v archsimd.Float32x8, s []float32) {
	if len(s) >= 8 {
		v.StoreSlice(s)
		return
	}
	var t [8]float32
	v.Store(&t)
	copy(s, t[:])
}
