// Ring passes a token around every rank of MPI_COMM_WORLD a few times; each
// rank adds its rank to it, so the final value checks that every hop happened.
//
//	go run ./cmd/mpirun -np 16 ./examples/ring
package main

import (
	"fmt"
	"log"

	"github.com/adimpi/adimpi/mpi"
)

const laps = 3

func main() {
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	world := mpi.World()
	rank, size := world.Rank(), world.Size()
	next, prev := (rank+1)%size, (rank+size-1)%size
	token := []int64{0}
	for lap := 0; lap < laps; lap++ {
		if rank == 0 {
			token[0]++
			must(mpi.Send(world, token, next, lap))
			must2(mpi.Recv(world, token, prev, lap))
		} else {
			must2(mpi.Recv(world, token, prev, lap))
			token[0] += int64(rank)
			must(mpi.Send(world, token, next, lap))
		}
	}
	if rank == 0 {
		want := int64(laps * (1 + size*(size-1)/2))
		fmt.Printf("ring: %d ranks on device %s, %d laps, token %d (want %d)\n", size, mpi.DeviceName(), laps, token[0], want)
		if token[0] != want {
			log.Fatalf("ring: token %d, want %d", token[0], want)
		}
	}
	must(mpi.Finalize())
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func must2(_ mpi.Status, err error) { must(err) }
