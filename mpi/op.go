package mpi

import (
	"encoding/binary"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
)

// Op is a reduction operation (MPI_Op) for Reduce, Allreduce, Scan and the
// other reducing collectives. The predefined operations are the package
// variables Sum, Prod, ...; NewOp and NewTypedOp make user operations.
//
// An operation combines two operands a (from lower ranks) and b (from higher
// ranks) element by element into a op b. Non-commutative operations are
// always applied in rank order; commutative ones in a fixed order per
// algorithm, so that results are the same from run to run and on every rank.
type Op struct {
	name    string
	code    opCode
	commute bool
	user    func(in, inout Buffer) // inout = in op inout
	typed   *datatype.Type         // NewTypedOp: the only datatype allowed
	freed   bool
	// last is the kernel of the predefined datatype this predefined
	// operation last reduced (kernelFor), which spares a repeated
	// reduction the look-up in kernels.
	last atomic.Pointer[opKernel]
}

// opKernel is a predefined operation's kernel on one datatype.
type opKernel struct {
	t  *datatype.Type
	fn func(in, inout []byte)
}

// kernelFor is builtin(o.code, t), through o.last.
func (o *Op) kernelFor(t *datatype.Type) func(in, inout []byte) {
	if k := o.last.Load(); k != nil && k.t == t {
		return k.fn
	}
	fn := builtin(o.code, t)
	if fn != nil {
		o.last.Store(&opKernel{t, fn})
	}
	return fn
}

type opCode int

const (
	opUser opCode = iota
	opSum
	opProd
	opMin
	opMax
	opLand
	opLor
	opLxor
	opBand
	opBor
	opBxor
	opMinloc
	opMaxloc
	opReplace
	opNoOp
)

// The predefined operations. Sum and Prod take every Numeric type; Min and
// Max every integer and float type; Land, Lor and Lxor (logical: non-zero is
// true, results are 1 or 0) and Band, Bor and Bxor (bitwise) every integer
// type. Minloc and Maxloc take the pair types (datatype.Float64Int32,
// MPI_DOUBLE_INT, and the others: a value and an int32 index), and integer
// and float types, whose buffer they treat as consecutive (value, index)
// pairs of that type, like MPI_2INT or MPI_2DOUBLE_PRECISION: the count must
// then be even. Ties pick the smaller index. A derived datatype made of one
// of these types (datatype.Type.Basic) takes the same operations, element by
// element on that type. Replace (a op b = b: the highest rank's value wins) and NoOp
// (a op b = a: the lowest rank's value stays) take every type.
var (
	Sum     = &Op{name: "MPI_SUM", code: opSum, commute: true}
	Prod    = &Op{name: "MPI_PROD", code: opProd, commute: true}
	Min     = &Op{name: "MPI_MIN", code: opMin, commute: true}
	Max     = &Op{name: "MPI_MAX", code: opMax, commute: true}
	Land    = &Op{name: "MPI_LAND", code: opLand, commute: true}
	Lor     = &Op{name: "MPI_LOR", code: opLor, commute: true}
	Lxor    = &Op{name: "MPI_LXOR", code: opLxor, commute: true}
	Band    = &Op{name: "MPI_BAND", code: opBand, commute: true}
	Bor     = &Op{name: "MPI_BOR", code: opBor, commute: true}
	Bxor    = &Op{name: "MPI_BXOR", code: opBxor, commute: true}
	Minloc  = &Op{name: "MPI_MINLOC", code: opMinloc, commute: true}
	Maxloc  = &Op{name: "MPI_MAXLOC", code: opMaxloc, commute: true}
	Replace = &Op{name: "MPI_REPLACE", code: opReplace}
	NoOp    = &Op{name: "MPI_NO_OP", code: opNoOp}
)

// NewOp makes a user operation (MPI_Op_create). fn must compute
// inout[i] = in[i] op inout[i] for every element, where in holds the operand
// from lower ranks; both buffers hold Count elements of the collective's
// datatype laid out as that datatype says (for a non-contiguous datatype,
// such as a padded Go struct, the data are unpacked into such a layout for
// fn, with zero padding, and only the data are packed back and sent on;
// View turns such a buffer into a slice of a Go type). commute says whether op is commutative; if
// it is not, operands are always combined in rank order.
func NewOp(fn func(in, inout Buffer), commute bool) *Op {
	if fn == nil {
		return nil
	}
	return &Op{name: "user op", user: fn, commute: commute}
}

