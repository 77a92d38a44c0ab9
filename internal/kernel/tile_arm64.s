#include "textflag.h"

// The NEON micro-kernels of the arm64 path (kernel_arm64.go). Each output
// element is its initial value plus one fused multiply-add (FMLA) per step
// of k, in k order, like the AVX2 kernels of tile_amd64.s. Go's assembler
// writes FMLA's operands as VFMLA Vm, Vn, Vd: Vd += Vn·Vm, lane by lane.

// func tile6x16(k int, x *float32, xstride, xstep uintptr, w *float32, wstride uintptr,
//	init *float32, istride uintptr, out *float32, ostride uintptr)
//
// Six rows of 16 columns: the accumulators are V0–V23 (row r in
// V4r…V4r+3), a step's 16 weights V24–V27, and the step's six values of x
// are broadcast to all lanes of V28–V31 (two of them reused: the core
// renames them).
TEXT ·tile6x16(SB), NOSPLIT, $0-80
	MOVD k+0(FP), R0
	MOVD x+8(FP), R1
	MOVD xstride+16(FP), R2
	MOVD xstep+24(FP), R3
	MOVD w+32(FP), R4
	MOVD wstride+40(FP), R5
	MOVD init+48(FP), R6
	MOVD istride+56(FP), R7
	MOVD out+64(FP), R8
	MOVD ostride+72(FP), R9

	VLD1 (R6), [V0.S4, V1.S4, V2.S4, V3.S4]
	ADD  R7, R6
	VLD1 (R6), [V4.S4, V5.S4, V6.S4, V7.S4]
	ADD  R7, R6
	VLD1 (R6), [V8.S4, V9.S4, V10.S4, V11.S4]
	ADD  R7, R6
	VLD1 (R6), [V12.S4, V13.S4, V14.S4, V15.S4]
	ADD  R7, R6
	VLD1 (R6), [V16.S4, V17.S4, V18.S4, V19.S4]
	ADD  R7, R6
	VLD1 (R6), [V20.S4, V21.S4, V22.S4, V23.S4]

	// R10–R15: the six rows of x at the current step.
	MOVD R1, R10
	ADD  R2, R10, R11
	ADD  R2, R11, R12
	ADD  R2, R12, R13
	ADD  R2, R13, R14
	ADD  R2, R14, R15
	CBZ  R0, store6

loop6:
	VLD1    (R4), [V24.S4, V25.S4, V26.S4, V27.S4]
	ADD     R5, R4
	VLD1R.P (R10)(R3), [V28.S4]
	VLD1R.P (R11)(R3), [V29.S4]
	VLD1R.P (R12)(R3), [V30.S4]
	VLD1R.P (R13)(R3), [V31.S4]
	VFMLA   V24.S4, V28.S4, V0.S4
	VFMLA   V25.S4, V28.S4, V1.S4
	VFMLA   V26.S4, V28.S4, V2.S4
	VFMLA   V27.S4, V28.S4, V3.S4
	VFMLA   V24.S4, V29.S4, V4.S4
	VFMLA   V25.S4, V29.S4, V5.S4
	VFMLA   V26.S4, V29.S4, V6.S4
	VFMLA   V27.S4, V29.S4, V7.S4
	VLD1R.P (R14)(R3), [V28.S4]
	VLD1R.P (R15)(R3), [V29.S4]
	VFMLA   V24.S4, V30.S4, V8.S4
	VFMLA   V25.S4, V30.S4, V9.S4
	VFMLA   V26.S4, V30.S4, V10.S4
	VFMLA   V27.S4, V30.S4, V11.S4
	VFMLA   V24.S4, V31.S4, V12.S4
	VFMLA   V25.S4, V31.S4, V13.S4
	VFMLA   V26.S4, V31.S4, V14.S4
	VFMLA   V27.S4, V31.S4, V15.S4
	VFMLA   V24.S4, V28.S4, V16.S4
	VFMLA   V25.S4, V28.S4, V17.S4
	VFMLA   V26.S4, V28.S4, V18.S4
	VFMLA   V27.S4, V28.S4, V19.S4
	VFMLA   V24.S4, V29.S4, V20.S4
	VFMLA   V25.S4, V29.S4, V21.S4
	VFMLA   V26.S4, V29.S4, V22.S4
	VFMLA   V27.S4, V29.S4, V23.S4
	SUBS    $1, R0
	BNE     loop6

store6:
	VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R8)
	ADD  R9, R8
	VST1 [V4.S4, V5.S4, V6.S4, V7.S4], (R8)
	ADD  R9, R8
	VST1 [V8.S4, V9.S4, V10.S4, V11.S4], (R8)
	ADD  R9, R8
	VST1 [V12.S4, V13.S4, V14.S4, V15.S4], (R8)
	ADD  R9, R8
	VST1 [V16.S4, V17.S4, V18.S4, V19.S4], (R8)
	ADD  R9, R8
	VST1 [V20.S4, V21.S4, V22.S4, V23.S4], (R8)
	RET

