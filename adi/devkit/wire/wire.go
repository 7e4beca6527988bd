// Package wire names the fields of the headers the devices lay out in
// shared memory: a field is its byte offset, typed by its width, so that
// code reads hdr.Get(b) instead of *(*uint32)(unsafe.Pointer(&b[12])).
// Fields are in the machine's byte order (every process of a job shares
// the machine), and cost what the casts cost: one load or store.
package wire

import (
	"sync/atomic"
	"unsafe"
)

// U16 is a 16-bit field at a byte offset.
type U16 int

// U32 is a 32-bit field at a byte offset.
type U32 int

// I32 is a signed 32-bit field at a byte offset.
type I32 int

// U64 is a 64-bit field at a byte offset.
type U64 int

// Get reads the field of b.
func (f U16) Get(b []byte) uint16 { _ = b[f+1]; return *(*uint16)(unsafe.Pointer(&b[f])) }

// Set writes the field of b.
func (f U16) Set(b []byte, v uint16) { _ = b[f+1]; *(*uint16)(unsafe.Pointer(&b[f])) = v }

// Get reads the field of b.
func (f U32) Get(b []byte) uint32 { return *f.Ptr(b) }

// Set writes the field of b.
func (f U32) Set(b []byte, v uint32) { *f.Ptr(b) = v }

// Load reads the field of b atomically.
func (f U32) Load(b []byte) uint32 { return atomic.LoadUint32(f.Ptr(b)) }

// Store writes the field of b atomically (a release: writes before it are
// seen by a reader that loads the value).
func (f U32) Store(b []byte, v uint32) { atomic.StoreUint32(f.Ptr(b), v) }

// Ptr is the field's address, for atomic use; b must hold the whole field.
func (f U32) Ptr(b []byte) *uint32 { _ = b[f+3]; return (*uint32)(unsafe.Pointer(&b[f])) }

// Get reads the field of b.
func (f I32) Get(b []byte) int32 { _ = b[f+3]; return *(*int32)(unsafe.Pointer(&b[f])) }

// Set writes the field of b.
func (f I32) Set(b []byte, v int32) { _ = b[f+3]; *(*int32)(unsafe.Pointer(&b[f])) = v }

// Get reads the field of b.
func (f U64) Get(b []byte) uint64 { return *f.Ptr(b) }

// Set writes the field of b.
func (f U64) Set(b []byte, v uint64) { *f.Ptr(b) = v }

// Load reads the field of b atomically.
func (f U64) Load(b []byte) uint64 { return atomic.LoadUint64(f.Ptr(b)) }

// Store writes the field of b atomically.
func (f U64) Store(b []byte, v uint64) { atomic.StoreUint64(f.Ptr(b), v) }

// Ptr is the field's address, for atomic use; b must hold the whole field.
func (f U64) Ptr(b []byte) *uint64 { _ = b[f+7]; return (*uint64)(unsafe.Pointer(&b[f])) }
