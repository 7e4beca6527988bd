package mpi

import (
	"reflect"
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
)

// TypedSlice describes a slice of any Go type T (typically a struct) as a
// buffer of len(s) elements of datatype t, for every *Buf call (SendBuf,
// RecvBuf, BcastBuf, AllreduceBuf, ...), so that a program moves structs
// without package unsafe:
//
//	t, _ := datatype.FromStruct(Particle{})
//	buf, err := mpi.TypedSlice(particles, t)
//	err = mpi.BcastBuf(world, buf, 0)
//
// t must describe one T: its extent must be T's size and its data must lie
// inside one T. T must hold no pointers (nor strings, slices, maps,
// channels, functions or interfaces), since received bytes overwrite it. A
// mismatch is an ErrType error naming the sizes.
func TypedSlice[T any](s []T, t *datatype.Type) (Buffer, error) {
	const op = "TypedSlice"
	rt := reflect.TypeFor[T]()
	if err := fitsGoType(op, rt, t); err != nil {
		return Buffer{}, err
	}
	if len(s) == 0 {
		return Buffer{Count: 0, Type: t}, nil
	}
	mem := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(rt.Size()))
	return Buffer{Mem: mem, Count: len(s), Type: t}, nil
}

// View returns the elements of a buffer as a slice of Go type T, sharing
// its memory: what a user operation (NewOp) does with the buffers it is
// given. b's datatype must describe one T, as TypedSlice requires, and b
// must hold its Count elements.
func View[T any](b Buffer) ([]T, error) {
	const op = "View"
	rt := reflect.TypeFor[T]()
	if err := fitsGoType(op, rt, b.Type); err != nil {
		return nil, err
	}
	if b.Count < 0 {
		return nil, errorf(ErrCount, op, "count %d is negative", b.Count)
	}
	if b.Count == 0 || rt.Size() == 0 {
		return []T{}, nil
	}
	need := b.Count * int(rt.Size())
	if len(b.Mem) < need {
		return nil, errorf(ErrBuffer, op, "buffer of %d bytes is too short for %d elements of %v (%d bytes)", len(b.Mem), b.Count, rt, need)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b.Mem))), b.Count), nil
}

// fitsGoType checks that datatype t describes one value of Go type rt
// laid out in memory: same extent, data inside the value, no pointers.
func fitsGoType(op string, rt reflect.Type, t *datatype.Type) error {
	if t == nil {
		return errorf(ErrType, op, "datatype is nil")
	}
	if hasPointers(rt) {
		return errorf(ErrType, op, "Go type %v holds pointers, which no datatype may describe", rt)
	}
	size := int(rt.Size())
	if t.Extent() != size || t.LB() != 0 {
		return errorf(ErrType, op, "datatype %s has lower bound %d and extent %d, but Go type %v is %d bytes (want lower bound 0 and extent %d)", t, t.LB(), t.Extent(), rt, size, size)
	}
	if t.Size() > 0 && (t.TrueLB() < 0 || t.TrueLB()+t.TrueExtent() > size) {
		return errorf(ErrType, op, "datatype %s has data at bytes [%d, %d), outside Go type %v's %d bytes", t, t.TrueLB(), t.TrueLB()+t.TrueExtent(), rt, size)
	}
	return nil
}

// hasPointers reports whether a value of Go type rt contains a pointer the
// garbage collector follows.
func hasPointers(rt reflect.Type) bool {
	switch rt.Kind() {
	case reflect.Array:
		return rt.Len() > 0 && hasPointers(rt.Elem())
	case reflect.Struct:
		for i := range rt.NumField() {
			if hasPointers(rt.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Pointer, reflect.UnsafePointer, reflect.String, reflect.Slice, reflect.Map,
		reflect.Chan, reflect.Func, reflect.Interface:
		return true
	}
	return false
}

// NewOpFor makes a user operation (MPI_Op_create) on elements of Go type T
// described by datatype t, typically a struct from datatype.FromStruct: fn
// must set inout[i] = in[i] op inout[i] for every i. Padding between fields
// reads as zero and is never sent. Using the operation with a datatype
// other than t is an ErrType error in the reducing call; t not describing
// one T (see TypedSlice) is an ErrType error here.
func NewOpFor[T any](t *datatype.Type, fn func(in, inout []T), commute bool) (*Op, error) {
	const op = "MPI_Op_create"
	if fn == nil {
		return nil, errorf(ErrOp, op, "function is nil")
	}
	if err := fitsGoType(op, reflect.TypeFor[T](), t); err != nil {
		return nil, err
	}
	o := &Op{name: "user op", commute: commute, typed: t}
	o.user = func(in, inout Buffer) {
		// reducerFor admits only t, which View accepts for T.
		a, _ := View[T](in)
		b, _ := View[T](inout)
		fn(a, b)
	}
	return o, nil
}
