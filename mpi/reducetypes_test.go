package mpi_test

import (
	"errors"
	"testing"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// TestReduceLocalTypes: Minloc and Maxloc on the pair types, predefined
// operations on a strided vector of one basic type (gaps untouched), and a
// user operation on a padded struct, which sees its operands in the
// struct's layout.
func TestReduceLocalTypes(t *testing.T) {
	type pair struct {
		V float32
		I int32
	}
	in := []pair{{1, 5}, {3, 1}, {2, 2}}
	inout := []pair{{1, 2}, {2, 0}, {4, 9}}
	a, _ := mpi.TypedSlice(in, datatype.Float32Int32)
	b, _ := mpi.TypedSlice(inout, datatype.Float32Int32)
	if err := mpi.ReduceLocalBuf(a, b, mpi.Minloc); err != nil {
		t.Fatal(err)
	}
	if want := []pair{{1, 2}, {2, 0}, {2, 2}}; inout[0] != want[0] || inout[1] != want[1] || inout[2] != want[2] {
		t.Fatalf("Minloc of MPI_FLOAT_INT: %v, want %v", inout, want)
	}

	vec, _ := datatype.Vector(3, 1, 2, datatype.Int32)
	if err := vec.Commit(); err != nil {
		t.Fatal(err)
	}
	x, y := []int32{1, -1, 2, -1, 3}, []int32{10, 77, 20, 77, 30}
	if err := mpi.ReduceLocalBuf(mpi.Typed(int32Bytes(x), 1, vec), mpi.Typed(int32Bytes(y), 1, vec), mpi.Sum); err != nil {
		t.Fatal(err)
	}
	if want := []int32{11, 77, 22, 77, 33}; !equal(y, want) {
		t.Fatalf("Sum on a vector of int32: %v, want %v", y, want)
	}

	type padded struct {
		A int8
		B int64
	}
	pt, _ := datatype.FromStruct(padded{})
	var seen []padded
	op, err := mpi.NewOpFor(pt, func(in, inout []padded) {
		seen = append(seen, in...)
		for i := range inout {
			inout[i].B += in[i].B
			inout[i].A = max(inout[i].A, in[i].A)
		}
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	p, q := []padded{{3, 100}, {1, 200}}, []padded{{2, 1}, {5, 2}}
	pb, _ := mpi.TypedSlice(p, pt)
	qb, _ := mpi.TypedSlice(q, pt)
	if err := mpi.ReduceLocalBuf(pb, qb, op); err != nil {
		t.Fatal(err)
	}
	if q[0] != (padded{3, 101}) || q[1] != (padded{5, 202}) || len(seen) != 2 || seen[1] != p[1] {
		t.Fatalf("user op on a padded struct: inout %v, the op saw %v", q, seen)
	}
	if err := mpi.ReduceLocalBuf(pb, qb, mpi.Sum); !errors.Is(err, mpi.ErrOp) {
		t.Fatalf("Sum on a struct of int8 and int64: %v, want ErrOp", err)
	}
}

func int32Bytes(s []int32) []byte {
	b, _ := mpi.TypedSlice(s, datatype.Int32)
	return b.Mem
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
