//go:build cgo

package main

/*
#include <stdint.h>
*/
import "C"

import (
	"sync"
	"sync/atomic"

	"github.com/adimpi/adimpi/mpi"
)

// MPICH's handles are ints: bits 30-31 the kind (builtin, direct, indirect),
// bits 26-29 the object type, the rest an index. The predefined handles
// have fixed values; the library hands out user handles of the kind and
// object type MPICH would, so a program that inspects the bits (or
// compares against the *_NULL values) sees what it expects.
const (
	kindBuiltin  = 0x40000000
	kindDirect   = 0x80000000
	kindIndirect = 0xc0000000
	kindMask     = 0xc0000000

	objComm       = 0x1 << 26
	objGroup      = 0x2 << 26
	objDatatype   = 0x3 << 26
	objErrhandler = 0x5 << 26
	objOp         = 0x6 << 26
	objInfo       = 0x7 << 26
	objKeyval     = 0x9 << 26
	objRequest    = 0xb << 26
	objMask       = 0xf << 26

	indexMask = 0x03ffffff
)

// The predefined handles this layer decodes by value (from MPICH's mpi.h).
const (
	hCommNull       = int32(0x04000000)
	hCommWorld      = int32(0x44000000)
	hCommSelf       = int32(0x44000001)
	hGroupNull      = int32(0x08000000)
	hGroupEmpty     = int32(0x48000000)
	hDatatypeNull   = int32(0x0c000000)
	hOpNull         = int32(0x18000000)
	hRequestNull    = int32(0x2c000000)
	hMessageNull    = int32(0x2c000000)
	hMessageNoProc  = int32(0x6c000000)
	hErrhandlerNull = int32(0x14000000)
	hErrorsFatal    = int32(0x54000000)
	hErrorsReturn   = int32(0x54000001)
	hErrorsThrow    = int32(0x54000002)
	hErrorsAbort    = int32(0x54000003)
	hInfoNull       = int32(0x1c000000)
	hInfoEnv        = int32(0x5c000001)
	hKeyvalInvalid  = int32(0x24000000)
)

// table maps user handles of one object type to Go values. Handles are
// base|index; freed indices are reused, so a steady program allocates
// nothing here after warming up.
type table[T any] struct {
	mu   sync.Mutex
	base uint32
	objs []T
	used []bool
	free []int32
	live atomic.Int32 // handles in use (the C fast path's gate counts requests)
}

func newTable[T any](base uint32) *table[T] { return &table[T]{base: base} }

// add stores v and returns its new handle.
func (t *table[T]) add(v T) int32 {
	t.mu.Lock()
	var i int32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
		t.objs[i], t.used[i] = v, true
	} else {
		i = int32(len(t.objs))
		t.objs = append(t.objs, v)
		t.used = append(t.used, true)
	}
	t.live.Add(1)
	t.mu.Unlock()
	return int32(t.base | uint32(i))
}

// get returns the value behind handle h, if h is one of this table's live
// handles.
func (t *table[T]) get(h int32) (T, bool) {
	var zero T
	if uint32(h)&^indexMask != t.base {
		return zero, false
	}
	i := int(uint32(h) & indexMask)
	t.mu.Lock()
	if i >= len(t.objs) || !t.used[i] {
		t.mu.Unlock()
		return zero, false
	}
	v := t.objs[i]
	t.mu.Unlock()
	return v, true
}

// set replaces the value behind a live handle.
func (t *table[T]) set(h int32, v T) {
	i := int(uint32(h) & indexMask)
	t.mu.Lock()
	if i < len(t.objs) && t.used[i] {
		t.objs[i] = v
	}
	t.mu.Unlock()
}

// del frees handle h.
func (t *table[T]) del(h int32) {
	if uint32(h)&^indexMask != t.base {
		return
	}
	i := int32(uint32(h) & indexMask)
	var zero T
	t.mu.Lock()
	if int(i) < len(t.objs) && t.used[i] {
		t.objs[i], t.used[i] = zero, false
		t.free = append(t.free, i)
		t.live.Add(-1)
	}
	t.mu.Unlock()
}

// each calls fn for every live handle and its value.
func (t *table[T]) each(fn func(h int32, v T) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, ok := range t.used {
		if ok && !fn(int32(t.base|uint32(i)), t.objs[i]) {
			return
		}
	}
}

var (
	comms    = newTable[*mpi.Comm](kindDirect | objComm)
	groups   = newTable[*mpi.Group](kindDirect | objGroup)
	ops      = newTable[*mpi.Op](kindDirect | objOp)
	errhs    = newTable[*mpi.Errhandler](kindDirect | objErrhandler)
	infos    = newTable[*mpi.Info](kindDirect | objInfo)
	keyvals  = newTable[*keyval](kindDirect | objKeyval)
	requests = newTable[reqEntry](kindDirect | objRequest)
	messages = newTable[*mpi.Message](kindIndirect | objRequest)
)

// reqEntry is what a request handle stands for.
type reqEntry struct {
	r          *mpi.Request
	persistent bool // Wait/Test leave the handle alive
}

