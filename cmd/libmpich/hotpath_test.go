//go:build cgo

package main

import (
	"testing"
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

const hInt = 0x4c000405 // MPI_INT

// TestHotCallsAddNoAllocations checks that the translation of the hot
// point-to-point calls (MPI_Send, MPI_Recv, MPI_Isend, MPI_Irecv, MPI_Wait,
// MPI_Test) allocates nothing beyond what the same operations cost through
// the Go API: the exported functions are called in process, as a C
// program's calls arrive, on MPI_COMM_SELF of a singleton.
func TestHotCallsAddNoAllocations(t *testing.T) {
	if !mpi.Initialized() {
		t.Setenv("PMI_FD", "")
		t.Setenv("PMI_PORT", "")
		if rc := MPI_Init(nil, nil); rc != 0 {
			t.Fatalf("MPI_Init: %d", rc)
		}
	}
	out, in := make([]int32, 8), make([]int32, 8)
	po, pi := unsafe.Pointer(&out[0]), unsafe.Pointer(&in[0])
	st := new(cStatus) // on the heap: a stack copy would move it under the C status pointer

	goRound, cRound := rounds(po, pi, st)
	for range 10 { // warm the handle tables and the device
		goRound()
		cRound()
	}
	g := testing.AllocsPerRun(200, goRound)
	c := testing.AllocsPerRun(200, cRound)
	t.Logf("allocations per round: Go API %.1f, C ABI %.1f", g, c)
	if c > g {
		t.Errorf("the C calls allocate %.1f times per round, the Go API %.1f: the translation allocates", c, g)
	}
	if st.source != 0 || st.tag != 2 || st.bytes() != 32 {
		t.Errorf("status %+v, want source 0, tag 2, 32 bytes", st)
	}
}

// rounds returns one round of the hot calls on MPI_COMM_SELF through the
// Go API and the same through the exported C functions (called from Go,
// so without the C-to-Go crossing): Irecv, Isend, Wait, Test until done,
// Send, Recv.
func rounds(po, pi unsafe.Pointer, st *cStatus) (goRound, cRound func()) {
	self := mpi.Self()
	goRound = func() {
		so, si := mpi.Typed(unsafe.Slice((*byte)(po), 32), 8, datatype.Int32), mpi.Typed(unsafe.Slice((*byte)(pi), 32), 8, datatype.Int32)
		rr, _ := mpi.IrecvBuf(self, si, 0, 1)
		rs, _ := mpi.IsendBuf(self, so, 0, 1)
		rs.Wait()
		for {
			if _, ok, _ := rr.Test(); ok {
				break
			}
		}
		mpi.SendBuf(self, so, 0, 2)
		mpi.RecvBuf(self, si, 0, 2)
	}
	cRound = func() {
		pst := uintptr(unsafe.Pointer(st))
		var rr, rs cint
		MPI_Irecv(pi, 8, hInt, 0, 1, cint(hCommSelf), &rr)
		MPI_Isend(po, 8, hInt, 0, 1, cint(hCommSelf), &rs)
		MPI_Wait(&rs, statusIgnore)
		for flag := cint(0); flag == 0; {
			MPI_Test(&rr, &flag, pst)
		}
		adimpi_slow_Send(po, 8, hInt, 0, 2, cint(hCommSelf))
		adimpi_slow_Recv(pi, 8, hInt, 0, 2, cint(hCommSelf), pst)
	}
	return goRound, cRound
}

// BenchmarkSelfRound times one round of the hot calls through the Go API
// and through the C functions' translation (without the C-to-Go crossing,
// which BenchmarkSelfRound cannot include: see docs/c-abi.md).
func BenchmarkSelfRound(b *testing.B) {
	if !mpi.Initialized() {
		b.Setenv("PMI_FD", "")
		b.Setenv("PMI_PORT", "")
		if rc := MPI_Init(nil, nil); rc != 0 {
			b.Fatalf("MPI_Init: %d", rc)
		}
	}
	out, in := make([]int32, 8), make([]int32, 8)
	goRound, cRound := rounds(unsafe.Pointer(&out[0]), unsafe.Pointer(&in[0]), new(cStatus))
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			goRound()
		}
	})
	b.Run("c", func(b *testing.B) {
		for b.Loop() {
			cRound()
		}
	})
}
