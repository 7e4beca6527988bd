package nt

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// HasCopy reports whether Copy uses non-temporal stores (every amd64 CPU has SSE2's MOVNTDQ).
var HasCopy = true

// HasFlush reports whether Flush evicts lines (CPUID 7:EBX bit 23, CLFLUSHOPT).
var HasFlush = cpuid7ebx()&(1<<23) != 0

// HasPrefetchW reports whether PrefetchW prefetches (CPUID 0x80000001:ECX bit 8, PREFETCHW).
var HasPrefetchW = cpuidExt1ecx()&(1<<8) != 0

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

// flushLines runs CLFLUSHOPT on n lines from p+off (off ≤ 0 aligns p down).
//
//go:noescape
func flushLines(p unsafe.Pointer, n, off uintptr)

// prefetchLines runs PREFETCHW on n lines from p+off.
//
//go:noescape
func prefetchLines(p unsafe.Pointer, n, off uintptr)

func cpuid7ebx() uint32
func cpuidExt1ecx() uint32

// prefetchNTALines runs PREFETCHNTA on n lines from p+off.
//
//go:noescape
func prefetchNTALines(p unsafe.Pointer, n, off uintptr)
