package mpi

import "github.com/adimpi/adimpi/datatype"

// Status describes a completed receive (or probe, or cancelled request).
type Status struct {
	Source    int   // the sender's rank in the communicator
	Tag       int   // the message's tag
	Cancelled bool  // the request was cancelled
	Err       error // this request's error (MPI_ERROR), e.g. ErrTruncate
	bytes     int
}

// Bytes is the number of data bytes received.
func (s Status) Bytes() int { return s.bytes }

// Count is the number of whole elements of type t received, or Undefined if
// the bytes are not a whole number of them.
func (s Status) Count(t *datatype.Type) int {
	if t == nil || t.Size() == 0 {
		if s.bytes == 0 {
			return 0
		}
		return Undefined
	}
	if s.bytes%t.Size() != 0 {
		return Undefined
	}
	return s.bytes / t.Size()
}

// Elements is the number of basic (predefined) elements of type t received
// (MPI_Get_elements), counting those of a partially received element of a
// derived type; Undefined if the bytes end inside a basic element. For the
// predefined types it equals Count.
func (s Status) Elements(t *datatype.Type) int {
	if t == nil {
		return Undefined
	}
	if n := t.Elements(s.bytes); n >= 0 {
		return n
	}
	return Undefined
}

// CountOf is the number of elements of Go type T received.
func CountOf[T Numeric](s Status) int { return s.Count(datatype.Of[T]()) }