// NewTypedOp makes a user operation on slices of T: fn must set
// inout[i] = in[i] op inout[i]. Using it with a datatype other than T's is
// an ErrType error in the reducing call.
func NewTypedOp[T Numeric](fn func(in, inout []T), commute bool) *Op {
	if fn == nil {
		return nil
	}
	t := datatype.Of[T]()
	o := &Op{name: "user op", commute: commute}
	o.user = func(in, inout Buffer) {
		fn(asSlice[T](in.Mem[:in.Size()]), asSlice[T](inout.Mem[:inout.Size()]))
	}
	o.code = opUser
	o.typed = t
	return o
}

// Commutative reports whether the operation is commutative (MPI_Op_commutative).
func (o *Op) Commutative() bool { return o != nil && o.commute }

// Name is the operation's MPI name ("user op" for user operations).
func (o *Op) Name() string {
	if o == nil {
		return "MPI_OP_NULL"
	}
	return o.name
}

// Free releases a user operation (MPI_Op_free); it may not be used afterwards.
// Freeing a predefined operation is an ErrOp error.
func (o *Op) Free() error {
	if o == nil || o.freed {
		return errorf(ErrOp, "MPI_Op_free", "operation is nil or already freed")
	}
	if o.code != opUser {
		return errorf(ErrOp, "MPI_Op_free", "%s is predefined", o.name)
	}
	o.freed = true
	return nil
}

func asSlice[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// reducer is a checked (op, datatype) pair: apply(in, inout) sets
// inout = in op inout on packed bytes.
type reducer struct {
	commute bool
	apply   func(in, inout []byte)
}

// reducerFor checks op against datatype t and count, and returns the kernel.
func reducerFor(opname string, o *Op, t *datatype.Type, count int) (reducer, error) {
	if o == nil || o.freed {
		return reducer{}, errorf(ErrOp, opname, "operation is nil (MPI_OP_NULL) or freed")
	}
	if t == nil {
		return reducer{}, errorf(ErrType, opname, "datatype is nil")
	}
	if o.user != nil {
		if o.typed != nil && o.typed != t {
			return reducer{}, errorf(ErrType, opname, "operation is for %s, not %s", o.typed, t)
		}
		return reducer{o.commute, userKernel(o, t)}, nil
	}
	// A predefined operation on a derived type made of one basic type
	// works element by element on that basic type (the packed bytes are
	// consecutive basic elements).
	k := t
	if !t.Predefined() {
		if b := t.Basic(); b != nil && b.Size() > 0 {
			k = b
		}
	}
	if (o.code == opMinloc || o.code == opMaxloc) && k.Kind() != datatype.KindPair && k.Size() > 0 && count*(t.Size()/k.Size())%2 != 0 {
		if k == t {
			return reducer{}, errorf(ErrCount, opname, "%s needs (value, index) pairs: count %d is odd", o.name, count)
		}
		return reducer{}, errorf(ErrCount, opname, "%s needs (value, index) pairs: %d elements of %s hold an odd number of %s", o.name, count, t, k)
	}
	fn := o.kernelFor(k)
	switch {
	case fn == nil && k == t && !t.Predefined():
		return reducer{}, errorf(ErrOp, opname, "%s is not defined for datatype %s, which mixes several basic types", o.name, t)
	case fn == nil && k != t:
		return reducer{}, errorf(ErrOp, opname, "%s is not defined for datatype %s (made of %s)", o.name, t, k)
	case fn == nil:
		return reducer{}, errorf(ErrOp, opname, "%s is not defined for datatype %s", o.name, t)
	}
	return reducer{o.commute, fn}, nil
}

// userKernel applies user operation o to packed bytes of datatype t. A
// contiguous t's packed bytes are its memory layout, so fn sees them as
// they are; any other t's are unpacked into two buffers laid out as t says
// (padding and gaps zero), fn combines those, and the result is packed back:
// only data bytes ever travel.
func userKernel(o *Op, t *datatype.Type) func(in, inout []byte) {
	es := t.Size()
	count := func(b []byte) int {
		if es == 0 {
			return 0
		}
		return len(b) / es
	}
	if t.Contiguous() {
		return func(in, inout []byte) {
			n := count(in)
			o.user(Typed(in, n, t), Typed(inout, n, t))
		}
	}
	return func(in, inout []byte) {
		n := count(in)
		size := max(t.Span(n), n*t.Extent())
		a, b := make([]byte, size), make([]byte, size)
		// The sizes are right by construction: these cannot fail.
		_, _ = datatype.Unpack(in, 0, a, n, t)
		_, _ = datatype.Unpack(inout, 0, b, n, t)
		o.user(Typed(a, n, t), Typed(b, n, t))
		_, _ = datatype.Pack(inout, 0, b, n, t)
	}
}

type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
}

type float interface{ ~float32 | ~float64 }

type ordered interface{ integer | float }

func lift[T any](f func(in, inout []T)) func(in, inout []byte) {
	return func(in, inout []byte) { f(asSlice[T](in), asSlice[T](inout)) }
}

