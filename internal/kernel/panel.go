//go:build (amd64 && goexperiment.simd) || arm64

package kernel

// packPanel lays out output columns [c, c+width) of steps [k0, k0+kc) of
// the product's weights as a panel [kc][16] for the vector tiles, zero
// past width. Weights held [n,k] (wt) are transposed transposeSteps steps
// at a time by the assembly transpose16 of the build's vector path, the
// rest one element at a time.
func (p product) packPanel(panel []float32, c, width, k0, kc int) {
	if width < 16 {
		clear(panel)
	}
	if !p.wt {
		for q := range kc {
			copy(panel[q*16:q*16+width], p.w[(k0+q)*p.n+c:(k0+q)*p.n+c+width])
		}
		return
	}
	from := 0
	if width == 16 && kc >= transposeSteps {
		from = kc / transposeSteps * transposeSteps
		_ = p.w[(c+15)*p.k+k0+from-1]
		transpose16(from, &p.w[c*p.k+k0], uintptr(p.k)*4, &panel[0])
	}
	for col := range width {
		for q, v := range p.w[(c+col)*p.k+k0+from : (c+col)*p.k+k0+kc] {
			panel[(from+q)*16+col] = v
		}
	}
}
