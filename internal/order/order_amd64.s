//go:build amd64 && !race

#include "textflag.h"

// func StoreRelease32(p *uint32, v uint32)
TEXT ·StoreRelease32(SB), NOSPLIT, $0-12
	MOVQ p+0(FP), AX
	MOVL v+8(FP), BX
	MOVL BX, (AX)
	RET

// func StoreRelease64(p *uint64, v uint64)
TEXT ·StoreRelease64(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET

// func PrefetchW(p unsafe.Pointer)
TEXT ·PrefetchW(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	// PREFETCHW (AX): 0F 0D /1, which Go's assembler has no name for.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	RET
