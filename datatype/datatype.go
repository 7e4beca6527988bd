// Package datatype describes the layout of data in memory, as MPI datatypes do.
//
// This package holds the predefined types (one per Go numeric element type,
// Byte, Packed, and the MINLOC/MAXLOC pair types), the constructors of
// derived types (Contiguous, Vector, Hvector, Indexed, Hindexed,
// IndexedBlock, HindexedBlock, Struct, Subarray, Darray, Resized, Dup and
// FromStruct), and the ways to move a typed buffer's data: the segment walk
// Blocks, the resumable iterator Segment, and Pack/Unpack.
//
// Commit compiles a derived type into a compact program of runs (offset,
// block length, stride, count), merging adjacent blocks and folding nested
// regular types, so that moving any window of packed bytes costs a binary
// search to find its start and then one step per contiguous block.
package datatype

import (
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
)

// Kind says what a predefined type's elements are, so that reductions know
// how to combine them.
type Kind int

// The element kinds of predefined types.
const (
	KindNone Kind = iota
	KindInt
	KindUint
	KindFloat
	KindComplex
	KindByte
	KindPair // a MINLOC/MAXLOC (value, int32 index) pair; see PairValue
)

// Type is an MPI datatype: a layout of typed elements relative to a buffer's
// origin. Predefined types are ready for use; derived types, built by the
// constructors (Contiguous, Vector, Struct, ...), must be committed with
// Commit before they describe a buffer in communication, Blocks, Pack or
// Unpack.
//
// Memory rule. A buffer of count elements of a type is a byte slice mem.
// When the type's true lower bound TrueLB is >= 0 (always so for the
// predefined types), mem[0] is the buffer's origin (MPI's buf pointer).
// When TrueLB < 0, data lies below the origin, which a Go slice cannot
// reach, so mem[0] is origin+TrueLB instead: the origin is mem[Origin()],
// with Origin() == max(0, -TrueLB). Element i starts at origin + i*Extent.
// Span(count) is then the exact number of bytes mem must hold.
type Type struct {
	name   string
	size   int // bytes of data in one element of this type
	extent int // distance between consecutive elements in a count (ub - lb)
	kind   Kind
	gotype reflect.Type

	lb, ub         int  // MPI bounds, relative to the origin
	trueLB, trueUB int  // bounds of the data bytes
	align          int  // alignment used to pad Struct extents
	sticky         bool // bounds were set explicitly (Resized): no Struct padding
	named          bool // predefined

	comb  Combiner
	ints  []int
	addrs []int
	types []*Type

	runs  []run // the type map of run-based combiners
	inner *Type // the type whose data this one has (Resized, Dup, Subarray, Darray, pairs)

	pairVal *Type // pair types: the value part, at offset 0
	pairIdx int   // pair types: offset of the int32 index part

	once       sync.Once
	ready      atomic.Bool // compiled and the fields below are set (prog's fast path)
	compiled   *prog
	denseOK    bool // see dense; set with compiled
	denseStart int
	isContig   atomic.Bool // committed (or predefined) and dense from the origin: Contiguous's fast answer
	sig        uint32      // Signature's code; set with compiled
	committed  atomic.Bool
	freed      atomic.Bool
}

// Name is the type's name, e.g. "float64" or "MPI_BYTE".
func (t *Type) Name() string { return t.name }

// Size is the number of data bytes in one element of the type.
func (t *Type) Size() int { return t.size }

// Extent is the span of one element in memory: the stride of a count of
// them, UB()-LB(). It is never negative.
func (t *Type) Extent() int { return t.extent }

// LB is the type's lower bound, relative to the buffer origin.
func (t *Type) LB() int { return t.lb }

// UB is the type's upper bound, LB()+Extent().
func (t *Type) UB() int { return t.ub }

// TrueLB is the offset from the buffer origin of the lowest data byte of one
// element (0 for a type without data), ignoring bounds set by Resized.
func (t *Type) TrueLB() int { return t.trueLB }

// TrueExtent is the distance from the lowest to one past the highest data
// byte of one element.
func (t *Type) TrueExtent() int { return t.trueUB - t.trueLB }

// Origin is the index in a buffer's mem of the buffer origin: 0, or -TrueLB
// when TrueLB is negative (see the memory rule on Type).
func (t *Type) Origin() int { return max(0, -t.trueLB) }

// Kind reports the element kind of a predefined type: KindPair for the
// MINLOC/MAXLOC pair types, KindNone for derived types.
func (t *Type) Kind() Kind { return t.kind }

// Predefined reports whether the type is one of the package's named,
// predefined types, which can be neither committed nor freed.
func (t *Type) Predefined() bool { return t.named }

// Contiguous reports whether count elements of the type occupy exactly
// mem[:count*Size] with no gaps, so the buffer can be moved as one block.
// It is false for uncommitted types.
func (t *Type) Contiguous() bool {
	return t.isContig.Load() || t.contiguousSlow() // inlined: every send asks
}

// contiguousSlow is Contiguous for a type not yet known to be contiguous.
func (t *Type) contiguousSlow() bool {
	if !t.Committed() {
		return false
	}
	start, ok := t.dense()
	if ok && start == 0 {
		t.isContig.Store(true)
		return true
	}
	return false
}

// Committed reports whether the type is ready for communication. Predefined
// types always are; derived types are once Commit has been called.
func (t *Type) Committed() bool { return t.named || t.committed.Load() }

// Usable reports whether the type may be used in communication now:
// committed (predefined types always are) and not freed.
func (t *Type) Usable() bool { return t.named || (t.committed.Load() && !t.freed.Load()) }

// String is the type's name.
func (t *Type) String() string {
	if t == nil {
		return "<nil datatype>"
	}
	return t.name
}

