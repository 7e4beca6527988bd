package mpi_test

import (
	"testing"

	"github.com/adimpi/adimpi/mpi"
)

// BenchmarkSelfSendRecv8B is the per-message cost of the core and the
// device on the eager path, without a second process: Irecv, Send to self,
// Wait.
func BenchmarkSelfSendRecv8B(b *testing.B) {
	w := mpi.World()
	out, in := make([]byte, 8), make([]byte, 8)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		rq, err := mpi.Irecv(w, in, 0, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := mpi.Send(w, out, 0, 1); err != nil {
			b.Fatal(err)
		}
		if _, err := rq.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSelfWindow8B is bw's inner loop against self: a window of 64
// Irecv and 64 Isend of 8 B, then Waitall on both; per message.
func BenchmarkSelfWindow8B(b *testing.B) {
	w := mpi.World()
	const win = 64
	out, in := make([]byte, 8), make([]byte, 8*win)
	rr := make([]*mpi.Request, win)
	sr := make([]*mpi.Request, win)
	b.ReportAllocs()
	for i := 0; i < b.N; i += win {
		for k := range rr {
			var err error
			if rr[k], err = mpi.Irecv(w, in[8*k:8*k+8], 0, 1); err != nil {
				b.Fatal(err)
			}
		}
		for k := range sr {
			var err error
			if sr[k], err = mpi.Isend(w, out, 0, 1); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := mpi.Waitall(sr); err != nil {
			b.Fatal(err)
		}
		if _, err := mpi.Waitall(rr); err != nil {
			b.Fatal(err)
		}
	}
}
