package mpi_test

import (
	"errors"
	"testing"

	"github.com/adimpi/adimpi/mpi"
)

// raised records the calls of a user error handler.
type raised struct {
	comms []*mpi.Comm
	errs  []error
}

func (r *raised) handler() *mpi.Errhandler {
	return mpi.NewErrhandler(func(c *mpi.Comm, err error) {
		r.comms = append(r.comms, c)
		r.errs = append(r.errs, err)
	})
}

// check fails unless the handler ran exactly once, since the last check,
// for c with err, the error the call returned, of class class.
func (r *raised) check(t *testing.T, what string, c *mpi.Comm, err error, class mpi.Class) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Errorf("%s: returned %v, want %v", what, err, class)
	}
	if len(r.errs) != 1 || r.comms[0] != c || r.errs[0] != err {
		t.Errorf("%s: handler calls %v on %v, want one with the returned error on %s", what, r.errs, r.comms, c.Name())
	}
	r.comms, r.errs = nil, nil
}

func TestErrhandlerDefaultIsErrorsReturn(t *testing.T) {
	h, err := mpi.World().GetErrhandler()
	if err != nil || h != mpi.ErrorsReturn {
		t.Fatalf("MPI_COMM_WORLD's handler is %v (%v), want MPI_ERRORS_RETURN", h, err)
	}
}

// A user handler runs once for each failing call on its communicator, with
// the error that the call still returns; communicators made from it inherit
// it.
func TestErrhandlerUser(t *testing.T) {
	d, err := mpi.World().Dup()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free()
	var r raised
	h := r.handler()
	if err := d.SetErrhandler(h); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.GetErrhandler(); got != h {
		t.Fatalf("GetErrhandler gave %v, want the handler set", got)
	}

	buf := make([]int32, 4)
	r.check(t, "Send to rank 5", d, mpi.Send(d, buf, 5, 0), mpi.ErrRank)
	_, err = mpi.Recv(d, buf, 0, -7)
	r.check(t, "Recv with tag -7", d, err, mpi.ErrTag)
	r.check(t, "Bcast from root 3", d, mpi.Bcast(d, buf, 3), mpi.ErrRoot)

	// A request's error runs its communicator's handler once, in Wait.
	q, err := mpi.Irecv(d, buf[:2], 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := mpi.Send(d, buf, 0, 1); err != nil {
		t.Fatal(err)
	}
	if len(r.errs) != 0 {
		t.Fatalf("handler ran before the failing Wait: %v", r.errs)
	}
	_, err = q.Wait()
	r.check(t, "Wait on a truncated receive", d, err, mpi.ErrTruncate)

	// Dup and Split inherit the handler.
	d2, err := d.Dup()
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Free()
	s, err := d.Split(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	for _, c := range []*mpi.Comm{d2, s} {
		if got, _ := c.GetErrhandler(); got != h {
			t.Errorf("%s's handler is %v, want the parent's", c.Name(), got)
		}
		r.check(t, "Send to rank 5 on "+c.Name(), c, mpi.Send(c, buf, 5, 0), mpi.ErrRank)
	}

	// Back to MPI_ERRORS_RETURN: the handler no longer runs; the parent's
	// world is untouched.
	if err := d.SetErrhandler(mpi.ErrorsReturn); err != nil {
		t.Fatal(err)
	}
	if err := mpi.Send(d, buf, 5, 0); !errors.Is(err, mpi.ErrRank) || len(r.errs) != 0 {
		t.Fatalf("after ErrorsReturn: returned %v, handler calls %v", err, r.errs)
	}
	if got, _ := mpi.World().GetErrhandler(); got != mpi.ErrorsReturn {
		t.Fatalf("MPI_COMM_WORLD's handler became %v", got)
	}
}
