package mpi_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// The tests in this file run in one process, as an MPI singleton (rank 0 of
// 1): no launcher, the netvm device talking to itself. Multi-rank behaviour is
// tested through mpirun in conformance/.
func TestMain(m *testing.M) {
	for _, k := range []string{"PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE"} {
		os.Unsetenv(k)
	}
	if err := mpi.Init(); err != nil {
		panic(err)
	}
	code := m.Run()
	removeJobBinaries()
	if err := mpi.Finalize(); err != nil {
		panic(err)
	}
	os.Exit(code)
}

func TestSingletonWorld(t *testing.T) {
	w := mpi.World()
	if w.Rank() != 0 || w.Size() != 1 || !mpi.Initialized() {
		t.Fatalf("world rank %d size %d initialized %v", w.Rank(), w.Size(), mpi.Initialized())
	}
	if mpi.Self().Size() != 1 {
		t.Fatal("self size != 1")
	}
	if err := mpi.Init(); err == nil {
		t.Fatal("second Init succeeded")
	}
}

func TestSendToSelfAllSizes(t *testing.T) {
	w := mpi.World()
	for _, n := range []int{0, 1, 100, 16 << 10, 16<<10 + 1, 1 << 20} {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(i*7 + n)
		}
		in := make([]int32, n)
		rq, err := mpi.Irecv(w, in, 0, 5)
		if err != nil {
			t.Fatal(err)
		}
		if err := mpi.Send(w, out, 0, 5); err != nil {
			t.Fatal(err)
		}
		st, err := rq.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if st.Source != 0 || st.Tag != 5 || mpi.CountOf[int32](st) != n {
			t.Fatalf("n=%d: status %+v count %d", n, st, mpi.CountOf[int32](st))
		}
		for i := range in {
			if in[i] != out[i] {
				t.Fatalf("n=%d: element %d = %d, want %d", n, i, in[i], out[i])
			}
		}
	}
}

func TestBadArguments(t *testing.T) {
	w := mpi.World()
	buf := make([]float64, 4)
	cases := []struct {
		name  string
		err   error
		class mpi.Class
		call  string
	}{
		{"dest out of range", mpi.Send(w, buf, 1, 0), mpi.ErrRank, "MPI_Send"},
		{"negative dest", mpi.Send(w, buf, -7, 0), mpi.ErrRank, "MPI_Send"},
		{"negative tag", mpi.Send(w, buf, 0, -1), mpi.ErrTag, "MPI_Send"},
		{"nil comm", mpi.Send(nil, buf, 0, 0), mpi.ErrComm, "MPI_Send"},
		{"negative count", mpi.SendBuf(w, mpi.Typed(make([]byte, 8), -1, datatype.Float64), 0, 0), mpi.ErrCount, "MPI_Send"},
		{"short buffer", mpi.SendBuf(w, mpi.Typed(make([]byte, 8), 2, datatype.Float64), 0, 0), mpi.ErrBuffer, "MPI_Send"},
		{"nil type", mpi.SendBuf(w, mpi.Typed(make([]byte, 8), 1, nil), 0, 0), mpi.ErrType, "MPI_Send"},
	}
	_, err := mpi.Recv(w, buf, 3, 0)
	cases = append(cases, struct {
		name  string
		err   error
		class mpi.Class
		call  string
	}{"source out of range", err, mpi.ErrRank, "MPI_Recv"})
	for _, c := range cases {
		if !errors.Is(c.err, c.class) {
			t.Errorf("%s: got %v, want class %v", c.name, c.err, c.class)
			continue
		}
		if mpi.ErrorClass(c.err) != c.class || !strings.Contains(c.err.Error(), c.call) {
			t.Errorf("%s: error %q does not carry class %v and call %s", c.name, c.err, c.class, c.call)
		}
	}
}

func TestTruncationWritesNothingPastTheBuffer(t *testing.T) {
	w := mpi.World()
	for _, n := range []int{64, 64 << 10} {
		big := make([]byte, 2*n)
		for i := range big {
			big[i] = 0xEE
		}
		msg := make([]byte, n)
		for i := range msg {
			msg[i] = byte(i)
		}
		rq, _ := mpi.Irecv(w, big[:n/2], 0, 1)
		if err := mpi.Send(w, msg, 0, 1); err != nil {
			t.Fatal(err)
		}
		st, err := rq.Wait()
		if !errors.Is(err, mpi.ErrTruncate) || !errors.Is(st.Err, mpi.ErrTruncate) {
			t.Fatalf("n=%d: err %v status err %v, want ErrTruncate", n, err, st.Err)
		}
		for i := 0; i < n/2; i++ {
			if big[i] != byte(i) {
				t.Fatalf("n=%d: byte %d = %d", n, i, big[i])
			}
		}
		for i := n / 2; i < len(big); i++ {
			if big[i] != 0xEE {
				t.Fatalf("n=%d: byte %d past the receive buffer was overwritten", n, i)
			}
		}
	}
}

