// Command rttpct times every round trip of an 8-byte MPI ping-pong between
// ranks 0 and 1 and prints percentiles of the one-way latency (half the
// round trip). On a loaded machine a benchmark's mean over a repetition
// takes in every preemption that falls into it; the lower percentiles of
// single round trips show the path itself. testdata/latency.sh runs it.
//
//	mpirun -np 2 -device via rttpct [-n 100000] [-label via]
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/adimpi/adimpi/mpi"
)

func main() {
	n := flag.Int("n", 100000, "round trips")
	label := flag.String("label", "", "name printed first on the line")
	flag.Parse()
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "rttpct:", err)
		os.Exit(1)
	}
	w := mpi.World()
	rank := w.Rank()
	b := make([]byte, 8)
	rtt := make([]time.Duration, 0, *n)
	var err error
	for i := 0; i < *n && err == nil && rank < 2; i++ {
		if rank == 0 {
			t := time.Now()
			if err = mpi.Send(w, b, 1, 1); err == nil {
				_, err = mpi.Recv(w, b, 1, 1)
			}
			rtt = append(rtt, time.Since(t))
		} else {
			if _, err = mpi.Recv(w, b, 0, 1); err == nil {
				err = mpi.Send(w, b, 0, 1)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rttpct:", err)
		os.Exit(1)
	}
	if rank == 0 {
		slices.Sort(rtt)
		us := func(q int) float64 { return rtt[len(rtt)*q/100].Seconds() / 2 * 1e6 }
		fmt.Printf("%s %.3f %.3f %.3f\n", *label, us(5), us(25), us(50))
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "rttpct:", err)
		os.Exit(1)
	}
}
