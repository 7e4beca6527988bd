// Command mpiprog is a test program for mpirun that uses package mpi; its
// first argument selects a behaviour:
//
//	init    initialize and finalize MPI (an Init error is printed, exit 1)
//	panic   the last rank panics after Init; the others wait in Barrier
//	wait    rank 0 waits in Recv from rank 1 with tag 7 on MPI_COMM_WORLD;
//	        rank 1 in Ssend to rank 0 with tag 9 on a communicator named
//	        "wait-dup"; other ranks in Barrier on the world: all forever
//	noinit  rank 1 never calls MPI_Init (it sleeps); the others call it
//	spawn CMD N  the ranks spawn N copies of the program CMD and print
//	        "spawned N" (rank 0) when every child started
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/adimpi/adimpi/mpi"
)

func main() {
	check := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "mpiprog:", err)
			os.Exit(1)
		}
	}
	if os.Args[1] == "noinit" && os.Getenv("PMI_RANK") == "1" {
		time.Sleep(time.Hour)
	}
	check(mpi.Init())
	world := mpi.World()
	switch os.Args[1] {
	case "init", "noinit":
	case "panic":
		if world.Rank() == world.Size()-1 {
			panic("mpiprog gives up")
		}
		check(mpi.Barrier(world))
	case "spawn":
		n, err := strconv.Atoi(os.Args[3])
		check(err)
		inter, _, err := mpi.CommSpawn(os.Args[2], nil, n, nil, 0, world)
		check(err)
		if world.Rank() == 0 {
			fmt.Printf("spawned %d\n", inter.RemoteSize())
		}
	case "wait":
		dup, err := world.Dup()
		check(err)
		dup.SetName("wait-dup")
		fmt.Printf("waiting %d\n", world.Rank())
		switch world.Rank() {
		case 0:
			_, err = mpi.Recv(world, make([]int32, 4), 1, 7)
		case 1:
			err = mpi.Ssend(dup, []int32{1, 2}, 0, 9)
		default:
			err = mpi.Barrier(world)
		}
		check(err)
	default:
		check(fmt.Errorf("unknown mode %q", os.Args[1]))
	}
	check(mpi.Finalize())
}
