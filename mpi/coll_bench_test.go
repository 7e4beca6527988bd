package mpi_test

import (
	"testing"

	"github.com/adimpi/adimpi/mpi"
)

// BenchmarkSelfAllreduce8B is the core's own cost of a small Allreduce on
// MPI_COMM_WORLD, without a second process (argument checks, the plan,
// the board or message path, the fold).
func BenchmarkSelfAllreduce8B(b *testing.B) {
	w := mpi.World()
	in, out := []float64{1}, []float64{0}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := mpi.Allreduce(w, in, out, mpi.Sum); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSelfBarrier is the core's own cost of MPI_Barrier on
// MPI_COMM_WORLD, without a second process.
func BenchmarkSelfBarrier(b *testing.B) {
	w := mpi.World()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := mpi.Barrier(w); err != nil {
			b.Fatal(err)
		}
	}
}
