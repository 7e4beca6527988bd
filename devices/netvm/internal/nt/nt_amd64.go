package nt

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// HasCopy reports whether Copy uses non-temporal stores (every amd64 CPU has SSE2's MOVNTDQ).
var HasCopy = true

var avx2 = cpu.X86.HasAVX2

// copyNT copies n bytes (a multiple of 64) from src to dst (64-byte
// aligned) with non-temporal stores.
func copyNT(dst, src unsafe.Pointer, n uintptr) {
	if avx2 {
		copyNTAVX2(dst, src, n)
		return
	}
	copyNTSSE2(dst, src, n)
}

//go:noescape
func copyNTSSE2(dst, src unsafe.Pointer, n uintptr)

//go:noescape
func copyNTAVX2(dst, src unsafe.Pointer, n uintptr)

func sfence()
