#include "textflag.h"

// Vector Sum kernels: inout[i] += in[i] over n bytes, n a multiple of 128
// (four 32-byte AVX2 registers a pass), unaligned pointers allowed. Each
// element's sum is the scalar sum, in the same operand order (in first,
// which decides the payload of a sum of two NaNs), so results are bit for
// bit those of the Go loops they replace.

#define SUMLOOP(INSN) \
	MOVQ in+0(FP), SI \
	MOVQ inout+8(FP), DI \
	MOVQ n+16(FP), CX \
	TESTQ CX, CX \
	JZ done \
loop: \
	VMOVDQU 0(SI), Y0 \
	VMOVDQU 32(SI), Y1 \
	VMOVDQU 64(SI), Y2 \
	VMOVDQU 96(SI), Y3 \
	INSN 0(DI), Y0, Y0 \
	INSN 32(DI), Y1, Y1 \
	INSN 64(DI), Y2, Y2 \
	INSN 96(DI), Y3, Y3 \
	VMOVDQU Y0, 0(DI) \
	VMOVDQU Y1, 32(DI) \
	VMOVDQU Y2, 64(DI) \
	VMOVDQU Y3, 96(DI) \
	ADDQ $128, SI \
	ADDQ $128, DI \
	SUBQ $128, CX \
	JNZ loop \
	VZEROUPPER \
done: \
	RET

// func sumF64AVX2(in, inout unsafe.Pointer, n int)
TEXT ·sumF64AVX2(SB), NOSPLIT, $0-24
	SUMLOOP(VADDPD)

// func sumF32AVX2(in, inout unsafe.Pointer, n int)
TEXT ·sumF32AVX2(SB), NOSPLIT, $0-24
	SUMLOOP(VADDPS)

// func sumI64AVX2(in, inout unsafe.Pointer, n int)
TEXT ·sumI64AVX2(SB), NOSPLIT, $0-24
	SUMLOOP(VPADDQ)

// func sumI32AVX2(in, inout unsafe.Pointer, n int)
TEXT ·sumI32AVX2(SB), NOSPLIT, $0-24
	SUMLOOP(VPADDD)
