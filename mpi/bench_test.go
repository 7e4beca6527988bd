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
