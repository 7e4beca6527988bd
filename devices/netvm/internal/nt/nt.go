// Package nt holds the copy with non-temporal stores that netvm's eager
// ring may use: the written lines go to memory and leave every cache, so a
// store never waits for another core to give a line up. On other
// architectures than amd64 it falls back to a plain copy.
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
