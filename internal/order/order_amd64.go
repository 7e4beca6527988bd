//go:build amd64 && !race

package order

import "unsafe"

// StoreRelease32 stores v into *p with release semantics: a reader that
// sees v with atomic.LoadUint32 sees every store made before it.
//
//go:noescape
func StoreRelease32(p *uint32, v uint32)

// StoreRelease64 is StoreRelease32 for a 64-bit word (p 8-byte aligned).
//
//go:noescape
func StoreRelease64(p *uint64, v uint64)

// PrefetchW starts fetching the cache line at p for writing (exclusive),
// without waiting for it: a later store into the line then finds it owned.
//
//go:noescape
func PrefetchW(p unsafe.Pointer)
