// Command slurmprobe is the MPI program of the Slurm tests. Every rank
// passes a token around the ring of all ranks, joins an Allreduce, splits
// MPI_COMM_WORLD by shared memory (MPI_COMM_TYPE_SHARED) and prints one
// line:
//
//	rank R size N host H slurm-procid P slurm-node S local L/M sum X token T device D
//
// (H is MPI_Get_processor_name, P and S Slurm's SLURM_PROCID and
// SLURMD_NODENAME, L and M the rank and size in the shared-memory
// communicator, X the sum of every rank's rank, T the token that came
// back, N*(N-1)/2 + N when the ring works, D the device). With the argument "abort" rank
// 1 calls MPI_Abort(MPI_COMM_WORLD, 7) while the others wait in a barrier
// it never enters; with "block" the last rank sleeps (printing "blocking"
// first) while the others wait in such a barrier, until something kills it.
package main

import (
	"fmt"
	"log"
	"os"
	"time"

	"github.com/adimpi/adimpi/mpi"
)

func main() {
	log.SetFlags(0)
	if err := mpi.Init(); err != nil {
		log.Fatal(err)
	}
	world := mpi.World()
	rank, size := world.Rank(), world.Size()
	if len(os.Args) > 1 && os.Args[1] == "abort" {
		must(mpi.Barrier(world)) // every rank is past MPI_Init
		if rank == 1 {
			mpi.Abort(world, 7)
		}
		if err := mpi.Barrier(world); err != nil {
			log.Fatal(err)
		}
		log.Fatalf("rank %d: the barrier ended although rank 1 aborted", rank)
	}
	if len(os.Args) > 1 && os.Args[1] == "block" {
		must(mpi.Barrier(world)) // every rank is past MPI_Init
		if rank == size-1 {
			fmt.Println("blocking")
			time.Sleep(time.Hour)
		}
		must(mpi.Barrier(world))
		log.Fatalf("rank %d: the barrier ended although rank %d never entered it", rank, size-1)
	}
	// The token goes 0 -> 1 -> ... -> size-1 -> 0, each rank adding its
	// rank plus one.
	token := []int{0}
	next, prev := (rank+1)%size, (rank+size-1)%size
	if rank == 0 {
		token[0] = 1
		must(mpi.Send(world, token, next, 1))
		_, err := mpi.Recv(world, token, prev, 1)
		must(err)
	} else {
		_, err := mpi.Recv(world, token, prev, 1)
		must(err)
		token[0] += rank + 1
		must(mpi.Send(world, token, next, 1))
	}
	must(mpi.Bcast(world, token, 0))
	sum := []int{0}
	must(mpi.Allreduce(world, []int{rank}, sum, mpi.Sum))
	local, err := world.SplitType(mpi.CommTypeShared, 0)
	must(err)
	fmt.Printf("rank %d size %d host %s slurm-procid %s slurm-node %s local %d/%d sum %d token %d device %s\n",
		rank, size, mpi.ProcessorName(), os.Getenv("SLURM_PROCID"), os.Getenv("SLURMD_NODENAME"),
		local.Rank(), local.Size(), sum[0], token[0], mpi.DeviceName())
	must(mpi.Finalize())
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