func common[T Numeric](code opCode) func(in, inout []byte) {
	switch code {
	case opSum:
		return lift(func(a, b []T) {
			for i := range b {
				b[i] = a[i] + b[i]
			}
		})
	case opProd:
		return lift(func(a, b []T) {
			for i := range b {
				b[i] = a[i] * b[i]
			}
		})
	case opReplace:
		return func(in, inout []byte) {}
	case opNoOp:
		return func(in, inout []byte) { copy(inout, in) }
	}
	return nil
}

func orderedOps[T ordered](code opCode) func(in, inout []byte) {
	switch code {
	case opMin:
		return lift(func(a, b []T) {
			for i := range b {
				b[i] = min(a[i], b[i])
			}
		})
	case opMax:
		return lift(func(a, b []T) {
			for i := range b {
				b[i] = max(a[i], b[i])
			}
		})
	case opMinloc, opMaxloc:
		less := code == opMinloc
		return lift(func(a, b []T) {
			for i := 0; i+1 < len(b); i += 2 {
				av, ai, bv, bi := a[i], a[i+1], b[i], b[i+1]
				switch {
				case av == bv:
					b[i+1] = min(ai, bi)
				case (av < bv) == less:
					b[i], b[i+1] = av, ai
				}
			}
		})
	}
	return common[T](code)
}

func truth[T integer](v bool) T {
	if v {
		return 1
	}
	return 0
}

func intOps[T integer](code opCode) func(in, inout []byte) {
	switch code {
	case opLand:
		return lift(func(a, b []T) {
			for i := range b {
				b[i] = truth[T](a[i] != 0 && b[i] != 0)
			}
		})
	case opLor:
		return lift(func(a, b []T) {
			for i := range b {
				b[i] = truth[T](a[i] != 0 || b[i] != 0)
			}
		})
	case opLxor:
		return lift(func(a, b []T) {
			for i := range b {
				b[i] = truth[T]((a[i] != 0) != (b[i] != 0))
			}
		})
	case opBand:
		return lift(func(a, b []T) {
			for i := range b {
				b[i] = a[i] & b[i]
			}
		})
	case opBor:
		return lift(func(a, b []T) {
			for i := range b {
				b[i] = a[i] | b[i]
			}
		})
	case opBxor:
		return lift(func(a, b []T) {
			for i := range b {
				b[i] = a[i] ^ b[i]
			}
		})
	}
	return orderedOps[T](code)
}

// builtin returns the kernel of a predefined operation on a predefined
// datatype, or nil if the operation is not defined for it. The kernels are
// made once, when the package loads (kernels), so that a reduction's set-up
// allocates nothing.
func builtin(code opCode, t *datatype.Type) func(in, inout []byte) {
	if k, ok := kernels[t]; ok {
		return k[code]
	}
	if code == opReplace || code == opNoOp {
		return kernels[datatype.Uint8][code]
	}
	return nil
}

// kernels holds every predefined operation's kernel on every predefined
// datatype it is defined for; it is filled at package initialisation and
// only read afterwards.
var kernels = func() map[*datatype.Type]*[opNoOp + 1]func(in, inout []byte) {
	m := map[*datatype.Type]*[opNoOp + 1]func(in, inout []byte){}
	for _, t := range []*datatype.Type{datatype.Int, datatype.Int8, datatype.Int16, datatype.Int32, datatype.Int64,
		datatype.Uint, datatype.Uint8, datatype.Byte, datatype.Uint16, datatype.Uint32, datatype.Uint64, datatype.Uintptr,
		datatype.Float32, datatype.Float64, datatype.Complex64, datatype.Complex128} {
		k := new([opNoOp + 1]func(in, inout []byte))
		for code := opSum; code <= opNoOp; code++ {
			k[code] = withVector(code, t, makeKernel(code, t))
		}
		m[t] = k
	}
	for _, t := range []*datatype.Type{datatype.Float32Int32, datatype.Float64Int32, datatype.Int64Int32,
		datatype.Int32Int32, datatype.Int16Int32} {
		k := new([opNoOp + 1]func(in, inout []byte))
		k[opMinloc], k[opMaxloc] = pairKernel(opMinloc, t), pairKernel(opMaxloc, t)
		k[opReplace], k[opNoOp] = makeKernel(opReplace, t), makeKernel(opNoOp, t)
		m[t] = k
	}
	return m
}()

