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

// func transpose16(k int, w *float32, wstride uintptr, dst *float32)
//
// dst[q·16 + c] = w[c·wstride bytes + q] for the 16 rows c = 0…15 of w and
// q = 0…k−1, k a multiple of 8: sixteen weight rows [·,k] become one panel
// [k,16] for tile6x16, eight by eight through an in-register transpose.
TEXT ·transpose16(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), AX
	MOVQ w+8(FP), SI
	MOVQ wstride+16(FP), R8
	MOVQ dst+24(FP), DI
	SHRQ $3, AX
	JZ   tdone
	LEAQ (R8)(R8*2), R9 // 3·stride
	MOVQ R8, R10
	SHLQ $3, R10        // 8·stride

tloop:
	MOVQ SI, BX
	MOVQ DI, DX
	MOVQ $2, CX

thalf:
	// Rows c…c+7, eight steps each.
	LEAQ    (BX)(R9*1), R11
	LEAQ    (R11)(R9*1), R12
	VMOVUPS (BX), Y0
	VMOVUPS (BX)(R8*1), Y1
	VMOVUPS (BX)(R8*2), Y2
	VMOVUPS (R11), Y3
	VMOVUPS (R11)(R8*1), Y4
	VMOVUPS (R11)(R8*2), Y5
	VMOVUPS (R12), Y6
	VMOVUPS (R12)(R8*1), Y7

	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15

	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7

	VINSERTF128 $1, X4, Y0, Y8
	VPERM2F128  $0x31, Y4, Y0, Y12
	VINSERTF128 $1, X5, Y1, Y9
	VPERM2F128  $0x31, Y5, Y1, Y13
	VINSERTF128 $1, X6, Y2, Y10
	VPERM2F128  $0x31, Y6, Y2, Y14
	VINSERTF128 $1, X7, Y3, Y11
	VPERM2F128  $0x31, Y7, Y3, Y15

	VMOVUPS Y8, (DX)
	VMOVUPS Y9, 64(DX)
	VMOVUPS Y10, 128(DX)
	VMOVUPS Y11, 192(DX)
	VMOVUPS Y12, 256(DX)
	VMOVUPS Y13, 320(DX)
	VMOVUPS Y14, 384(DX)
	VMOVUPS Y15, 448(DX)

	ADDQ R10, BX
	ADDQ $32, DX
	DECQ CX
	JNZ  thalf

	ADDQ $32, SI
	ADDQ $512, DI
	DECQ AX
	JNZ  tloop

tdone:
	VZEROUPPER
	RET

// func tile1x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr,
//	init *float32, istride uintptr, out *float32, ostride uintptr)
//
// tile6x16 for 1 row.
TEXT ·tile1x16(SB), NOSPLIT, $0-80
	MOVQ init+48(FP), BX
	MOVQ istride+56(FP), CX
	VMOVUPS (BX), Y0
	VMOVUPS 32(BX), Y1

	MOVQ k+0(FP), AX
	MOVQ x+8(FP), SI
	MOVQ xstride+16(FP), R8
	MOVQ xstep+24(FP), R13
	MOVQ w+32(FP), DI
	MOVQ wstride+40(FP), R12

	TESTQ AX, AX
	JZ    done1

loop1:
	VMOVUPS      (DI), Y12
	VMOVUPS      32(DI), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	ADDQ         R13, SI
	ADDQ         R12, DI
	DECQ         AX
	JNZ          loop1

done1:
	MOVQ    out+64(FP), BX
	MOVQ    ostride+72(FP), CX
	VMOVUPS Y0, (BX)
	VMOVUPS Y1, 32(BX)
	VZEROUPPER
	RET

// func tile2x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr,
//	init *float32, istride uintptr, out *float32, ostride uintptr)
//
// tile6x16 for 2 rows.
TEXT ·tile2x16(SB), NOSPLIT, $0-80
	MOVQ init+48(FP), BX
	MOVQ istride+56(FP), CX
	VMOVUPS (BX), Y0
	VMOVUPS 32(BX), Y1
	VMOVUPS (BX)(CX*1), Y2
	VMOVUPS 32(BX)(CX*1), Y3

	MOVQ k+0(FP), AX
	MOVQ x+8(FP), SI
	MOVQ xstride+16(FP), R8
	MOVQ xstep+24(FP), R13
	MOVQ w+32(FP), DI
	MOVQ wstride+40(FP), R12

	TESTQ AX, AX
	JZ    done2

