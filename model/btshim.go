package model

import "github.com/hacrl/hacrl/internal/kernel"

// matMulBT is out = x·wᵀ (+ bias) for w [n,k]. TEMPORARY until the kernel's MatMulBT takes a bias.
func matMulBT(par bool, out, x, w, bias []float32, m, k, n int) {
	kernel.MatMulBT(out, x, w, m, k, n)
	if bias != nil {
		for i := range m {
			kernel.Add(out[i*n:(i+1)*n], bias)
		}
	}
}