// func tile1x64(k int, x *float32, xstep uintptr, w *float32, wstride, pstride uintptr,
//	init *float32, out *float32)
//
// One row of four 16-column panels (pstride bytes apart; 64 when they are
// consecutive columns of one row of w): sixteen independent sums in
// V0–V15, so that a single row keeps the multiply-add units busy. init and
// out are 64 contiguous floats.
TEXT ·tile1x64(SB), NOSPLIT, $0-64
	MOVD k+0(FP), R0
	MOVD x+8(FP), R1
	MOVD xstep+16(FP), R3
	MOVD w+24(FP), R4
	MOVD wstride+32(FP), R5
	MOVD pstride+40(FP), R2
	MOVD init+48(FP), R6
	MOVD out+56(FP), R8

	VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R6), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R6), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1   (R6), [V12.S4, V13.S4, V14.S4, V15.S4]

	// R10–R13: the four panels at the current step.
	MOVD R4, R10
	ADD  R2, R10, R11
	ADD  R2, R11, R12
	ADD  R2, R12, R13
	CBZ  R0, store1x64

loop1x64:
	VLD1R.P (R1)(R3), [V31.S4]
	VLD1.P  (R10)(R5), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P  (R11)(R5), [V20.S4, V21.S4, V22.S4, V23.S4]
	VFMLA   V16.S4, V31.S4, V0.S4
	VFMLA   V17.S4, V31.S4, V1.S4
	VFMLA   V18.S4, V31.S4, V2.S4
	VFMLA   V19.S4, V31.S4, V3.S4
	VLD1.P  (R12)(R5), [V24.S4, V25.S4, V26.S4, V27.S4]
	VFMLA   V20.S4, V31.S4, V4.S4
	VFMLA   V21.S4, V31.S4, V5.S4
	VFMLA   V22.S4, V31.S4, V6.S4
	VFMLA   V23.S4, V31.S4, V7.S4
	VLD1.P  (R13)(R5), [V16.S4, V17.S4, V18.S4, V19.S4]
	VFMLA   V24.S4, V31.S4, V8.S4
	VFMLA   V25.S4, V31.S4, V9.S4
	VFMLA   V26.S4, V31.S4, V10.S4
	VFMLA   V27.S4, V31.S4, V11.S4
	VFMLA   V16.S4, V31.S4, V12.S4
	VFMLA   V17.S4, V31.S4, V13.S4
	VFMLA   V18.S4, V31.S4, V14.S4
	VFMLA   V19.S4, V31.S4, V15.S4
	SUBS    $1, R0
	BNE     loop1x64

store1x64:
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R8)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R8)
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R8)
	VST1   [V12.S4, V13.S4, V14.S4, V15.S4], (R8)
	RET

// func tile1x16(k int, x *float32, xstep uintptr, w *float32, wstride uintptr, init *float32, out *float32)
//
// One row of one 16-column panel; init and out are 16 contiguous floats.
TEXT ·tile1x16(SB), NOSPLIT, $0-56
	MOVD k+0(FP), R0
	MOVD x+8(FP), R1
	MOVD xstep+16(FP), R3
	MOVD w+24(FP), R4
	MOVD wstride+32(FP), R5
	MOVD init+40(FP), R6
	MOVD out+48(FP), R8

	VLD1 (R6), [V0.S4, V1.S4, V2.S4, V3.S4]
	CBZ  R0, store1x16

loop1x16:
	VLD1R.P (R1)(R3), [V31.S4]
	VLD1.P  (R4)(R5), [V16.S4, V17.S4, V18.S4, V19.S4]
	VFMLA   V16.S4, V31.S4, V0.S4
	VFMLA   V17.S4, V31.S4, V1.S4
	VFMLA   V18.S4, V31.S4, V2.S4
	VFMLA   V19.S4, V31.S4, V3.S4
	SUBS    $1, R0
	BNE     loop1x16

store1x16:
	VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R8)
	RET

// func axpy4(n int, y *float32, a float32, x *float32)
//
// y[i] += a·x[i] for n elements, n a multiple of 16, one fused
// multiply-add per element.
TEXT ·axpy4(SB), NOSPLIT, $0-32
	MOVD    n+0(FP), R0
	MOVD    y+8(FP), R1
	MOVD    x+24(FP), R2
	FMOVS   a+16(FP), F31
	VDUP    V31.S[0], V31.S4
	LSR     $4, R0
	CBZ     R0, doneaxpy

loopaxpy:
	VLD1.P  64(R2), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1    (R1), [V0.S4, V1.S4, V2.S4, V3.S4]
	VFMLA   V16.S4, V31.S4, V0.S4
	VFMLA   V17.S4, V31.S4, V1.S4
	VFMLA   V18.S4, V31.S4, V2.S4
	VFMLA   V19.S4, V31.S4, V3.S4
	VST1.P  [V0.S4, V1.S4, V2.S4, V3.S4], 64(R1)
	SUBS    $1, R0
	BNE     loopaxpy

