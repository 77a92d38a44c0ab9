package kernel

import "testing"

// portable turns the vector implementations off for the rest of the test,
// so that a build with them (CI's) also checks the portable loops that
// other machines run.
func portable(t *testing.T) {
	saved := []func(){}
	off := func(restore func()) { saved = append(saved, restore) }
	p, ax, ad, dt := simdProduct, simdAxpy, simdAdd, simdDot
	simdProduct, simdAxpy, simdAdd, simdDot = nil, nil, nil, nil
	off(func() { simdProduct, simdAxpy, simdAdd, simdDot = p, ax, ad, dt })
	sc, ws := simdScores, simdWeightedSum
	simdScores, simdWeightedSum = nil, nil
	off(func() { simdScores, simdWeightedSum = sc, ws })
	cs, mx, sl, gb, sb, es, ge, sm := simdCausalSoftmax, simdMax, simdScale, simdGELUBackward, simdSiLUMulBackward, simdExpShift, simdGELU, simdSiLUMul
	simdCausalSoftmax, simdMax, simdScale, simdGELUBackward, simdSiLUMulBackward, simdExpShift, simdGELU, simdSiLUMul = nil, nil, nil, nil, nil, nil, nil, nil
	off(func() {
		simdCausalSoftmax, simdMax, simdScale, simdGELUBackward, simdSiLUMulBackward, simdExpShift, simdGELU, simdSiLUMul = cs, mx, sl, gb, sb, es, ge, sm
	})
	nq, ns, nb, ma, su := simdNormSquares, simdNormScale, simdNormBackward, simdMulAdd, simdSum
	simdNormSquares, simdNormScale, simdNormBackward, simdMulAdd, simdSum = nil, nil, nil, nil, nil
	off(func() { simdNormSquares, simdNormScale, simdNormBackward, simdMulAdd, simdSum = nq, ns, nb, ma, su })
	aw := simdAdamW
	simdAdamW = nil
	off(func() { simdAdamW = aw })
	t.Cleanup(func() {
		for _, r := range saved {
			r()
		}
	})
}

// The portable loops pass the same checks as the vector code.
func TestPortableKernels(t *testing.T) {
	portable(t)
	for name, test := range map[string]func(*testing.T){
		"MatMul": TestMatMul, "MatMulIndependentOfCores": TestMatMulIndependentOfCores, "MatMulTAdd": TestMatMulTAdd,
		"MatMulBT": TestMatMulBT, "MatMulPacked": TestMatMulPacked, "MatMulBTIndependentOfCores": TestMatMulBTIndependentOfCores, "PathsAgreeBitwise": TestMatMulPathsAgreeBitwise,
		"DotAxpyLengths": TestDotAxpyLengths, "Attention": TestAttention, "GELU": TestGELU, "GELUBackward": TestGELUBackward,
		"SiLUMul": TestSiLUMul, "SiLUMulBackward": TestSiLUMulBackward, "Softmax": TestSoftmax, "CausalSoftmax": TestCausalSoftmax,
		"LogSumExp": TestLogSumExp, "MaxScale": TestMaxScale, "NormAndBackward": TestNormAndBackward, "SumMulAdd": TestSumMulAdd,
		"AdamW": TestAdamW, "Transpose": TestTranspose,
	} {
		t.Run(name, test)
	}
}
