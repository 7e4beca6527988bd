// Command creditprog checks MPI-BIP's credit flow control at np=2 with a
// small queue (mpirun -device bip -device-opt queue=4): rank 0 starts
// many small non-blocking sends to rank 1 at once, more than its credits;
// rank 1, which never sends back during the flood, must return credits
// explicitly. Both check the device's counters and the data; rank 0
// prints "PASS credits".
package main

import (
	"fmt"
	"os"

	"github.com/adimpi/adimpi/mpi"
)

const n = 200

func main() {
	must(mpi.Init())
	world := mpi.World()
	rank := world.Rank()
	if world.Size() != 2 {
		fail("needs 2 ranks")
	}
	switch rank {
	case 0:
		reqs := make([]*mpi.Request, n)
		bufs := make([][]int64, n)
		for i := range reqs {
			bufs[i] = []int64{int64(i), int64(i * i)}
			var err error
			reqs[i], err = mpi.Isend(world, bufs[i], 1, i%7)
			must(err)
		}
		_, err := mpi.Waitall(reqs)
		must(err)
		c := mpi.Counters()
		if c["credit_waits"] == 0 || c["backlog"] != 0 {
			fail("rank 0: %d sends without waiting for credit (counters %v)", n, c)
		}
	case 1:
		buf := make([]int64, 2)
		for i := 0; i < n; i++ {
			_, err := mpi.Recv(world, buf, 0, i%7)
			must(err)
			if buf[0] != int64(i) || buf[1] != int64(i*i) {
				fail("rank 1: message %d holds %v", i, buf)
			}
		}
		c := mpi.Counters()
		if c["credit_messages"] == 0 || c["bip_short_received"] < n {
			fail("rank 1: no explicit credit return after %d messages (counters %v)", n, c)
		}
	}
	must(mpi.Barrier(world))
	if rank == 0 {
		fmt.Println("PASS credits")
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
