package main

import "unsafe"

// lineSize is the cache line size the line-wise routines step by.
const lineSize = 64

// flush evicts the cache lines that b touches from every cache in the
// machine (CLFLUSHOPT when the CPU has it, else nothing). The flushes are
// weakly ordered; nt.Fence orders them.
func flush(b []byte) {
	if hasFlush && len(b) > 0 {
		flushLines(lines(b))
	}
}

// prefetchW asks for the cache lines that b touches in the modified state
// (PREFETCHW when the CPU has it, else nothing), so that later stores to
// them do not each wait for another core to give the line up.
func prefetchW(b []byte) {
	if hasPrefetchW && len(b) > 0 {
		prefetchLines(lines(b))
	}
}

// prefetchNTA asks for the cache lines that b touches with the
// non-temporal hint (PREFETCHNTA), for a read that should leave as little
// of them as possible in this core's caches.
func prefetchNTA(b []byte) {
	if hasPrefetchNTA && len(b) > 0 {
		prefetchNTALines(lines(b))
	}
}

// lines gives the line-wise routines their arguments for the cache lines
// that b (not empty) touches: b's start, how many lines, and the offset
// from b's start back to the first line's.
func lines(b []byte) (p unsafe.Pointer, n, off uintptr) {
	at := uintptr(unsafe.Pointer(&b[0]))
	start := at &^ (lineSize - 1)
	return unsafe.Pointer(&b[0]), (at - start + uintptr(len(b)) + lineSize - 1) / lineSize, start - at
}
