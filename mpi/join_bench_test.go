package mpi

import (
	"testing"
	"time"
)

// BenchmarkCoreSendRecvJoinDev is BenchmarkCoreSendRecv with the device
// behind joinDev, as every job runs since communicators may span jobs:
// the difference between the two is the cost of the routing by context id
// for a program that never connects jobs.
func BenchmarkCoreSendRecvJoinDev(b *testing.B) {
	r := &runtime{devName: "null", size: 1, poll: time.Millisecond, spin: time.Millisecond}
	r.dev, r.short, r.join = wrapJoin(r, nullDevice{}, nil)
	r.world = newComm("MPI_COMM_WORLD", 0, 0, identity(1))
	r.resume = make(chan struct{}, 1)
	prev := live.Swap(r)
	defer live.Store(prev)
	b.ReportAllocs()
	buf := make([]byte, 8)
	for i := 0; i < b.N; i++ {
		if err := Send(r.world, buf, 0, 1); err != nil {
			b.Fatal(err)
		}
		if _, err := Recv(r.world, buf, 0, 1); err != nil {
			b.Fatal(err)
		}
	}
}
