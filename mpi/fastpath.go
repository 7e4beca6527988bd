package mpi

import (
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// Requests the caller owns. Isend and Irecv return a new handle for every
// operation: the program may still hold a completed one (Wait on it
// returns the empty status), so handles are never reused, and a stream of
// small messages leaves one handle of garbage per message, which the
// collector must then run for. IsendIn and IrecvIn instead start the
// operation in a Request that the caller keeps, as MPI_Isend writes into
// the caller's MPI_Request: an array of them serves window after window
// with no allocation at all. Such a Request keeps the runtime's record of
// its operation (its body) when the operation completes, and the next one
// started in it reuses that record: no trip through the runtime's pool,
// and the same memory window after window.

// IsendIn starts a standard-mode send of buf, as Isend does, in the
// request q that the caller owns. q must be inactive: a zero Request, or
// one whose operation Wait, Test or an array call has completed (or that
// Free released). It stays active until one of those completes it; then
// it may start another operation. A Request must not be copied.
func IsendIn[T Numeric](q *Request, c *Comm, buf []T, dest, tag int) error {
	var b Buffer
	sliceInto(&b, buf)
	return startSliceIn(q, "MPI_Isend", c, &b, dest, tag, false)
}

// IrecvIn posts a receive into buf, as Irecv does, in the request q that
// the caller owns (see IsendIn).
func IrecvIn[T Numeric](q *Request, c *Comm, buf []T, src, tag int) error {
	var b Buffer
	sliceInto(&b, buf)
	return startSliceIn(q, "MPI_Irecv", c, &b, src, tag, true)
}

// sliceInto sets *b to Slice(s) field by field: Slice's result, returned
// whole, is spilled and copied through the stack, whose wide loads of
// narrow stores stall on the per-message path.
func sliceInto[T Numeric](b *Buffer, s []T) {
	t := datatype.Of[T]()
	b.Type, b.Count = t, len(s)
	if len(s) > 0 {
		b.Mem = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*t.Size())
	}
}

// startSliceIn is startIn for a buffer that sliceInto made from a Go
// slice: its type is predefined (usable, contiguous) and its memory holds
// exactly its count, so of plainNB's tests only the communicator's, the
// peer's and the tag's are left to make on every message.
func startSliceIn(q *Request, op string, c *Comm, b *Buffer, peer, tag int, recv bool) error {
	if q != nil && q.ar == nil && b.Type.Predefined() && plainPeer(c, peer, tag, recv) {
		if r := live.Load(); r != nil {
			_, err := r.startFlatIn(q, op, c, b, peer, tag, recv, adi.ModeStandard)
			return err
		}
	}
	return startIn(q, op, c, b, peer, tag, recv)
}

// IsendBufIn is IsendIn for a Buffer.
func IsendBufIn(q *Request, c *Comm, b Buffer, dest, tag int) error {
	return startIn(q, "MPI_Isend", c, &b, dest, tag, false)
}

// IrecvBufIn is IrecvIn for a Buffer.
func IrecvBufIn(q *Request, c *Comm, b Buffer, src, tag int) error {
	return startIn(q, "MPI_Irecv", c, &b, src, tag, true)
}

// startIn starts a standard-mode send or a receive in the caller's
// request q: on the flat path when the arguments are plain (plainNB),
// else through startNB, whose new handle q then takes over. The buffer
// comes by pointer, as it does to everything on the flat path: a Buffer
// passed by value is spilled and copied through the stack at each call.
func startIn(q *Request, op string, c *Comm, b *Buffer, peer, tag int, recv bool) error {
	if q == nil {
		return c.raise(errorf(ErrRequest, op, "request is nil"))
	}
	if q.ar != nil {
		return c.raise(errorf(ErrRequest, op, "request is still active; Wait for it first"))
	}
	if r := live.Load(); r != nil && plainNB(c, b, peer, tag, recv) {
		_, err := r.startFlatIn(q, op, c, b, peer, tag, recv, adi.ModeStandard)
		return err
	}
	h, err := startNB(op, c, *b, peer, tag, recv, adi.ModeStandard, false)
	if err != nil {
		return err
	}
	*q = *h // h is dropped: q holds its operation from now on
	return nil
}
