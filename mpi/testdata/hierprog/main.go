// Command hierprog runs Barrier, Bcast, Reduce and Allreduce on
// MPI_COMM_WORLD, checks their results, and prints for its rank the world
// ranks of its SplitTypeShared communicator and the counters that tell
// which paths the collectives took (mpi/hier_test.go).
package main

import (
	"fmt"
	"log"
	"slices"

	"github.com/adimpi/adimpi/mpi"
)

func main() {
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	w := mpi.World()
	n, me := w.Size(), w.Rank()
	if err := mpi.Barrier(w); err != nil {
		log.Fatal(err)
	}
	for _, count := range []int{1, 1000, 40000} {
		buf := make([]float64, count)
		if me == n-1 {
			for i := range buf {
				buf[i] = float64(i + 1)
			}
		}
		if err := mpi.Bcast(w, buf, n-1); err != nil {
			log.Fatal(err)
		}
		if buf[count-1] != float64(count) {
			log.Fatalf("rank %d: Bcast gave %v, want %d", me, buf[count-1], count)
		}
		in, out := make([]float64, count), make([]float64, count)
		for i := range in {
			in[i] = float64(me + 1)
		}
		want := float64(n * (n + 1) / 2)
		if err := mpi.Allreduce(w, in, out, mpi.Sum); err != nil {
			log.Fatal(err)
		}
		if out[0] != want || out[count-1] != want {
			log.Fatalf("rank %d: Allreduce gave %v, want %v", me, out[0], want)
		}
		if err := mpi.Reduce(w, in, out, mpi.Sum, 1%n); err != nil {
			log.Fatal(err)
		}
		if me == 1%n && out[count-1] != want {
			log.Fatalf("rank %d: Reduce gave %v, want %v", me, out[count-1], want)
		}
	}
	sh, err := w.SplitType(mpi.CommTypeShared, me)
	if err != nil {
		log.Fatal(err)
	}
	g, _ := sh.Group()
	wg, _ := w.Group()
	idx := make([]int, sh.Size())
	for i := range idx {
		idx[i] = i
	}
	shared, err := mpi.TranslateRanks(g, idx, wg)
	if err != nil {
		log.Fatal(err)
	}
	slices.Sort(shared)
	c := mpi.Counters()
	fmt.Printf("rank %d shared %v board %d hier %d multi %d hostboard %d\n", me, shared, c["board_rounds"], c["hier_collectives"], c["multi_messages"], c["host_board_collectives"])
	if err := mpi.Finalize(); err != nil {
		log.Fatal(err)
	}
}
