#include "textflag.h"

// func copyNTSSE2(dst, src unsafe.Pointer, n uintptr)
TEXT ·copyNTSSE2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $6, CX
	JZ   done
loop:
	MOVOU  0(SI), X0
	MOVOU  16(SI), X1
	MOVOU  32(SI), X2
	MOVOU  48(SI), X3
	MOVNTO X0, 0(DI)
	MOVNTO X1, 16(DI)
	MOVNTO X2, 32(DI)
	MOVNTO X3, 48(DI)
	ADDQ   $64, SI
	ADDQ   $64, DI
	DECQ   CX
	JNZ    loop
done:
	RET

// func copyNTAVX2(dst, src unsafe.Pointer, n uintptr)
TEXT ·copyNTAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $7, CX
	JZ   tail
loop:
	VMOVDQU  0(SI), Y0
	VMOVDQU  32(SI), Y1
	VMOVDQU  64(SI), Y2
	VMOVDQU  96(SI), Y3
	VMOVNTDQ Y0, 0(DI)
	VMOVNTDQ Y1, 32(DI)
	VMOVNTDQ Y2, 64(DI)
	VMOVNTDQ Y3, 96(DI)
	ADDQ     $128, SI
	ADDQ     $128, DI
	DECQ     CX
	JNZ      loop
tail:
	MOVQ n+16(FP), CX
	ANDQ $64, CX
	JZ   done
	VMOVDQU  0(SI), Y0
	VMOVDQU  32(SI), Y1
	VMOVNTDQ Y0, 0(DI)
	VMOVNTDQ Y1, 32(DI)
done:
	VZEROUPPER
	RET

// func sfence()
TEXT ·sfence(SB), NOSPLIT, $0-0
	SFENCE
	RET

// func flushLines(p unsafe.Pointer, n, off uintptr)
TEXT ·flushLines(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), AX
	ADDQ off+16(FP), AX
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JZ   done
loop:
	CLFLUSHOPT (AX)
	ADDQ $64, AX
	DECQ CX
	JNZ  loop
done:
	RET

// func prefetchLines(p unsafe.Pointer, n, off uintptr)
TEXT ·prefetchLines(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), AX
	ADDQ off+16(FP), AX
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JZ   done
loop:
	// PREFETCHW (AX)
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	ADDQ $64, AX
	DECQ CX
	JNZ  loop
done:
	RET

// func cpuid7ebx() uint32
TEXT ·cpuid7ebx(SB), NOSPLIT, $0-4
	MOVL $0, AX
	CPUID
	CMPL AX, $7
	JCS  none
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	MOVL BX, ret+0(FP)
	RET
none:
	MOVL $0, ret+0(FP)
	RET

// func cpuidExt1ecx() uint32
TEXT ·cpuidExt1ecx(SB), NOSPLIT, $0-4
	MOVL $0x80000000, AX
	CPUID
	CMPL AX, $0x80000001
	JCS  none
	MOVL $0x80000001, AX
	CPUID
	MOVL CX, ret+0(FP)
	RET
none:
	MOVL $0, ret+0(FP)
	RET

// func prefetchNTALines(p unsafe.Pointer, n, off uintptr)
TEXT ·prefetchNTALines(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), AX
	ADDQ off+16(FP), AX
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JZ   done
loop:
	PREFETCHNTA (AX)
	ADDQ $64, AX
	DECQ CX
	JNZ  loop
done:
	RET
