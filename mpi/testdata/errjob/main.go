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
	case "errors":
		printErrors()
	case "fatal":
		fatalError()
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

// printErrors makes erroneous calls on two ranks and prints, on rank 1, the
// error each returned, one per line as "case: error". The sends go through
// a communicator that numbers the ranks the other way round from
// MPI_COMM_WORLD, so an error naming a world rank would show.
func printErrors() {
	defer mpi.Finalize()
	w := mpi.World()
	rev, err := w.Split(0, -w.Rank())
	if err != nil {
		log.Fatal(err)
	}
	other := 1 - rev.Rank()
	long, short := make([]float64, 10), make([]float64, 5)
	report := func(what string, err error) {
		if w.Rank() == 1 {
			fmt.Printf("%s: %v\n", what, err)
		}
	}
	if w.Rank() == 0 {
		must(mpi.Send(rev, long, other, 7))
		must(mpi.Send(rev, long, other, 8))
	} else {
		_, err := mpi.Recv(rev, short, other, 7)
		report("recv truncate", err)
		q, err := mpi.Irecv(rev, short, other, 8)
		must(err)
		_, err = q.Wait()
		report("irecv truncate", err)
	}
	buf := long
	if w.Rank() != 0 {
		buf = short
	}
	report("bcast truncate", mpi.Bcast(w, buf, 0))
	report("send bad rank", mpi.Send(rev, long, 5, 0))
	report("send bad tag", mpi.Send(rev, long, other, -3))
	report("recv bad tag", errOnly(mpi.Recv(rev, long, other, mpi.TagUB+1)))
	report("bcast bad root", mpi.Bcast(w, buf, 2))
}

func errOnly(_ mpi.Status, err error) error { return err }

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// fatalError sets MPI_ERRORS_ARE_FATAL on MPI_COMM_WORLD, duplicates it
// (the copy inherits the handler) and makes an erroneous send on the copy
// on the last rank; that send must not return.
func fatalError() {
	defer mpi.Finalize()
	w := mpi.World()
	must(w.SetErrhandler(mpi.ErrorsAreFatal))
	d, err := w.Dup()
	must(err)
	if d.Rank() != d.Size()-1 {
		waitForever(w)
	}
	err = mpi.Send(d, []int32{1}, 99, 0)
	fmt.Fprintf(os.Stderr, "errjob: the erroneous send returned (%v) under MPI_ERRORS_ARE_FATAL\n", err)
	os.Exit(0)
}
