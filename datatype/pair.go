package datatype

import "reflect"

// pair makes the predefined MINLOC/MAXLOC type of a value of type val
// followed by a C int (int32) index, laid out as the C struct
// {val; int} is, padding included.
func pair(name string, val *Type) *Type {
	idx := (val.size + Int32.align - 1) / Int32.align * Int32.align
	s, err := Struct([]int{1, 1}, []int{0, idx}, []*Type{val, Int32})
	if err != nil {
		panic(err)
	}
	t := &Type{name: name, size: s.size, extent: s.extent, kind: KindPair,
		lb: s.lb, ub: s.ub, trueLB: s.trueLB, trueUB: s.trueUB, align: s.align,
		named: true, comb: CombinerNamed, inner: s, pairVal: val, pairIdx: idx}
	t.gotype = reflect.StructOf([]reflect.StructField{
		{Name: "Value", Type: val.gotype}, {Name: "Index", Type: Int32.gotype}})
	return t
}

// The predefined pair types of MPI_MINLOC and MPI_MAXLOC reductions: a value
// and a C int (int32) index, with C struct layout and padding. Their Kind is
// KindPair; PairValue and PairIndex locate the two parts. MPI_LONG_DOUBLE_INT
// has no Go counterpart.
var (
	Float32Int32 = pair("MPI_FLOAT_INT", Float32)  // MPI_FLOAT_INT: float32 at 0, int32 at 4; extent 8
	Float64Int32 = pair("MPI_DOUBLE_INT", Float64) // MPI_DOUBLE_INT: float64 at 0, int32 at 8; extent 16
	Int64Int32   = pair("MPI_LONG_INT", Int64)     // MPI_LONG_INT: int64 at 0, int32 at 8; extent 16
	Int32Int32   = pair("MPI_2INT", Int32)         // MPI_2INT: int32 at 0, int32 at 4; extent 8
	Int16Int32   = pair("MPI_SHORT_INT", Int16)    // MPI_SHORT_INT: int16 at 0, int32 at 4; extent 8
)

// PairValue returns, for a pair type (Kind() == KindPair), the predefined
// type of its value part and that part's byte offset in an element (always
// 0). For other types it returns nil, 0.
func (t *Type) PairValue() (*Type, int) {
	if t.pairVal == nil {
		return nil, 0
	}
	return t.pairVal, 0
}

// PairIndex returns, for a pair type (Kind() == KindPair), the type of its
// index part (Int32, C's int) and that part's byte offset in an element.
// For other types it returns nil, 0.
func (t *Type) PairIndex() (*Type, int) {
	if t.pairVal == nil {
		return nil, 0
	}
	return Int32, t.pairIdx
}