// Span is the number of bytes a buffer's mem must hold for count elements of
// the type, under the memory rule described on Type: from the lower of the
// origin and the lowest data byte up to one past the highest data byte of
// the last element, i.e. (count-1)*Extent + TrueLB + TrueExtent - min(0,
// TrueLB). It is 0 when count <= 0 or the type has no data, and the largest
// int when the result would overflow.
func (t *Type) Span(count int) int {
	if count <= 0 || t.size == 0 {
		return 0
	}
	var c calc
	s := c.add(c.mul(count-1, t.extent), t.trueUB+t.Origin())
	if c.bad {
		return math.MaxInt
	}
	return s
}

// Blocks calls fn, in order, with the contiguous pieces of mem that hold the
// packed bytes [off, off+n) of count elements of the type, laid out in mem
// as the memory rule on Type says (from mem[0] when TrueLB >= 0). It is the
// segment walk devices use to move non-contiguous data piece by piece; fn's
// error stops the walk and is returned.
//
// Blocks returns an ErrType error for an uncommitted type, and an ErrArg
// error when [off, off+n) is not inside [0, count*Size) or mem is shorter
// than Span(count). Finding the first piece takes time logarithmic in the
// number of blocks of the type, whatever off is.
func (t *Type) Blocks(mem []byte, count, off, n int, fn func(piece []byte) error) error {
	if n <= 0 {
		return nil
	}
	if err := t.checkWindow("Blocks", mem, count, off, n); err != nil {
		return err
	}
	if d, ok := t.dense(); ok {
		return fn(mem[d+off : d+off+n])
	}
	return t.walk(mem, off, n, fn)
}

// dense reports whether the data of any count of elements of a committed
// type is one block, and where in mem it starts: the type is one block per
// element and its extent equals its size.
func (t *Type) dense() (start int, ok bool) {
	t.prog()
	return t.denseStart, t.denseOK
}

// checkWindow checks a Blocks-style request.
func (t *Type) checkWindow(op string, mem []byte, count, off, n int) error {
	if t == nil {
		return errorf(ErrType, op, "datatype is nil")
	}
	if !t.Committed() {
		return errorf(ErrType, op, "datatype %s is not committed", t)
	}
	if count < 0 {
		return errorf(ErrCount, op, "count %d is negative", count)
	}
	var c calc
	total := c.mul(count, t.size)
	if c.bad || off < 0 || n < 0 || off > total || n > total-off {
		return errorf(ErrArg, op, "packed bytes [%d, %d+%d) are outside the %d bytes of %d elements of %s", off, off, n, total, count, t)
	}
	if need := t.Span(count); len(mem) < need {
		return errorf(ErrArg, op, "buffer of %d bytes is too short for %d elements of %s (%d bytes)", len(mem), count, t, need)
	}
	return nil
}

// walk is Blocks after the checks, for a non-empty window.
func (t *Type) walk(mem []byte, off, n int, fn func(piece []byte) error) error {
	p := t.prog()
	e, in := off/t.size, off%t.size
	addr := t.Origin() + e*t.extent
	if len(p.segs) == 1 && p.segs[0].sub == nil && p.segs[0].count == 1 {
		// One block per element: pure arithmetic.
		d := p.segs[0].disp
		for n > 0 {
			k := min(t.size-in, n)
			b := addr + d + in
			if err := fn(mem[b : b+k]); err != nil {
				return err
			}
			n -= k
			in = 0
			addr += t.extent
		}
		return nil
	}
	for n > 0 {
		var err error
		if n, err = p.walk(mem, addr, in, n, fn); err != nil {
			return err
		}
		in = 0
		addr += t.extent
	}
	return nil
}

func predefined(name string, v any, kind Kind) *Type {
	rt := reflect.TypeOf(v)
	s := int(rt.Size())
	return &Type{name: name, size: s, extent: s, kind: kind, gotype: rt,
		ub: s, trueUB: s, align: rt.Align(), named: true, comb: CombinerNamed}
}

// The predefined types, one per Go numeric type, plus Byte and Packed.
var (
	Int        = predefined("int", int(0), KindInt)
	Int8       = predefined("int8", int8(0), KindInt)
	Int16      = predefined("int16", int16(0), KindInt)
	Int32      = predefined("int32", int32(0), KindInt)
	Int64      = predefined("int64", int64(0), KindInt)
	Uint       = predefined("uint", uint(0), KindUint)
	Uint8      = predefined("uint8", uint8(0), KindUint)
	Uint16     = predefined("uint16", uint16(0), KindUint)
	Uint32     = predefined("uint32", uint32(0), KindUint)
	Uint64     = predefined("uint64", uint64(0), KindUint)
	Uintptr    = predefined("uintptr", uintptr(0), KindUint)
	Float32    = predefined("float32", float32(0), KindFloat)
	Float64    = predefined("float64", float64(0), KindFloat)
	Complex64  = predefined("complex64", complex64(0), KindComplex)
	Complex128 = predefined("complex128", complex128(0), KindComplex)
	Byte       = predefined("MPI_BYTE", byte(0), KindByte)
	Packed     = predefined("MPI_PACKED", byte(0), KindByte)
)

// Of returns the predefined type of Go's element type T (any type whose
// underlying type is a numeric type). It panics for other types, which the
// mpi package's generic constraints rule out at compile time.
func Of[T any]() *Type {
	var z T
	switch any(z).(type) {
	case float64:
		return Float64
	case int:
		return Int
	case byte:
		return Uint8
	case float32:
		return Float32
	case int32:
		return Int32
	case int64:
		return Int64
	}
	rt := reflect.TypeOf(z)
	if t := ofKind(rt.Kind()); t != nil {
		return t
	}
	panic(fmt.Sprintf("datatype.Of: %v is not a numeric type", rt))
}