// pairKernel is Minloc's or Maxloc's kernel on a predefined pair type
// (MPI_DOUBLE_INT, ...), whose packed elements are the value's bytes
// followed by the int32 index, at any alignment: values are read and
// written with encoding/binary rather than through pointers.
func pairKernel(code opCode, t *datatype.Type) func(in, inout []byte) {
	val, _ := t.PairValue()
	switch val {
	case datatype.Float32:
		return pairOps(code, 4, func(b []byte) float32 { return math.Float32frombits(binary.NativeEndian.Uint32(b)) })
	case datatype.Float64:
		return pairOps(code, 8, func(b []byte) float64 { return math.Float64frombits(binary.NativeEndian.Uint64(b)) })
	case datatype.Int64:
		return pairOps(code, 8, func(b []byte) int64 { return int64(binary.NativeEndian.Uint64(b)) })
	case datatype.Int32:
		return pairOps(code, 4, func(b []byte) int32 { return int32(binary.NativeEndian.Uint32(b)) })
	case datatype.Int16:
		return pairOps(code, 2, func(b []byte) int16 { return int16(binary.NativeEndian.Uint16(b)) })
	}
	return nil
}

// pairOps folds packed (value, int32 index) pairs of vs-byte values read
// by get: the smaller (Minloc) or larger (Maxloc) value wins, a tie keeps
// the smaller index.
func pairOps[V ordered](code opCode, vs int, get func([]byte) V) func(in, inout []byte) {
	less := code == opMinloc
	es := vs + 4
	return func(in, inout []byte) {
		for off := 0; off+es <= len(inout); off += es {
			a, b := in[off:off+es], inout[off:off+es]
			av, bv := get(a), get(b)
			ai, bi := int32(binary.NativeEndian.Uint32(a[vs:])), int32(binary.NativeEndian.Uint32(b[vs:]))
			switch {
			case av == bv:
				binary.NativeEndian.PutUint32(b[vs:], uint32(min(ai, bi)))
			case (av < bv) == less:
				copy(b, a)
			}
		}
	}
}

// makeKernel builds the kernel of a predefined operation on a predefined
// datatype (nil if it is not defined for it).
func makeKernel(code opCode, t *datatype.Type) func(in, inout []byte) {
	switch t {
	case datatype.Int:
		return intOps[int](code)
	case datatype.Int8:
		return intOps[int8](code)
	case datatype.Int16:
		return intOps[int16](code)
	case datatype.Int32:
		return intOps[int32](code)
	case datatype.Int64:
		return intOps[int64](code)
	case datatype.Uint:
		return intOps[uint](code)
	case datatype.Uint8, datatype.Byte:
		return intOps[uint8](code)
	case datatype.Uint16:
		return intOps[uint16](code)
	case datatype.Uint32:
		return intOps[uint32](code)
	case datatype.Uint64:
		return intOps[uint64](code)
	case datatype.Uintptr:
		return intOps[uintptr](code)
	case datatype.Float32:
		return orderedOps[float32](code)
	case datatype.Float64:
		return orderedOps[float64](code)
	case datatype.Complex64:
		return common[complex64](code)
	case datatype.Complex128:
		return common[complex128](code)
	}
	if code == opReplace || code == opNoOp {
		return common[uint8](code)
	}
	return nil
}

// ReduceLocalBuf combines in into inout: inout = in op inout
// (MPI_Reduce_local). The buffers must have the same count and datatype.
func ReduceLocalBuf(in, inout Buffer, o *Op) error {
	const op = "MPI_Reduce_local"
	if err := checkBuffer(op, in); err != nil {
		return err
	}
	if err := checkBuffer(op, inout); err != nil {
		return err
	}
	if in.Count != inout.Count || in.Type != inout.Type {
		return errorf(ErrCount, op, "in has %d×%s, inout %d×%s", in.Count, in.Type, inout.Count, inout.Type)
	}
	red, err := reducerFor(op, o, in.Type, in.Count)
	if err != nil {
		return err
	}
	a := packIn(in)
	b, done := packOut(inout, true)
	red.apply(a, b)
	done()
	return nil
}

// ReduceLocal combines in into inout element by element: inout = in op inout.
func ReduceLocal[T Numeric](in, inout []T, o *Op) error {
	return ReduceLocalBuf(Slice(in), Slice(inout), o)
}

// packIn returns the buffer's packed bytes, without copying when it is
// contiguous; the result must not be written.
func packIn(b Buffer) []byte {
	n := b.Size()
	if b.Contiguous() {
		return b.Mem[:n:n]
	}
	out := make([]byte, n)
	b.CopyOut(0, out)
	return out
}

// packOut returns packed working space for the buffer and a function that
// stores it back; with load the space starts with the buffer's contents.
func packOut(b Buffer, load bool) ([]byte, func()) {
	n := b.Size()
	if b.Contiguous() {
		return b.Mem[:n:n], func() {}
	}
	out := make([]byte, n)
	if load {
		b.CopyOut(0, out)
	}
	return out, func() { b.CopyIn(0, out) }
}
