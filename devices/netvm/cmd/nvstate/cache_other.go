//go:build !amd64

package main

import "unsafe"

// The cache-control instructions are amd64's; elsewhere the routines do nothing.
const (
	hasFlush       = false
	hasPrefetchW   = false
	hasPrefetchNTA = false
)

func flushLines(p unsafe.Pointer, n, off uintptr)       {}
func prefetchLines(p unsafe.Pointer, n, off uintptr)    {}
func prefetchNTALines(p unsafe.Pointer, n, off uintptr) {}
