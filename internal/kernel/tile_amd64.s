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
	// Rows c…c+7, eight steps each: Yi holds steps 0…3 of rows i and i+4,
	// Y(i+4) steps 4…7, so that 4×4 transposes within the 128-bit lanes
	// (no lane-crossing shuffles) give each step's eight rows. The rows are
	// prefetched 256 bytes ahead (the next pass's block of a short
	// product): sixteen strided streams otherwise leave the transpose
	// waiting on memory at half the speed of a plain copy.
	LEAQ        (BX)(R9*1), R11  // row 3
	LEAQ        (R11)(R9*1), R12 // row 6
	LEAQ        (BX)(R8*4), R13  // row 4
	PREFETCHT0  256(BX)
	PREFETCHT0  256(BX)(R8*1)
	PREFETCHT0  256(BX)(R8*2)
	PREFETCHT0  256(R11)
	PREFETCHT0  256(R13)
	PREFETCHT0  256(R13)(R8*1)
	PREFETCHT0  256(R12)
	PREFETCHT0  256(R12)(R8*1)
	VMOVUPS     (BX), X0
	VINSERTF128 $1, (R13), Y0, Y0
	VMOVUPS     16(BX), X4
	VINSERTF128 $1, 16(R13), Y4, Y4
	VMOVUPS     (BX)(R8*1), X1
	VINSERTF128 $1, (R13)(R8*1), Y1, Y1
	VMOVUPS     16(BX)(R8*1), X5
	VINSERTF128 $1, 16(R13)(R8*1), Y5, Y5
	VMOVUPS     (BX)(R8*2), X2
	VINSERTF128 $1, (R12), Y2, Y2
	VMOVUPS     16(BX)(R8*2), X6
	VINSERTF128 $1, 16(R12), Y6, Y6
	VMOVUPS     (R11), X3
	VINSERTF128 $1, (R12)(R8*1), Y3, Y3
	VMOVUPS     16(R11), X7
	VINSERTF128 $1, 16(R12)(R8*1), Y7, Y7

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

	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 64(DX)
	VMOVUPS Y2, 128(DX)
	VMOVUPS Y3, 192(DX)
	VMOVUPS Y4, 256(DX)
	VMOVUPS Y5, 320(DX)
	VMOVUPS Y6, 384(DX)
	VMOVUPS Y7, 448(DX)

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

// func tile1x64(k int, x *float32, xstride, xstep uintptr, w *float32, wstride, pstride uintptr,
//	init *float32, istride uintptr, out *float32, ostride uintptr)
//
// One row of 64 columns: four 16-column panels pstride bytes apart, the
// tile of a single decoding row. Eight independent sums keep the FMA units
// busy where a one-row tile of 16 columns would wait on two chains.
TEXT ·tile1x64(SB), NOSPLIT, $0-88
	MOVQ    init+56(FP), BX
	VMOVUPS (BX), Y0
	VMOVUPS 32(BX), Y1
	VMOVUPS 64(BX), Y2
	VMOVUPS 96(BX), Y3
	VMOVUPS 128(BX), Y4
	VMOVUPS 160(BX), Y5
	VMOVUPS 192(BX), Y6
	VMOVUPS 224(BX), Y7

	MOVQ k+0(FP), AX
	MOVQ x+8(FP), SI
	MOVQ xstep+24(FP), R13
	MOVQ w+32(FP), DI
	MOVQ wstride+40(FP), R12
	MOVQ pstride+48(FP), R9
	LEAQ (R9)(R9*2), R10

	TESTQ AX, AX
	JZ    done1w

loop1w:
	VBROADCASTSS (SI), Y15
	VFMADD231PS  (DI), Y15, Y0
	VFMADD231PS  32(DI), Y15, Y1
	VFMADD231PS  (DI)(R9*1), Y15, Y2
	VFMADD231PS  32(DI)(R9*1), Y15, Y3
	VFMADD231PS  (DI)(R9*2), Y15, Y4
	VFMADD231PS  32(DI)(R9*2), Y15, Y5
	VFMADD231PS  (DI)(R10*1), Y15, Y6
	VFMADD231PS  32(DI)(R10*1), Y15, Y7
	ADDQ         R13, SI
	ADDQ         R12, DI
	DECQ         AX
	JNZ          loop1w

done1w:
	MOVQ    out+72(FP), BX
	VMOVUPS Y0, (BX)
	VMOVUPS Y1, 32(BX)
	VMOVUPS Y2, 64(BX)
	VMOVUPS Y3, 96(BX)
	VMOVUPS Y4, 128(BX)
	VMOVUPS Y5, 160(BX)
	VMOVUPS Y6, 192(BX)
	VMOVUPS Y7, 224(BX)
	VZEROUPPER
	RET

