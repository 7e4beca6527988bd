// Command zeromis runs Allgather and Gather (at rank 0) on a duplicate of
// MPI_COMM_WORLD (the message algorithms) with blocks of five elements on
// rank 3 and of none on every other rank, checks that each rank fails as a
// count mismatch requires (rank 3 with ErrCount: its peers pass fewer; the
// others with ErrTruncate: a peer passes more), that the communicator then
// still works, and prints "rank R ok" (mpi/mismatch_test.go). A mismatch
// seen only between two ranks of no elements must still reach the ranks
// beyond them, whose messages are empty too.
package main

import (
	"errors"
	"fmt"
	"log"

	"github.com/adimpi/adimpi/mpi"
)

func main() {
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	w := mpi.World()
	n, me := w.Size(), w.Rank()
	if n < 4 {
		log.Fatalf("zeromis needs 4 ranks or more, has %d", n)
	}
	c, err := w.Dup()
	if err != nil {
		log.Fatal(err)
	}
	bs := 0
	want := mpi.ErrTruncate
	if me == 3 {
		bs, want = 5, mpi.ErrCount
	}
	blk, all := make([]float64, bs), make([]float64, n*bs)
	if err := mpi.Allgather(c, blk, all); !errors.Is(err, want) {
		log.Fatalf("rank %d: Allgather with blocks of %d: got %v, want %v", me, bs, err, want)
	}
	err = mpi.Gather(c, blk, all, 0)
	if me == 0 && !errors.Is(err, mpi.ErrTruncate) {
		log.Fatalf("rank 0: Gather at rank 0 with blocks of 0 and 5: got %v, want %v", err, mpi.ErrTruncate)
	}
	if me != 0 && err != nil && !errors.Is(err, mpi.ErrTruncate) && !errors.Is(err, mpi.ErrCount) {
		log.Fatalf("rank %d: Gather at rank 0: %v", me, err)
	}
	one, sum := []int64{1}, []int64{0}
	if err := mpi.Allreduce(c, one, sum, mpi.Sum); err != nil || sum[0] != int64(n) {
		log.Fatalf("rank %d: Allreduce after the mismatches gives %d, %v; want %d", me, sum[0], err, n)
	}
	fmt.Printf("rank %d ok\n", me)
	if err := mpi.Finalize(); err != nil {
		log.Fatal(err)
	}
}
