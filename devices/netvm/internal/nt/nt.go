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
	if !HasFlush || len(b) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	start := p &^ (lineSize - 1)
	flushLines(unsafe.Pointer(&b[0]), uintptr(int(p-start)+len(b)+lineSize-1)/lineSize, start-p)
}

// PrefetchW asks for the cache lines that b touches in the modified state
// (PREFETCHW when the CPU has it, else nothing), so that later stores to
// them do not each wait for another core to give the line up.
func PrefetchW(b []byte) {
	if !HasPrefetchW || len(b) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	start := p &^ (lineSize - 1)
	prefetchLines(unsafe.Pointer(&b[0]), uintptr(int(p-start)+len(b)+lineSize-1)/lineSize, start-p)
}

// PrefetchNTA asks for the cache lines that b touches with the
// non-temporal hint (PREFETCHNTA), for a read that should leave as little
// of them as possible in this core's caches.
func PrefetchNTA(b []byte) {
	if !HasCopy || len(b) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	start := p &^ (lineSize - 1)
	prefetchNTALines(unsafe.Pointer(&b[0]), uintptr(int(p-start)+len(b)+lineSize-1)/lineSize, start-p)
}