loop2:
	VMOVUPS      (DI), Y12
	VMOVUPS      32(DI), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	VBROADCASTSS (SI)(R8*1), Y15
	VFMADD231PS  Y12, Y15, Y2
	VFMADD231PS  Y13, Y15, Y3
	ADDQ         R13, SI
	ADDQ         R12, DI
	DECQ         AX
	JNZ          loop2

done2:
	MOVQ    out+64(FP), BX
	MOVQ    ostride+72(FP), CX
	VMOVUPS Y0, (BX)
	VMOVUPS Y1, 32(BX)
	VMOVUPS Y2, (BX)(CX*1)
	VMOVUPS Y3, 32(BX)(CX*1)
	VZEROUPPER
	RET

// func tile3x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr,
//	init *float32, istride uintptr, out *float32, ostride uintptr)
//
// tile6x16 for 3 rows.
TEXT ·tile3x16(SB), NOSPLIT, $0-80
	MOVQ init+48(FP), BX
	MOVQ istride+56(FP), CX
	VMOVUPS (BX), Y0
	VMOVUPS 32(BX), Y1
	VMOVUPS (BX)(CX*1), Y2
	VMOVUPS 32(BX)(CX*1), Y3
	VMOVUPS (BX)(CX*2), Y4
	VMOVUPS 32(BX)(CX*2), Y5

	MOVQ k+0(FP), AX
	MOVQ x+8(FP), SI
	MOVQ xstride+16(FP), R8
	MOVQ xstep+24(FP), R13
	MOVQ w+32(FP), DI
	MOVQ wstride+40(FP), R12

	TESTQ AX, AX
	JZ    done3

loop3:
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
	ADDQ         R13, SI
	ADDQ         R12, DI
	DECQ         AX
	JNZ          loop3

done3:
	MOVQ    out+64(FP), BX
	MOVQ    ostride+72(FP), CX
	VMOVUPS Y0, (BX)
	VMOVUPS Y1, 32(BX)
	VMOVUPS Y2, (BX)(CX*1)
	VMOVUPS Y3, 32(BX)(CX*1)
	VMOVUPS Y4, (BX)(CX*2)
	VMOVUPS Y5, 32(BX)(CX*2)
	VZEROUPPER
	RET

// func tile4x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr,
//	init *float32, istride uintptr, out *float32, ostride uintptr)
//
// tile6x16 for 4 rows.
TEXT ·tile4x16(SB), NOSPLIT, $0-80
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

	MOVQ k+0(FP), AX
	MOVQ x+8(FP), SI
	MOVQ xstride+16(FP), R8
	MOVQ xstep+24(FP), R13
	MOVQ w+32(FP), DI
	MOVQ wstride+40(FP), R12
	LEAQ (SI)(R8*2), R11
	ADDQ R8, R11

	TESTQ AX, AX
	JZ    done4

loop4:
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
	ADDQ         R13, SI
	ADDQ         R13, R11
	ADDQ         R12, DI
	DECQ         AX
	JNZ          loop4

done4:
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
	VZEROUPPER
	RET

// func tile5x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr,
//	init *float32, istride uintptr, out *float32, ostride uintptr)
//
// tile6x16 for 5 rows.
TEXT ·tile5x16(SB), NOSPLIT, $0-80
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

	MOVQ k+0(FP), AX
	MOVQ x+8(FP), SI
	MOVQ xstride+16(FP), R8
	MOVQ xstep+24(FP), R13
	MOVQ w+32(FP), DI
	MOVQ wstride+40(FP), R12
	LEAQ (SI)(R8*2), R11
	ADDQ R8, R11

	TESTQ AX, AX
	JZ    done5

loop5:
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
	ADDQ         R13, SI
	ADDQ         R13, R11
	ADDQ         R12, DI
	DECQ         AX
	JNZ          loop5

done5:
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
	VZEROUPPER
	RET