func TestProbeCancelProcNull(t *testing.T) {
	w := mpi.World()
	if err := mpi.Send(w, []uint16{1, 2, 3}, 0, 9); err != nil {
		t.Fatal(err)
	}
	st, err := mpi.Probe(w, mpi.AnySource, mpi.AnyTag)
	if err != nil || st.Tag != 9 || mpi.CountOf[uint16](st) != 3 || st.Count(datatype.Float64) != mpi.Undefined {
		t.Fatalf("probe: %+v %v", st, err)
	}
	got := make([]uint16, mpi.CountOf[uint16](st))
	if _, err := mpi.Recv(w, got, st.Source, st.Tag); err != nil || got[2] != 3 {
		t.Fatalf("recv after probe: %v %v", got, err)
	}
	if _, ok, _ := mpi.Iprobe(w, 0, 9); ok {
		t.Fatal("iprobe found a message that was received")
	}
	rq, _ := mpi.Irecv(w, got, 0, 77)
	if err := rq.Cancel(); err != nil {
		t.Fatal(err)
	}
	st, err = rq.Wait()
	if err != nil || !st.Cancelled {
		t.Fatalf("cancelled receive: %+v %v", st, err)
	}
	if err := mpi.Send(w, []uint16{5}, 0, 77); err != nil {
		t.Fatal(err)
	}
	if _, err := mpi.Recv(w, got[:1], 0, 77); err != nil || got[0] != 5 {
		t.Fatalf("message after cancel went astray: %v %v", got, err)
	}
	st, err = mpi.Recv(w, got, mpi.ProcNull, 0)
	if err != nil || st.Source != mpi.ProcNull || st.Bytes() != 0 {
		t.Fatalf("ProcNull recv: %+v %v", st, err)
	}
}

func TestDatatypeErrorsCarryMPIClasses(t *testing.T) {
	_, err := datatype.Vector(-1, 1, 1, datatype.Float64)
	if !errors.Is(err, mpi.ErrCount) || mpi.ErrorClass(err) != mpi.ErrCount {
		t.Fatalf("Vector(-1,...): %v (class %v), want ErrCount", err, mpi.ErrorClass(err))
	}
	vec, err := datatype.Vector(2, 1, 3, datatype.Float64)
	if err != nil {
		t.Fatal(err)
	}
	mem := make([]byte, 64)
	if err := mpi.SendBuf(mpi.World(), mpi.Typed(mem, 1, vec), 0, 0); !errors.Is(err, mpi.ErrType) {
		t.Fatalf("send with an uncommitted type: %v, want ErrType", err)
	}
	if err := vec.Commit(); err != nil {
		t.Fatal(err)
	}
	rq, err := mpi.IrecvBuf(mpi.World(), mpi.Typed(make([]byte, 64), 2, vec), 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range mem {
		mem[i] = byte(i)
	}
	// 3 float64 arrive into a receive of 2 vectors of 2 float64: one whole
	// vector and one float64 of the second.
	if err := mpi.SendBuf(mpi.World(), mpi.Typed(mem, 3, datatype.Float64), 0, 3); err != nil {
		t.Fatal(err)
	}
	st, err := rq.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if st.Count(vec) != mpi.Undefined || st.Elements(vec) != 3 || st.Bytes() != 24 {
		t.Fatalf("count %d elements %d bytes %d, want Undefined, 3, 24", st.Count(vec), st.Elements(vec), st.Bytes())
	}
}

func TestSignatureMismatchIsErrType(t *testing.T) {
	w := mpi.World()
	for _, n := range []int{4, 100000} { // eager and rendezvous
		out := make([]float64, n)
		in := make([]int64, n)
		rq, err := mpi.Irecv(w, in, 0, 11)
		if err != nil {
			t.Fatal(err)
		}
		if err := mpi.Send(w, out, 0, 11); err != nil {
			t.Fatalf("n=%d: send: %v", n, err)
		}
		if _, err := rq.Wait(); !errors.Is(err, mpi.ErrType) {
			t.Fatalf("n=%d: float64 into int64: %v, want ErrType", n, err)
		}
		// bytes match anything
		raw := make([]byte, 8*n)
		rq, _ = mpi.IrecvBuf(w, mpi.Typed(raw, len(raw), datatype.Byte), 0, 12)
		if err := mpi.Send(w, out, 0, 12); err != nil {
			t.Fatal(err)
		}
		if st, err := rq.Wait(); err != nil || st.Bytes() != 8*n {
			t.Fatalf("n=%d: float64 into MPI_BYTE: %v %d", n, err, st.Bytes())
		}
	}
}

func TestAttributeCaching(t *testing.T) {
	var deleted []any
	k := &mpi.Keyval{
		Copy:   func(_ *mpi.Comm, v any) (any, bool) { return v.(int) + 1, true },
		Delete: func(_ *mpi.Comm, v any) error { deleted = append(deleted, v); return nil },
	}
	skip := &mpi.Keyval{} // no Copy: not inherited by Dup
	c, err := mpi.World().Dup()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetAttr(k, 1); err != nil {
		t.Fatal(err)
	}
	c.SetAttr(skip, "x")
	d, err := c.Dup()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := d.Attr(k); !ok || v.(int) != 2 {
		t.Fatalf("Dup copied %v %v, want 2", v, ok)
	}
	if _, ok := d.Attr(skip); ok {
		t.Fatal("an attribute without a Copy callback was copied")
	}
	if err := c.SetAttr(k, 10); err != nil || len(deleted) != 1 || deleted[0] != 1 {
		t.Fatalf("replacing an attribute deleted %v (%v)", deleted, err)
	}
	if err := d.Free(); err != nil || len(deleted) != 2 || deleted[1] != 2 {
		t.Fatalf("Free deleted %v (%v)", deleted, err)
	}
	if err := c.DeleteAttr(k); err != nil || len(deleted) != 3 {
		t.Fatalf("DeleteAttr deleted %v (%v)", deleted, err)
	}
	if err := c.DeleteAttr(k); err == nil {
		t.Fatal("deleting a missing attribute succeeded")
	}
	c.Free()
}
