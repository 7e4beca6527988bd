package mpi_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/adimpi/adimpi/mpi"
)

// These tests run in the singleton process of singleton_test.go's TestMain.

func TestDimsCreate(t *testing.T) {
	for _, c := range []struct {
		n         int
		in, want  []int
		wantError bool
	}{
		{6, []int{0, 0}, []int{3, 2}, false},
		{16, []int{0, 0, 0}, []int{4, 2, 2}, false},
		{7, []int{0}, []int{7}, false},
		{1, []int{0, 0}, []int{1, 1}, false},
		{24, []int{0, 4, 0}, []int{3, 4, 2}, false},
		{12, []int{5, 0}, nil, true},
		{0, []int{0}, nil, true},
	} {
		dims := slices.Clone(c.in)
		err := mpi.DimsCreate(c.n, dims)
		if (err != nil) != c.wantError {
			t.Errorf("DimsCreate(%d, %v): %v", c.n, c.in, err)
			continue
		}
		if !c.wantError && !slices.Equal(dims, c.want) {
			t.Errorf("DimsCreate(%d, %v) = %v, want %v", c.n, c.in, dims, c.want)
		}
	}
}

func TestGroupRanges(t *testing.T) {
	g, err := mpi.World().Group()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.RangeIncl([][3]int{{0, 0, 0}}); !errors.Is(err, mpi.ErrArg) {
		t.Errorf("stride 0: %v", err)
	}
	if _, err := g.RangeIncl([][3]int{{0, 3, 1}}); !errors.Is(err, mpi.ErrRank) {
		t.Errorf("range past the group: %v", err)
	}
	r, err := g.RangeIncl([][3]int{{0, 0, -1}})
	if err != nil || r.Size() != 1 || r.Rank() != 0 {
		t.Errorf("one-element range: %v %v", r, err)
	}
	if _, err := mpi.Union(nil, g); !errors.Is(err, mpi.ErrGroup) {
		t.Errorf("nil group: %v", err)
	}
}

func TestReduceLocalOps(t *testing.T) {
	for _, c := range []struct {
		op         *mpi.Op
		a, b, want []int32
	}{
		{mpi.Sum, []int32{1, 2}, []int32{3, 4}, []int32{4, 6}},
		{mpi.Prod, []int32{2, 3}, []int32{3, 4}, []int32{6, 12}},
		{mpi.Min, []int32{2, 5}, []int32{3, 4}, []int32{2, 4}},
		{mpi.Max, []int32{2, 5}, []int32{3, 4}, []int32{3, 5}},
		{mpi.Land, []int32{0, 5}, []int32{3, 4}, []int32{0, 1}},
		{mpi.Lor, []int32{0, 0}, []int32{3, 0}, []int32{1, 0}},
		{mpi.Lxor, []int32{0, 5}, []int32{3, 4}, []int32{1, 0}},
		{mpi.Band, []int32{6, 5}, []int32{3, 4}, []int32{2, 4}},
		{mpi.Bor, []int32{6, 5}, []int32{3, 4}, []int32{7, 5}},
		{mpi.Bxor, []int32{6, 5}, []int32{3, 4}, []int32{5, 1}},
		{mpi.Replace, []int32{6, 5}, []int32{3, 4}, []int32{3, 4}},
		{mpi.NoOp, []int32{6, 5}, []int32{3, 4}, []int32{6, 5}},
		{mpi.Minloc, []int32{2, 7}, []int32{2, 3}, []int32{2, 3}},
		{mpi.Maxloc, []int32{9, 7}, []int32{2, 3}, []int32{9, 7}},
	} {
		b := slices.Clone(c.b)
		if err := mpi.ReduceLocal(c.a, b, c.op); err != nil {
			t.Errorf("%s: %v", c.op.Name(), err)
			continue
		}
		if !slices.Equal(b, c.want) {
			t.Errorf("%s(%v, %v) = %v, want %v", c.op.Name(), c.a, c.b, b, c.want)
		}
	}
	if err := mpi.ReduceLocal([]float64{1}, []float64{2}, mpi.Band); !errors.Is(err, mpi.ErrOp) {
		t.Errorf("band on float64: %v", err)
	}
	if err := mpi.ReduceLocal([]int{1, 2, 3}, []int{1, 2, 3}, mpi.Minloc); !errors.Is(err, mpi.ErrCount) {
		t.Errorf("minloc with an odd count: %v", err)
	}
	if err := mpi.Sum.Free(); !errors.Is(err, mpi.ErrOp) {
		t.Errorf("freeing Sum: %v", err)
	}
	op := mpi.NewTypedOp(func(in, inout []int) {
		for i := range inout {
			inout[i] = in[i]*10 + inout[i]
		}
	}, false)
	b := []int{2}
	if err := mpi.ReduceLocal([]int{1}, b, op); err != nil || b[0] != 12 {
		t.Errorf("user op: %v %v", b, err)
	}
	if err := op.Free(); err != nil {
		t.Fatal(err)
	}
	if err := mpi.ReduceLocal([]int{1}, b, op); !errors.Is(err, mpi.ErrOp) {
		t.Errorf("freed op: %v", err)
	}
}

// TestSingletonCollectives runs collectives on MPI_COMM_SELF and on
// communicators derived from the singleton world.
func TestSingletonCollectives(t *testing.T) {
	self := mpi.Self()
	out := make([]float64, 3)
	if err := mpi.Allreduce(self, []float64{1, 2, 3}, out, mpi.Sum); err != nil || !slices.Equal(out, []float64{1, 2, 3}) {
		t.Fatalf("allreduce on self: %v %v", out, err)
	}
	d, err := mpi.World().Dup()
	if err != nil {
		t.Fatal(err)
	}
	q, err := mpi.Ibcast(d, out, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := self.Free(); !errors.Is(err, mpi.ErrComm) {
		t.Errorf("freeing self: %v", err)
	}
	if err := d.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := mpi.Ibarrier(d); !errors.Is(err, mpi.ErrComm) {
		t.Errorf("ibarrier on a freed comm: %v", err)
	}
}
