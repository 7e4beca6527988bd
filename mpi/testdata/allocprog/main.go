// Command allocprog measures the heap allocations of the small blocking
// collectives (Allreduce of 8 B, Barrier, Bcast of 8 B, Reduce of 8 B) on
// MPI_COMM_WORLD and on a Dup of it, once each communicator has its board,
// and prints one line per rank and communicator (mpi/alloc_test.go).
package main

import (
	"fmt"
	"log"
	"testing"

	"github.com/adimpi/adimpi/mpi"
)

func main() {
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	w := mpi.World()
	d, err := w.Dup()
	if err != nil {
		log.Fatal(err)
	}
	n, me := w.Size(), w.Rank()
	for _, c := range []*mpi.Comm{w, d} {
		in, out := []float64{float64(me + 1)}, []float64{0}
		var failed error
		keep := func(err error) {
			if err != nil && failed == nil {
				failed = err
			}
		}
		allreduce := testing.AllocsPerRun(200, func() { keep(mpi.Allreduce(c, in, out, mpi.Sum)) })
		if want := float64(n * (n + 1) / 2); out[0] != want {
			log.Fatalf("rank %d: %s: Allreduce gave %v, want %v", me, c.Name(), out[0], want)
		}
		barrier := testing.AllocsPerRun(200, func() { keep(mpi.Barrier(c)) })
		bcast := testing.AllocsPerRun(200, func() { keep(mpi.Bcast(c, out, 0)) })
		reduce := testing.AllocsPerRun(200, func() { keep(mpi.Reduce(c, in, out, mpi.Sum, 0)) })
		if failed != nil {
			log.Fatalf("rank %d: %s: %v", me, c.Name(), failed)
		}
		fmt.Printf("rank %d comm %s allreduce %g barrier %g bcast %g reduce %g\n", me, c.Name(), allreduce, barrier, bcast, reduce)
	}
	if err := mpi.Finalize(); err != nil {
		log.Fatal(err)
	}
}
