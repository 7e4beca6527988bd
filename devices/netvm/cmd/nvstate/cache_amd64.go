package main

import "unsafe"

// hasFlush reports whether flush evicts lines (CPUID 7:EBX bit 23, CLFLUSHOPT).
var hasFlush = cpuid7ebx()&(1<<23) != 0

// hasPrefetchW reports whether prefetchW prefetches (CPUID 0x80000001:ECX bit 8, PREFETCHW).
var hasPrefetchW = cpuidExt1ecx()&(1<<8) != 0

// hasPrefetchNTA reports whether prefetchNTA prefetches (every amd64 CPU has SSE's PREFETCHNTA).
const hasPrefetchNTA = true

// flushLines runs CLFLUSHOPT on n lines from p+off (off ≤ 0 aligns p down).
//
//go:noescape
func flushLines(p unsafe.Pointer, n, off uintptr)

// prefetchLines runs PREFETCHW on n lines from p+off.
//
//go:noescape
func prefetchLines(p unsafe.Pointer, n, off uintptr)

// prefetchNTALines runs PREFETCHNTA on n lines from p+off.
//
//go:noescape
func prefetchNTALines(p unsafe.Pointer, n, off uintptr)

func cpuid7ebx() uint32
func cpuidExt1ecx() uint32
