//go:build amd64 && goexperiment.simd

#include "textflag.h"

// func tile6x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr, acc *[12][8]float32)
//
// acc[2r], acc[2r+1] += Σ_{p<k} x[r·xstride + p·xstep] · w[p·wstride : +16 floats]
// for rows r = 0…5 (strides in bytes). The twelve 8-lane sums stay in
// Y0–Y11 for the whole loop; each step loads the 16 weights once into
// Y12–Y13 and broadcasts each row's x[p] from memory.
TEXT ·tile6x16(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), AX
	MOVQ x+8(FP), SI
	MOVQ xstride+16(FP), R8
	MOVQ xstep+24(FP), R13
	MOVQ w+32(FP), DI
	MOVQ wstride+40(FP), R12
	MOVQ acc+48(FP), BX
	LEAQ (SI)(R8*2), R11
	ADDQ R8, R11

	VMOVUPS 0(BX), Y0
	VMOVUPS 32(BX), Y1
	VMOVUPS 64(BX), Y2
	VMOVUPS 96(BX), Y3
	VMOVUPS 128(BX), Y4
	VMOVUPS 160(BX), Y5
	VMOVUPS 192(BX), Y6
	VMOVUPS 224(BX), Y7
	VMOVUPS 256(BX), Y8
	VMOVUPS 288(BX), Y9
	VMOVUPS 320(BX), Y10
	VMOVUPS 352(BX), Y11

	TESTQ AX, AX
	JZ    done

loop:
	VMOVUPS      (DI), Y12
	VMOVUPS      32(DI), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	VBROADCASTSS (SI)(R8*1), Y15
	VFMADD231PS  Y12, Y15, Y2
	VFMADD231PS  Y13, Y15, Y3
	VBROADCASTSS (SI)(R8*2), Y14
	VFMADD231PS  Y12, Y14, Y4
	VFMADD231PS  Y13, Y14, Y5
	VBROADCASTSS (R11), Y15
	VFMADD231PS  Y12, Y15, Y6
	VFMADD231PS  Y13, Y15, Y7
	VBROADCASTSS (R11)(R8*1), Y14
	VFMADD231PS  Y12, Y14, Y8
	VFMADD231PS  Y13, Y14, Y9
	VBROADCASTSS (R11)(R8*2), Y15
	VFMADD231PS  Y12, Y15, Y10
	VFMADD231PS  Y13, Y15, Y11
	ADDQ         R13, SI
	ADDQ         R13, R11
	ADDQ         R12, DI
	DECQ         AX
	JNZ          loop

done:
	VMOVUPS Y0, 0(BX)
	VMOVUPS Y1, 32(BX)
	VMOVUPS Y2, 64(BX)
	VMOVUPS Y3, 96(BX)
	VMOVUPS Y4, 128(BX)
	VMOVUPS Y5, 160(BX)
	VMOVUPS Y6, 192(BX)
	VMOVUPS Y7, 224(BX)
	VMOVUPS Y8, 256(BX)
	VMOVUPS Y9, 288(BX)
	VMOVUPS Y10, 320(BX)
	VMOVUPS Y11, 352(BX)
	VZEROUPPER
	RET
