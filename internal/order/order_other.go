//go:build !amd64 || race

package order

import (
	"sync/atomic"
	"unsafe"
)

// StoreRelease32 stores v into *p with (at least) release semantics.
func StoreRelease32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }

// StoreRelease64 stores v into *p with (at least) release semantics.
func StoreRelease64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

// PrefetchW does nothing here.
func PrefetchW(unsafe.Pointer) {}