doneaxpy:
	RET

// func dot16(n int, a, b *float32, acc *[16]float32)
//
// Sets acc to four vectors of partial sums of a[i]·b[i] over n elements (n
// a multiple of 16): lane l of vector v holds the sum over i ≡ 4v+l
// (mod 16), one fused multiply-add per element in i order.
TEXT ·dot16(SB), NOSPLIT, $0-32
	MOVD  n+0(FP), R0
	MOVD  a+8(FP), R1
	MOVD  b+16(FP), R2
	MOVD  acc+24(FP), R3
	VEOR  V0.B16, V0.B16, V0.B16
	VEOR  V1.B16, V1.B16, V1.B16
	VEOR  V2.B16, V2.B16, V2.B16
	VEOR  V3.B16, V3.B16, V3.B16
	LSR   $4, R0
	CBZ   R0, donedot

loopdot:
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P 64(R2), [V20.S4, V21.S4, V22.S4, V23.S4]
	VFMLA  V16.S4, V20.S4, V0.S4
	VFMLA  V17.S4, V21.S4, V1.S4
	VFMLA  V18.S4, V22.S4, V2.S4
	VFMLA  V19.S4, V23.S4, V3.S4
	SUBS   $1, R0
	BNE    loopdot

donedot:
	VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R3)
	RET

// func add16(n int, y, x *float32)
//
// y[i] += x[i] for n elements, n a multiple of 16: a fused multiply-add
// by one, which rounds x+y once as an addition does (Go's assembler has
// no vector FADD).
TEXT ·add16(SB), NOSPLIT, $0-24
	MOVD  n+0(FP), R0
	MOVD  y+8(FP), R1
	MOVD  x+16(FP), R2
	FMOVS $(1.0), F31
	VDUP  V31.S[0], V31.S4
	LSR   $4, R0
	CBZ   R0, doneadd

loopadd:
	VLD1.P 64(R2), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1   (R1), [V0.S4, V1.S4, V2.S4, V3.S4]
	VFMLA  V16.S4, V31.S4, V0.S4
	VFMLA  V17.S4, V31.S4, V1.S4
	VFMLA  V18.S4, V31.S4, V2.S4
	VFMLA  V19.S4, V31.S4, V3.S4
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R1)
	SUBS   $1, R0
	BNE    loopadd

doneadd:
	RET

// func transpose16(k int, w *float32, wstride uintptr, dst *float32)
//
// dst[q·16+c] = w[c·wstride bytes + q] for the 16 rows c of w and q < k,
// k a multiple of 4: four rows at a time, four steps of each loaded and
// transposed in registers (TRN1 and TRN2 on lanes, then on halves), each
// step's four values stored into its 16-float row of dst.
TEXT ·transpose16(SB), NOSPLIT, $0-32
	MOVD k+0(FP), R0
	MOVD w+8(FP), R1
	MOVD wstride+16(FP), R2
	MOVD dst+24(FP), R3
	LSR  $2, R0
	CBZ  R0, donetr
	MOVD $64, R9
	MOVD $4, R8

group:
	MOVD R1, R10
	ADD  R2, R10, R11
	ADD  R2, R11, R12
	ADD  R2, R12, R13
	MOVD R3, R14
	MOVD R0, R15

steps:
	VLD1.P 16(R10), [V0.S4]
	VLD1.P 16(R11), [V1.S4]
	VLD1.P 16(R12), [V2.S4]
	VLD1.P 16(R13), [V3.S4]
	VTRN1  V1.S4, V0.S4, V4.S4   // r0[0] r1[0] r0[2] r1[2]
	VTRN2  V1.S4, V0.S4, V5.S4   // r0[1] r1[1] r0[3] r1[3]
	VTRN1  V3.S4, V2.S4, V6.S4   // r2[0] r3[0] r2[2] r3[2]
	VTRN2  V3.S4, V2.S4, V7.S4   // r2[1] r3[1] r2[3] r3[3]
	VTRN1  V6.D2, V4.D2, V16.D2  // step 0 of the four rows
	VTRN1  V7.D2, V5.D2, V17.D2  // step 1
	VTRN2  V6.D2, V4.D2, V18.D2  // step 2
	VTRN2  V7.D2, V5.D2, V19.D2  // step 3
	VST1.P [V16.S4], (R14)(R9)
	VST1.P [V17.S4], (R14)(R9)
	VST1.P [V18.S4], (R14)(R9)
	VST1.P [V19.S4], (R14)(R9)
	SUBS   $1, R15
	BNE    steps

	ADD  R2<<2, R1
	ADD  $16, R3
	SUBS $1, R8
	BNE  group

donetr:
	RET
