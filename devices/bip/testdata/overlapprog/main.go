// Command overlapprog shows the seed's point about MPI over BIP at np=2:
// rank 0 posts a 1 MiB receive, rank 1 starts the matching send, and both
// compute for 200 ms; then rank 0 tests its receive once. The long
// protocol (REQ → ACK → data) needs each side's CPU at each step, so:
//
//	overlapprog plain   the computation never calls MPI: the receive cannot
//	                    have completed (MPI-BIP gives no overlap)
//	overlapprog iprobe  the computation calls MPI_Iprobe now and then: it
//	                    has completed (the "overlap trick")
//	overlapprog async   run under mpirun -async-progress, no MPI calls in
//	                    the computation: it has completed
//
// GATE is a FIFO: rank 1 opens it for reading after its computation and
// rank 0 for writing after its test, so rank 1 makes no MPI call (which
// would progress the transfer) before rank 0 has looked. Rank 0 prints
// "PASS overlap MODE".
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/adimpi/adimpi/mpi"
)

const n = 1 << 20

var sink uint64

// compute busy-works for d, calling Iprobe every ~10 µs when probe is set.
func compute(w *mpi.Comm, d time.Duration, probe bool) {
	end := time.Now().Add(d)
	x := uint64(1)
	for time.Now().Before(end) {
		for i := 0; i < 2000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if probe {
			_, _, err := mpi.Iprobe(w, mpi.AnySource, mpi.AnyTag)
			must(err)
		}
	}
	sink += x
}

func main() {
	if len(os.Args) != 3 {
		fmt.Println("usage: overlapprog plain|iprobe|async GATE")
		os.Exit(2)
	}
	mode, gate := os.Args[1], os.Args[2]
	must(mpi.Init())
	w := mpi.World()
	if w.Size() != 2 {
		fail("needs 2 ranks")
	}
	if (mode == "async") != mpi.AsyncProgress() {
		fail("mode %s with asynchronous progress %v", mode, mpi.AsyncProgress())
	}
	buf := make([]byte, n)
	switch w.Rank() {
	case 0:
		r, err := mpi.Irecv(w, buf, 1, 7)
		must(err)
		must(mpi.Barrier(w))
		compute(w, 200*time.Millisecond, mode == "iprobe")
		_, done, err := r.Test()
		must(err)
		f, err := os.OpenFile(gate, os.O_WRONLY, 0) // lets rank 1 go on
		must(err)
		f.Close()
		if _, err := r.Wait(); err != nil {
			fail("wait: %v", err)
		}
		for i, b := range buf {
			if b != byte(i*5) {
				fail("byte %d wrong", i)
			}
		}
		if done != (mode != "plain") {
			fail("mode %s: the receive had completed during the computation: %v", mode, done)
		}
	case 1:
		for i := range buf {
			buf[i] = byte(i * 5)
		}
		must(mpi.Barrier(w))
		r, err := mpi.Isend(w, buf, 0, 7)
		must(err)
		compute(w, 200*time.Millisecond, mode == "iprobe")
		f, err := os.Open(gate) // blocks until rank 0 has tested its receive
		must(err)
		f.Close()
		_, err = r.Wait()
		must(err)
	}
	must(mpi.Barrier(w))
	if w.Rank() == 0 {
		fmt.Println("PASS overlap " + mode)
	}
	must(mpi.Finalize())
}

func must(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Printf("FAIL "+format+"\n", args...)
	os.Exit(1)
}
