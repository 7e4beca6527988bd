package mpi_test

import (
	"errors"
	"testing"

	"github.com/adimpi/adimpi/mpi"
)

// TestSelfEmptyMessages: empty messages against self, into a posted
// receive (Irecv, then Send) and as unexpected messages (Send, then Recv),
// take the devices' eager receive without a copy: the status counts 0
// bytes and names the sender and tag (also under AnySource and AnyTag), a
// longer receive buffer is left as it was, and a non-empty message into an
// empty receive is still MPI_ERR_TRUNCATE.
func TestSelfEmptyMessages(t *testing.T) {
	w := mpi.World()
	for _, posted := range []bool{true, false} {
		for _, any := range []bool{false, true} {
			src, tag := 0, 21
			if any {
				src, tag = mpi.AnySource, mpi.AnyTag
			}
			in := []int32{7, 7}
			st, err := exchange(t, w, posted, []int32{}, in, src, tag)
			if err != nil || st.Source != 0 || st.Tag != 21 || st.Bytes() != 0 || mpi.CountOf[int32](st) != 0 || in[0] != 7 || in[1] != 7 {
				t.Errorf("0 B into 8 B (posted %v, any %v): status %+v bytes %d, %v, buffer %v", posted, any, st, st.Bytes(), err, in)
			}
			st, err = exchange(t, w, posted, []int32{}, []int32{}, src, tag)
			if err != nil || st.Bytes() != 0 || st.Tag != 21 {
				t.Errorf("0 B into 0 B (posted %v, any %v): status %+v, %v", posted, any, st, err)
			}
			st, err = exchange(t, w, posted, []int32{1, 2}, []int32{}, src, tag)
			if !errors.Is(err, mpi.ErrTruncate) || st.Tag != 21 {
				t.Errorf("8 B into 0 B (posted %v, any %v): status %+v, %v; want MPI_ERR_TRUNCATE", posted, any, st, err)
			}
		}
	}
}

// exchange sends out to self with tag 21 and receives it into in from src
// with tag, the receive posted before the send or after it.
func exchange(t *testing.T, w *mpi.Comm, posted bool, out, in []int32, src, tag int) (mpi.Status, error) {
	t.Helper()
	if !posted {
		if err := mpi.Send(w, out, 0, 21); err != nil {
			t.Fatal(err)
		}
		return mpi.Recv(w, in, src, tag)
	}
	q, err := mpi.Irecv(w, in, src, tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := mpi.Send(w, out, 0, 21); err != nil {
		t.Fatal(err)
	}
	return q.Wait()
}
