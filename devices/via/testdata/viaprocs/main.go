// Command viaprocs prints the Go processors (GOMAXPROCS) each rank runs
// with after MPI_Init; rank 0 then keeps rank 1 waiting long enough to
// sleep (100 ms) before a ping-pong that checks every answer, and each rank
// prints how often its application slept on the network port (the via
// counter nic_port_sleeps). Run it under mpirun with the via device on
// ranks bound to one CPU each.
package main

import (
	"fmt"
	"log"
	"runtime"
	"time"

	"github.com/adimpi/adimpi/mpi"
)

func main() {
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	w := mpi.World()
	r := w.Rank()
	fmt.Printf("rank %d gomaxprocs %d\n", r, runtime.GOMAXPROCS(0))
	b := []int64{0}
	if r == 0 {
		time.Sleep(100 * time.Millisecond) // rank 1's first receive outlasts its spin
	}
	for i := int64(1); i <= 1000 && w.Size() > 1; i++ {
		switch r {
		case 0:
			b[0] = i
			if err := mpi.Send(w, b, 1, 0); err != nil {
				log.Fatal(err)
			}
			if _, err := mpi.Recv(w, b, 1, 0); err != nil {
				log.Fatal(err)
			}
			if b[0] != -i {
				log.Fatalf("rank 0: got %d back, want %d", b[0], -i)
			}
		case 1:
			if _, err := mpi.Recv(w, b, 0, 0); err != nil {
				log.Fatal(err)
			}
			b[0] = -b[0]
			if err := mpi.Send(w, b, 0, 0); err != nil {
				log.Fatal(err)
			}
		}
	}
	fmt.Printf("rank %d port_sleeps %d\n", r, mpi.Counters()["nic_port_sleeps"])
	if err := mpi.Finalize(); err != nil {
		log.Fatal(err)
	}
}