// func tile2x32(k int, x *float32, xstride, xstep uintptr, w *float32, wstride, pstride uintptr,
//	init *float32, istride uintptr, out *float32, ostride uintptr)
//
// Two rows of 32 columns: two 16-column panels pstride bytes apart.
TEXT ·tile2x32(SB), NOSPLIT, $0-88
	MOVQ    init+56(FP), BX
	MOVQ    istride+64(FP), CX
	VMOVUPS (BX), Y0
	VMOVUPS 32(BX), Y1
	VMOVUPS 64(BX), Y2
	VMOVUPS 96(BX), Y3
	VMOVUPS (BX)(CX*1), Y4
	VMOVUPS 32(BX)(CX*1), Y5
	VMOVUPS 64(BX)(CX*1), Y6
	VMOVUPS 96(BX)(CX*1), Y7

	MOVQ k+0(FP), AX
	MOVQ x+8(FP), SI
	MOVQ xstride+16(FP), R8
	MOVQ xstep+24(FP), R13
	MOVQ w+32(FP), DI
	MOVQ wstride+40(FP), R12
	MOVQ pstride+48(FP), R9

	TESTQ AX, AX
	JZ    done2w

loop2w:
	VMOVUPS      (DI), Y8
	VMOVUPS      32(DI), Y9
	VMOVUPS      (DI)(R9*1), Y10
	VMOVUPS      32(DI)(R9*1), Y11
	VBROADCASTSS (SI), Y14
	VBROADCASTSS (SI)(R8*1), Y15
	VFMADD231PS  Y8, Y14, Y0
	VFMADD231PS  Y9, Y14, Y1
	VFMADD231PS  Y10, Y14, Y2
	VFMADD231PS  Y11, Y14, Y3
	VFMADD231PS  Y8, Y15, Y4
	VFMADD231PS  Y9, Y15, Y5
	VFMADD231PS  Y10, Y15, Y6
	VFMADD231PS  Y11, Y15, Y7
	ADDQ         R13, SI
	ADDQ         R12, DI
	DECQ         AX
	JNZ          loop2w

done2w:
	MOVQ    out+72(FP), BX
	MOVQ    ostride+80(FP), CX
	VMOVUPS Y0, (BX)
	VMOVUPS Y1, 32(BX)
	VMOVUPS Y2, 64(BX)
	VMOVUPS Y3, 96(BX)
	VMOVUPS Y4, (BX)(CX*1)
	VMOVUPS Y5, 32(BX)(CX*1)
	VMOVUPS Y6, 64(BX)(CX*1)
	VMOVUPS Y7, 96(BX)(CX*1)
	VZEROUPPER
	RET

// func tile6x16Rows(k int, x *float32, xstride uintptr, w *float32,
//	init *float32, istride uintptr, out *float32)
//
// tile6x16 for narrowBT: x is six rows of k contiguous floats, xstride
// bytes apart (six rows of a weight matrix, streaming from memory), w a
// [k,16] panel (x's transpose, in the caches) and out six rows of 16 floats
// (64 bytes apart). Four steps per iteration, with one prefetch per row of
// x 1 KiB ahead: the rows are read once, and without the prefetches
// the broadcasts wait on memory.
TEXT ·tile6x16Rows(SB), NOSPLIT, $0-56
	MOVQ init+32(FP), BX
	MOVQ istride+40(FP), CX
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
	MOVQ w+24(FP), DI
	LEAQ (SI)(R8*2), R11
	ADDQ R8, R11

	CMPQ AX, $4
	JLT  tail

loop4:
	PREFETCHT0 1024(SI)
	PREFETCHT0 1024(SI)(R8*1)
	PREFETCHT0 1024(SI)(R8*2)
	PREFETCHT0 1024(R11)
	PREFETCHT0 1024(R11)(R8*1)
	PREFETCHT0 1024(R11)(R8*2)

#define STEP(off, woff) \
	VMOVUPS      woff(DI), Y12; \
	VMOVUPS      woff+32(DI), Y13; \
	VBROADCASTSS off(SI), Y14; \
	VFMADD231PS  Y12, Y14, Y0; \
	VFMADD231PS  Y13, Y14, Y1; \
	VBROADCASTSS off(SI)(R8*1), Y15; \
	VFMADD231PS  Y12, Y15, Y2; \
	VFMADD231PS  Y13, Y15, Y3; \
	VBROADCASTSS off(SI)(R8*2), Y14; \
	VFMADD231PS  Y12, Y14, Y4; \
	VFMADD231PS  Y13, Y14, Y5; \
	VBROADCASTSS off(R11), Y15; \
	VFMADD231PS  Y12, Y15, Y6; \
	VFMADD231PS  Y13, Y15, Y7; \
	VBROADCASTSS off(R11)(R8*1), Y14; \
	VFMADD231PS  Y12, Y14, Y8; \
	VFMADD231PS  Y13, Y14, Y9; \
	VBROADCASTSS off(R11)(R8*2), Y15; \
	VFMADD231PS  Y12, Y15, Y10; \
	VFMADD231PS  Y13, Y15, Y11

	STEP(0, 0)
	STEP(4, 64)
	STEP(8, 128)
	STEP(12, 192)
	ADDQ $16, SI
	ADDQ $16, R11
	ADDQ $256, DI
	SUBQ $4, AX
	CMPQ AX, $4
	JGE  loop4

tail:
	TESTQ AX, AX
	JZ    store

loop1:
	STEP(0, 0)
	ADDQ $4, SI
	ADDQ $4, R11
	ADDQ $64, DI
	DECQ AX
	JNZ  loop1

store:
	MOVQ    out+48(FP), BX
	VMOVUPS Y0, (BX)
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
