// Command hostprog prints, for its rank, the size of its SplitTypeShared
// communicator and its processor name (mpi/hosts_test.go).
package main

import (
	"fmt"
	"log"

	"github.com/adimpi/adimpi/mpi"
)

func main() {
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	w := mpi.World()
	sh, err := w.SplitType(mpi.CommTypeShared, w.Rank())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d shared %d of %d host %s\n", w.Rank(), sh.Size(), w.Size(), mpi.ProcessorName())
	if err := mpi.Finalize(); err != nil {
		log.Fatal(err)
	}
}
