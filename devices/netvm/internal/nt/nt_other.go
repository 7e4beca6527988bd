//go:build !amd64

package nt

import "unsafe"

// HasCopy reports whether Copy uses non-temporal stores (not on this architecture).
var HasCopy = false

func copyNT(dst, src unsafe.Pointer, n uintptr) {}
func sfence()                                   {}
