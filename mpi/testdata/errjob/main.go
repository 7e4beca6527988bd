// Command errjob is the MPI program of the mpi package's multi-process
// tests (job_test.go): each mode, named by the first argument, makes one
// rank fail in one way while the others wait, or prints the errors of a few
// erroneous calls, one per line, for the test to compare.
package main

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/adimpi/adimpi/mpi"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: errjob MODE")
	}
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	switch os.Args[1] {
	case "panic":
		panicDirect()
	case "panic-wrapped":
		panicWrapped()
	default:
		log.Fatalf("errjob: unknown mode %q", os.Args[1])
	}
}

// waitForever blocks the ranks that do not fail in a receive that no rank
// will ever match: only the failing rank can end the job.
func waitForever(w *mpi.Comm) {
	buf := make([]byte, 1)
	_, err := mpi.Recv(w, buf, mpi.AnySource, 99)
	log.Fatalf("rank %d: the receive that never matches returned: %v", w.Rank(), err)
}

// panicDirect panics on the last rank with Finalize deferred as the README
// shows.
func panicDirect() {
	defer mpi.Finalize()
	w := mpi.World()
	if w.Rank() != w.Size()-1 {
		waitForever(w)
	}
	var m map[string]int
	m["boom"]++ // a runtime error: assignment to entry in nil map
}

// panicWrapped panics on the last rank with Finalize deferred inside a
// function literal, where recover cannot see the panic.
func panicWrapped() {
	defer func() {
		if err := mpi.Finalize(); err != nil {
			fmt.Fprintln(os.Stderr, "errjob:", err)
		}
	}()
	w := mpi.World()
	if w.Rank() != w.Size()-1 {
		waitForever(w)
	}
	panic(errors.New("wrapped boom"))
}