// commOf decodes a communicator handle.
func commOf(fn string, h int32) (*mpi.Comm, error) {
	switch int32(h) {
	case hCommWorld, hCommSelf:
		c := mpi.World()
		if int32(h) == hCommSelf {
			c = mpi.Self()
		}
		if c == nil {
			return nil, newErr(mpi.ErrOther, fn, "MPI is not initialized: call MPI_Init first (or MPI was finalized)")
		}
		return c, nil
	case hCommNull:
		return nil, newErr(mpi.ErrComm, fn, "communicator is MPI_COMM_NULL")
	}
	if c, ok := comms.get(int32(h)); ok {
		return c, nil
	}
	return nil, newErr(mpi.ErrComm, fn, "invalid communicator handle %#x", uint32(h))
}

// commHandle returns the handle of c, giving it one if it has none.
func commHandle(c *mpi.Comm) int32 {
	switch {
	case c == nil:
		return hCommNull
	case c == mpi.World():
		return hCommWorld
	case c == mpi.Self():
		return hCommSelf
	}
	h := int32(0)
	comms.each(func(k int32, v *mpi.Comm) bool {
		if v == c {
			h = k
			return false
		}
		return true
	})
	if h == 0 {
		h = comms.add(c)
	}
	return h
}

// newComm registers a communicator a call created and returns its handle
// (MPI_COMM_NULL for nil: this process is not in it).
func newComm(c *mpi.Comm) int32 {
	if c == nil {
		return hCommNull
	}
	return comms.add(c)
}

// emptyGroup is MPI_GROUP_EMPTY's group, made once MPI is up.
var emptyGroup = sync.OnceValue(func() *mpi.Group {
	g, err := mpi.Self().Group()
	if err != nil {
		return nil
	}
	e, err := g.Excl([]int{0})
	if err != nil {
		return nil
	}
	return e
})

// groupOf decodes a group handle.
func groupOf(fn string, h int32) (*mpi.Group, error) {
	switch int32(h) {
	case hGroupEmpty:
		if g := emptyGroup(); g != nil {
			return g, nil
		}
		return nil, newErr(mpi.ErrGroup, fn, "MPI_GROUP_EMPTY before MPI_Init")
	case hGroupNull:
		return nil, newErr(mpi.ErrGroup, fn, "group is MPI_GROUP_NULL")
	}
	if g, ok := groups.get(int32(h)); ok {
		return g, nil
	}
	return nil, newErr(mpi.ErrGroup, fn, "invalid group handle %#x", uint32(h))
}

// newGroup registers a group and returns its handle; an empty group is
// MPI_GROUP_EMPTY.
func newGroup(g *mpi.Group) int32 {
	if g == nil {
		return hGroupNull
	}
	if g.Size() == 0 {
		return hGroupEmpty
	}
	return groups.add(g)
}

var builtinOps = [...]*mpi.Op{1: mpi.Max, 2: mpi.Min, 3: mpi.Sum, 4: mpi.Prod, 5: mpi.Land, 6: mpi.Band,
	7: mpi.Lor, 8: mpi.Bor, 9: mpi.Lxor, 10: mpi.Bxor, 11: mpi.Minloc, 12: mpi.Maxloc, 13: mpi.Replace, 14: mpi.NoOp}

// opOf decodes an operation handle.
func opOf(fn string, h int32) (*mpi.Op, error) {
	u := uint32(h)
	if u&^0xff == kindBuiltin|objOp {
		if i := int(u & 0xff); i < len(builtinOps) && builtinOps[i] != nil {
			return builtinOps[i], nil
		}
	}
	if o, ok := ops.get(int32(h)); ok {
		return o, nil
	}
	if int32(h) == hOpNull {
		return nil, newErr(mpi.ErrOp, fn, "operation is MPI_OP_NULL")
	}
	return nil, newErr(mpi.ErrOp, fn, "invalid operation handle %#x", u)
}

// errhOf decodes an error handler handle.
func errhOf(fn string, h int32) (*mpi.Errhandler, error) {
	switch h {
	case hErrorsFatal, hErrorsAbort, hErrorsThrow:
		return mpi.ErrorsAreFatal, nil
	case hErrorsReturn:
		return mpi.ErrorsReturn, nil
	}
	if e, ok := errhs.get(h); ok {
		return e, nil
	}
	return nil, newErr(mpi.ErrArg, fn, "invalid error handler handle %#x", uint32(h))
}

// errhHandle is the handle of an error handler.
func errhHandle(e *mpi.Errhandler) int32 {
	switch e {
	case mpi.ErrorsAreFatal:
		return hErrorsFatal
	case mpi.ErrorsReturn, nil:
		return hErrorsReturn
	}
	h := hErrhandlerNull
	errhs.each(func(k int32, v *mpi.Errhandler) bool {
		if v == e {
			h = k
			return false
		}
		return true
	})
	return h
}

// cint is C's int, named for the tests (which cannot import "C").
type cint = C.int
