// Command drill keeps every rank exchanging messages with its neighbours on
// a ring, small ones and rendezvous ones in turn, for -for, so that a test
// can break a host or its link under a running job
// (conformance/crosshost_test.go). Each rank prints "rank R running" once
// its first exchange is done, and "PASS drill" at the end; an error ends the
// rank with a non-zero status and the error's text.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/adimpi/adimpi/mpi"
)

func main() {
	dur := flag.Duration("for", time.Minute, "how long the ranks exchange messages")
	flag.Parse()
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "drill:", err)
		os.Exit(1)
	}
	w := mpi.World()
	me, n := w.Rank(), w.Size()
	right, left := (me+1)%n, (me-1+n)%n
	small, large := make([]byte, 8), make([]byte, 256<<10)
	in := make([]byte, len(large))
	start := time.Now()
	for i := 0; time.Since(start) < *dur; i++ {
		out := small
		if i%2 == 1 {
			out = large
		}
		if _, err := mpi.Sendrecv(w, out, right, i, in[:len(out)], left, i); err != nil {
			fmt.Fprintf(os.Stderr, "drill: rank %d: exchange %d: %v\n", me, i, err)
			os.Exit(1)
		}
		if i == 0 {
			fmt.Printf("rank %d running\n", me)
		}
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "drill:", err)
		os.Exit(1)
	}
	if me == 0 {
		fmt.Println("PASS drill")
	}
}
