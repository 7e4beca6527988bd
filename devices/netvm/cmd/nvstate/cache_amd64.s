#include "textflag.h"

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
