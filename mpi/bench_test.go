package mpi_test

import (
	"math"
	"runtime"
	"runtime/debug"
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

// BenchmarkSelfBlocking8B is pingpong's per-message path without a second
// process: a blocking Send to self, then the blocking Recv that takes it.
func BenchmarkSelfBlocking8B(b *testing.B) { benchSelfBlocking(b, 8) }

// BenchmarkSelfBlocking0B is BenchmarkSelfBlocking8B with empty messages:
// pingpong's 0-byte latency path.
func BenchmarkSelfBlocking0B(b *testing.B) { benchSelfBlocking(b, 0) }

// benchSelfBlocking times a blocking Send of n bytes to self and the
// blocking Recv that takes it.
func benchSelfBlocking(b *testing.B, n int) {
	w := mpi.World()
	out, in := make([]byte, n), make([]byte, n)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := mpi.Send(w, out, 0, 1); err != nil {
			b.Fatal(err)
		}
		if _, err := mpi.Recv(w, in, 0, 1); err != nil {
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

// TestSelfWindowAllocations: bw's window against self on the singleton's
// netvm allocates nothing per message, in the core or the device, beyond
// the request handles' share of their slabs (one per 64 handles). The
// collector is off meanwhile: the count is the process's, and a
// collection allocates too.
func TestSelfWindowAllocations(t *testing.T) {
	w := mpi.World()
	const win, runs = 64, 200
	out, in := make([]byte, 8), make([]byte, 8*win)
	rr, sr := make([]*mpi.Request, win), make([]*mpi.Request, win)
	sts := make([]mpi.Status, win)
	window := func() {
		for k := range rr {
			rr[k], _ = mpi.Irecv(w, in[8*k:8*k+8], 0, 1)
		}
		for k := range sr {
			sr[k], _ = mpi.Isend(w, out, 0, 1)
		}
		if err := mpi.WaitallInto(sr, nil); err != nil {
			t.Fatal(err)
		}
		if err := mpi.WaitallInto(rr, sts); err != nil {
			t.Fatal(err)
		}
	}
	window()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// The count is the process's: the least of five rounds leaves out
	// what other goroutines allocate now and then.
	best := uint64(math.MaxUint64)
	for round := 0; round < 5; round++ {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := 0; i < runs; i++ {
			window()
		}
		runtime.ReadMemStats(&after)
		best = min(best, after.Mallocs-before.Mallocs)
	}
	if want := uint64(2*win*runs/64 + 1); best > want {
		t.Errorf("%d windows of %d messages made %d allocations, want at most %d", runs, win, best, want)
	}
}

// BenchmarkSelfWindowIn8B is BenchmarkSelfWindow8B with the requests and
// statuses in the program's arrays (IrecvIn, IsendIn, WaitallInto), as a C
// program keeps them: per message, nothing allocated.
func BenchmarkSelfWindowIn8B(b *testing.B) {
	w := mpi.World()
	const win = 64
	out, in := make([]byte, 8), make([]byte, 8*win)
	rr, sr := make([]mpi.Request, win), make([]mpi.Request, win)
	rp, sp := make([]*mpi.Request, win), make([]*mpi.Request, win)
	for k := range rr {
		rp[k], sp[k] = &rr[k], &sr[k]
	}
	sts := make([]mpi.Status, win)
	b.ReportAllocs()
	for i := 0; i < b.N; i += win {
		for k := range rr {
			if err := mpi.IrecvIn(&rr[k], w, in[8*k:8*k+8], 0, 1); err != nil {
				b.Fatal(err)
			}
		}
		for k := range sr {
			if err := mpi.IsendIn(&sr[k], w, out, 0, 1); err != nil {
				b.Fatal(err)
			}
		}
		if err := mpi.WaitallInto(sp, nil); err != nil {
			b.Fatal(err)
		}
		if err := mpi.WaitallInto(rp, sts); err != nil {
			b.Fatal(err)
		}
	}
}
