//go:build !amd64

package nt

import "unsafe"

// HasCopy reports whether Copy uses non-temporal stores (not on this architecture).
var HasCopy = false

// HasFlush reports whether Flush evicts lines (not on this architecture).
var HasFlush = false

// HasPrefetchW reports whether PrefetchW prefetches (not on this architecture).
var HasPrefetchW = false

func copyNT(dst, src unsafe.Pointer, n uintptr)         {}
func sfence()                                           {}
func flushLines(p unsafe.Pointer, n, off uintptr)       {}
func prefetchLines(p unsafe.Pointer, n, off uintptr)    {}
func prefetchNTALines(p unsafe.Pointer, n, off uintptr) {}
