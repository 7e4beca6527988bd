//go:build cgo

package main

import (
	"sync"
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// MPICH's predefined datatypes are builtin handles 0x4c00SSII (SS the size
// in bytes, II an index) and the pair types 0x8c00000N; each maps to the
// adimpi type of the same C layout on x86-64 Linux (LP64: long is 8 bytes,
// char is signed).
var builtinTypes = func() (m [0x50]*datatype.Type) {
	for idx, t := range map[int]*datatype.Type{
		0x01: datatype.Int8,    // MPI_CHAR
		0x18: datatype.Int8,    // MPI_SIGNED_CHAR
		0x02: datatype.Uint8,   // MPI_UNSIGNED_CHAR
		0x0d: datatype.Byte,    // MPI_BYTE
		0x0e: datatype.Int32,   // MPI_WCHAR
		0x03: datatype.Int16,   // MPI_SHORT
		0x04: datatype.Uint16,  // MPI_UNSIGNED_SHORT
		0x05: datatype.Int32,   // MPI_INT
		0x06: datatype.Uint32,  // MPI_UNSIGNED
		0x07: datatype.Int64,   // MPI_LONG
		0x08: datatype.Uint64,  // MPI_UNSIGNED_LONG
		0x0a: datatype.Float32, // MPI_FLOAT
		0x0b: datatype.Float64, // MPI_DOUBLE
		0x09: datatype.Int64,   // MPI_LONG_LONG_INT
		0x19: datatype.Uint64,  // MPI_UNSIGNED_LONG_LONG
		0x0f: datatype.Packed,  // MPI_PACKED
		0x16: datatype.Int32Int32,
		0x1e: datatype.Complex64,  // MPI_COMPLEX
		0x22: datatype.Complex128, // MPI_DOUBLE_COMPLEX
		0x1d: datatype.Int32,      // MPI_LOGICAL
		0x1c: datatype.Float32,    // MPI_REAL
		0x1f: datatype.Float64,    // MPI_DOUBLE_PRECISION
		0x1b: datatype.Int32,      // MPI_INTEGER
		0x20: datatype.Int32Int32, // MPI_2INTEGER
		0x1a: datatype.Int8,       // MPI_CHARACTER
		0x27: datatype.Float32,    // MPI_REAL4
		0x29: datatype.Float64,    // MPI_REAL8
		0x28: datatype.Complex64,  // MPI_COMPLEX8
		0x2a: datatype.Complex128, // MPI_COMPLEX16
		0x2d: datatype.Int8,       // MPI_INTEGER1
		0x2f: datatype.Int16,      // MPI_INTEGER2
		0x30: datatype.Int32,      // MPI_INTEGER4
		0x31: datatype.Int64,      // MPI_INTEGER8
		0x37: datatype.Int8,       // MPI_INT8_T
		0x38: datatype.Int16,      // MPI_INT16_T
		0x39: datatype.Int32,      // MPI_INT32_T
		0x3a: datatype.Int64,      // MPI_INT64_T
		0x3b: datatype.Uint8,      // MPI_UINT8_T
		0x3c: datatype.Uint16,     // MPI_UINT16_T
		0x3d: datatype.Uint32,     // MPI_UINT32_T
		0x3e: datatype.Uint64,     // MPI_UINT64_T
		0x3f: datatype.Uint8,      // MPI_C_BOOL
		0x40: datatype.Complex64,  // MPI_C_FLOAT_COMPLEX
		0x41: datatype.Complex128, // MPI_C_DOUBLE_COMPLEX
		0x43: datatype.Int64,      // MPI_AINT
		0x44: datatype.Int64,      // MPI_OFFSET
		0x45: datatype.Int64,      // MPI_COUNT
		0x33: datatype.Uint8,      // MPI_CXX_BOOL
		0x34: datatype.Complex64,  // MPI_CXX_FLOAT_COMPLEX
		0x35: datatype.Complex128, // MPI_CXX_DOUBLE_COMPLEX
	} {
		m[idx] = t
	}
	return m
}()

// builtinNames are the MPI names of the predefined handles, for messages
// and MPI_Type_get_name.
var builtinNames = map[uint32]string{
	0x4c000101: "MPI_CHAR", 0x4c000118: "MPI_SIGNED_CHAR", 0x4c000102: "MPI_UNSIGNED_CHAR",
	0x4c00010d: "MPI_BYTE", 0x4c00040e: "MPI_WCHAR", 0x4c000203: "MPI_SHORT",
	0x4c000204: "MPI_UNSIGNED_SHORT", 0x4c000405: "MPI_INT", 0x4c000406: "MPI_UNSIGNED",
	0x4c000807: "MPI_LONG", 0x4c000808: "MPI_UNSIGNED_LONG", 0x4c00040a: "MPI_FLOAT",
	0x4c00080b: "MPI_DOUBLE", 0x4c00100c: "MPI_LONG_DOUBLE", 0x4c000809: "MPI_LONG_LONG_INT",
	0x4c000819: "MPI_UNSIGNED_LONG_LONG", 0x4c00010f: "MPI_PACKED", 0x4c000010: "MPI_LB",
	0x4c000011: "MPI_UB", 0x4c000816: "MPI_2INT", 0x8c000000: "MPI_FLOAT_INT",
	0x8c000001: "MPI_DOUBLE_INT", 0x8c000002: "MPI_LONG_INT", 0x8c000003: "MPI_SHORT_INT",
	0x8c000004: "MPI_LONG_DOUBLE_INT", 0x4c00103d: "MPI_C_LONG_DOUBLE_COMPLEX",
}

var pairTypes = [...]*datatype.Type{datatype.Float32Int32, datatype.Float64Int32, datatype.Int64Int32, datatype.Int16Int32, nil}

// user datatypes: MPICH's own direct datatype handles start with the pair
// types, so user types are indirect handles.
var types = newTable[*datatype.Type](kindIndirect | objDatatype)

// typeHandles maps every type this layer has seen to its handle, for user
// operations and MPI_Type_get_contents.
var typeHandles sync.Map // *datatype.Type -> int32

func init() {
	for u := range builtinNames {
		h := int32(u)
		if t, err := typeOf("", h); err == nil {
			if _, dup := typeHandles.Load(t); !dup {
				typeHandles.Store(t, h)
			}
		}
	}
	// The usual C names win for the types several handles share.
	for _, h := range []int32{0x4c000405, 0x4c000807, 0x4c00080b, 0x4c00040a, 0x4c000101, 0x4c00010d, 0x4c000816} {
		t, _ := typeOf("", h)
		typeHandles.Store(t, h)
	}
}

// typeOf decodes a datatype handle.
func typeOf(fn string, h int32) (*datatype.Type, error) {
	u := uint32(h)
	switch {
	case u&^0xffff == kindBuiltin|objDatatype:
		if i := u & 0xff; i < uint32(len(builtinTypes)) && builtinTypes[i] != nil {
			return builtinTypes[i], nil
		}
		if n, ok := builtinNames[uint32(h)]; ok {
			return nil, newErr(mpi.ErrType, fn, "%s is not supported by adimpi (no Go type has its layout)", n)
		}
	case u&^0xff == kindDirect|objDatatype:
		if i := u & 0xff; i < uint32(len(pairTypes)) && pairTypes[i] != nil {
			return pairTypes[i], nil
		}
		if n, ok := builtinNames[uint32(h)]; ok {
			return nil, newErr(mpi.ErrType, fn, "%s is not supported by adimpi", n)
		}
	case h == hDatatypeNull:
		return nil, newErr(mpi.ErrType, fn, "datatype is MPI_DATATYPE_NULL")
	}
	if t, ok := types.get(h); ok {
		return t, nil
	}
	return nil, newErr(mpi.ErrType, fn, "invalid datatype handle %#x", u)
}

// newType registers a derived type and returns its handle.
func newType(t *datatype.Type) int32 {
	h := types.add(t)
	typeHandles.Store(t, h)
	return h
}

// typeHandle is the handle of a type this layer has given out.
func typeHandle(t *datatype.Type) int32 {
	if v, ok := typeHandles.Load(t); ok {
		return v.(int32)
	}
	return newType(t)
}

// inPlace is MPI_IN_PLACE, (void *)-1.
var inPlace = addrPointer(^uintptr(0))

// buf describes count elements of t at the C address p as a Buffer, under
// the memory rule of datatype.Type: the slice starts at the lower of the
// origin and the lowest data byte. An address of MPI_BOTTOM (NULL) with
// absolute displacements is rebased onto the type's first data byte.
func buf(fn string, p unsafe.Pointer, count int, t *datatype.Type) (mpi.Buffer, error) {
	if count <= 0 || t.Size() == 0 {
		return mpi.Typed(nil, count, t), nil
	}
	if t.Contiguous() && t.TrueLB() == 0 {
		if p == nil {
			return mpi.Buffer{}, newErr(mpi.ErrBuffer, fn, "buffer is NULL for %d elements of %s", count, t)
		}
		return mpi.Typed(unsafe.Slice((*byte)(p), count*t.Size()), count, t), nil
	}
	if p == nil {
		return bottom(fn, count, t)
	}
	lo := min(0, t.TrueLB())
	return mpi.Typed(unsafe.Slice((*byte)(unsafe.Add(p, lo)), t.Span(count)), count, t), nil
}

// bottom describes a buffer at MPI_BOTTOM: t's displacements are absolute
// addresses. It wraps t in a struct type displaced by minus its lowest
// address, so that the buffer's origin is that address.
func bottom(fn string, count int, t *datatype.Type) (mpi.Buffer, error) {
	lo := t.TrueLB()
	if lo <= 0 {
		return mpi.Buffer{}, newErr(mpi.ErrBuffer, fn, "buffer is MPI_BOTTOM but %s's displacements are not addresses", t)
	}
	v, ok := bottomTypes.Load(t)
	if !ok {
		s, err := datatype.Struct([]int{1}, []int{-lo}, []*datatype.Type{t})
		if err == nil {
			err = s.Commit()
		}
		if err != nil {
			return mpi.Buffer{}, newErr(mpi.ErrType, fn, "rebasing %s onto MPI_BOTTOM: %v", t, err)
		}
		v, _ = bottomTypes.LoadOrStore(t, s)
	}
	s := v.(*datatype.Type)
	p := addrPointer(uintptr(lo))
	return mpi.Typed(unsafe.Slice((*byte)(p), s.Span(count)), count, s), nil
}

var bottomTypes sync.Map // *datatype.Type -> its MPI_BOTTOM rebased form

// addrPointer turns an address that a C program obtained from
// MPI_Get_address back into a pointer.
func addrPointer(a uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a))
}

// sendBuf is buf for a collective's send buffer, recognising MPI_IN_PLACE.
func sendBuf(fn string, p unsafe.Pointer, count int, dt int32) (mpi.Buffer, error) {
	if p == inPlace {
		return mpi.InPlaceBuf, nil
	}
	t, err := typeOf(fn, dt)
	if err != nil {
		return mpi.Buffer{}, err
	}
	return buf(fn, p, count, t)
}

// inBuf is buf recognising MPI_IN_PLACE.
func inBuf(fn string, p unsafe.Pointer, count int, t *datatype.Type) (mpi.Buffer, error) {
	if p == inPlace {
		return mpi.InPlaceBuf, nil
	}
	return buf(fn, p, count, t)
}

// optBuf is buf for an argument that is significant only at some ranks
// (significant false): there a bad handle or NULL is no error.
func optBuf(fn string, p unsafe.Pointer, count int, dt int32, significant bool) (mpi.Buffer, error) {
	if !significant {
		return mpi.Typed(nil, 0, datatype.Byte), nil
	}
	return sendBuf(fn, p, count, dt)
}

var typeNames sync.Map // *datatype.Type -> name set by MPI_Type_set_name
