//go:build amd64 && goexperiment.simd && !race

package kernel

import "simd/archsimd"

// load8 loads up to 8 floats of s (zeros past its end) with a masked load.
func load8(s []float32) archsimd.Float32x8 { return archsimd.LoadFloat32x8SlicePart(s) }

// store8 stores the first min(8, len(s)) lanes of v into s with a masked
// store.
func store8(v archsimd.Float32x8, s []float32) { v.StoreSlicePart(s) }
