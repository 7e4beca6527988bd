// Package nt holds the cache-control copies that netvm's eager ring may
// use: copies with non-temporal stores (the written lines go to memory and
// leave every cache, so a store never waits for another core to give a
// line up), cache-line flushes and prefetches for ownership. On other
// architectures than amd64 they fall back to plain copies and do nothing.
package nt

import "unsafe"

// lineSize is the cache line size the copies align to.
const lineSize = 64

// Copy copies src into dst (min of both lengths) with non-temporal stores
// for every whole cache line of dst, plain stores for the partial lines at
// either end, and returns the bytes copied. The stores are weakly ordered:
// call Fence before publishing the data to another core.
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if !HasCopy || n < 2*lineSize {
		return copy(dst, src[:n])
	}
	head := int(-uintptr(unsafe.Pointer(&dst[0])) & (lineSize - 1))
	copy(dst[:head], src)
	body := (n - head) &^ (lineSize - 1)
	copyNT(unsafe.Pointer(&dst[head]), unsafe.Pointer(&src[head]), uintptr(body))
	copy(dst[head+body:n], src[head+body:n])
	return n
}

// Fence orders the non-temporal stores made so far before every later
// store (SFENCE), so that a flag stored after it publishes them.
func Fence() {
	if HasCopy {
		sfence()
	}
}

// Flush evicts the cache lines that b touches from every cache in the
// machine (CLFLUSHOPT when the CPU has it, else nothing). The flushes are
// weakly ordered; Fence orders them.
func Flush(b []byte) {
	if HasFlush && len(b) > 0 {
		flushLines(lines(b))
	}
}

// PrefetchW asks for the cache lines that b touches in the modified state
// (PREFETCHW when the CPU has it, else nothing), so that later stores to
// them do not each wait for another core to give the line up.
func PrefetchW(b []byte) {
	if HasPrefetchW && len(b) > 0 {
		prefetchLines(lines(b))
	}
}

// PrefetchNTA asks for the cache lines that b touches with the
// non-temporal hint (PREFETCHNTA), for a read that should leave as little
// of them as possible in this core's caches.
func PrefetchNTA(b []byte) {
	if HasCopy && len(b) > 0 {
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
