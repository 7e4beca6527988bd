// Package datatype describes the layout of data in memory, as MPI datatypes do.
//
// This package holds the predefined types: one per Go numeric element type,
// plus Byte and Packed. Derived types (vector, indexed, struct, ...) build on
// the same Type and its segment walk, Blocks.
package datatype

import (
	"fmt"
	"reflect"
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
)

// Type is an MPI datatype: a layout of typed elements relative to a buffer's start.
type Type struct {
	name   string
	size   int // bytes of data in one element of this type
	extent int // distance between consecutive elements in a count
	kind   Kind
	gotype reflect.Type
}

// Name is the type's name, e.g. "float64" or "MPI_BYTE".
func (t *Type) Name() string { return t.name }

// Size is the number of data bytes in one element of the type.
func (t *Type) Size() int { return t.size }

// Extent is the span of one element in memory: the stride of a count of them.
func (t *Type) Extent() int { return t.extent }

// Kind reports the element kind of a predefined type.
func (t *Type) Kind() Kind { return t.kind }

// Contiguous reports whether count elements of the type occupy exactly
// count*Size bytes with no gaps, so the buffer can be moved as one block.
func (t *Type) Contiguous() bool { return t.size == t.extent }

// Committed reports whether the type is ready for communication. Predefined
// types always are.
func (t *Type) Committed() bool { return true }

// String is the type's name.
func (t *Type) String() string { return t.name }

// Span is the number of memory bytes that count elements of the type occupy.
func (t *Type) Span(count int) int {
	if count <= 0 {
		return 0
	}
	return (count-1)*t.extent + t.size
}

// Blocks calls fn, in order, with the contiguous pieces of mem that hold the
// packed bytes [off, off+n) of count elements of the type laid out from the
// start of mem. It is the segment walk devices use to move non-contiguous
// data piece by piece; fn's error stops the walk and is returned.
func (t *Type) Blocks(mem []byte, count, off, n int, fn func(piece []byte) error) error {
	if n <= 0 {
		return nil
	}
	if t.Contiguous() {
		return fn(mem[off : off+n])
	}
	for n > 0 {
		e, in := off/t.size, off%t.size
		k := min(t.size-in, n)
		base := e*t.extent + in
		if err := fn(mem[base : base+k]); err != nil {
			return err
		}
		off += k
		n -= k
	}
	return nil
}

func predefined(name string, v any, kind Kind) *Type {
	rt := reflect.TypeOf(v)
	return &Type{name: name, size: int(rt.Size()), extent: int(rt.Size()), kind: kind, gotype: rt}
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
	switch rt.Kind() {
	case reflect.Int:
		return Int
	case reflect.Int8:
		return Int8
	case reflect.Int16:
		return Int16
	case reflect.Int32:
		return Int32
	case reflect.Int64:
		return Int64
	case reflect.Uint:
		return Uint
	case reflect.Uint8:
		return Uint8
	case reflect.Uint16:
		return Uint16
	case reflect.Uint32:
		return Uint32
	case reflect.Uint64:
		return Uint64
	case reflect.Uintptr:
		return Uintptr
	case reflect.Float32:
		return Float32
	case reflect.Float64:
		return Float64
	case reflect.Complex64:
		return Complex64
	case reflect.Complex128:
		return Complex128
	}
	panic(fmt.Sprintf("datatype.Of: %v is not a numeric type", rt))
}
