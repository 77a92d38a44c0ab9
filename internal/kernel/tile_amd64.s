//go:build amd64 && goexperiment.simd

#include "textflag.h"

// func tile6x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr,
//	init *float32, istride uintptr, out *float32, ostride uintptr)
//
// For rows r = 0…5 (all strides in bytes):
//
//	out[r·ostride : +16 floats] = init[r·istride : +16 floats] + Σ_{p<k} x[r·xstride + p·xstep] · w[p·wstride : +16 floats]
//
// The twelve 8-lane sums stay in Y0–Y11 for the whole loop; each step loads
// the 16 weights once into Y12–Y13 and broadcasts each row's x from memory.
// istride 0 starts every row from the same 16 values (a bias, or zeros).
TEXT ·tile6x16(SB), NOSPLIT, $0-80
	MOVQ init+48(FP), BX
	MOVQ istride+56(FP), CX
	LEAQ (BX)(CX*2), DX
	ADDQ CX, DX
	VMOVUPS (BX), Y0
	VMOVUPS 32(BX), Y1
	VMOVUPS (BX)(CX*1), Y2
	VMOVUPS 32(BX)(CX*1), Y3
	VMOVUPS (BX)(CX*2), Y4
	VMOVUPS 32(BX)(CX*2), Y5
	VMOVUPS (DX), Y6
	VMOVUPS 32(DX), Y7
	VMOVUPS (DX)(CX*1), Y8
	VMOVUPS 32(DX)(CX*1), Y9
	VMOVUPS (DX)(CX*2), Y10
	VMOVUPS 32(DX)(CX*2), Y11

	MOVQ k+0(FP), AX
	MOVQ x+8(FP), SI
	MOVQ xstride+16(FP), R8
	MOVQ xstep+24(FP), R13
	MOVQ w+32(FP), DI
	MOVQ wstride+40(FP), R12
	LEAQ (SI)(R8*2), R11
	ADDQ R8, R11

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
	MOVQ    out+64(FP), BX
	MOVQ    ostride+72(FP), CX
	LEAQ    (BX)(CX*2), DX
	ADDQ    CX, DX
	VMOVUPS Y0, (BX)
	VMOVUPS Y1, 32(BX)
	VMOVUPS Y2, (BX)(CX*1)
	VMOVUPS Y3, 32(BX)(CX*1)
	VMOVUPS Y4, (BX)(CX*2)
	VMOVUPS Y5, 32(BX)(CX*2)
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	VMOVUPS Y8, (DX)(CX*1)
	VMOVUPS Y9, 32(DX)(CX*1)
	VMOVUPS Y10, (DX)(CX*2)
	VMOVUPS Y11, 32(DX)(CX*2)
	VZEROUPPER
	RET
