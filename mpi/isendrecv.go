package mpi

import "github.com/adimpi/adimpi/adi"

// IsendrecvBuf starts a Sendrecv (MPI_Isendrecv): sb goes to dest with
// sendtag while rb receives from src with recvtag. The request completes
// when both have; its status is the receive's, and its error the send's if
// the send failed, else the receive's.
func IsendrecvBuf(c *Comm, sb Buffer, dest, sendtag int, rb Buffer, src, recvtag int) (*Request, error) {
	return isendrecv("MPI_Isendrecv", c, sb, dest, sendtag, rb, src, recvtag)
}

// IsendrecvReplaceBuf starts a SendrecvReplace (MPI_Isendrecv_replace):
// b's contents go to dest, and the message from src replaces them once the
// request completes.
func IsendrecvReplaceBuf(c *Comm, b Buffer, dest, sendtag, src, recvtag int) (*Request, error) {
	const op = "MPI_Isendrecv_replace"
	if err := checkBuffer(op, b); err != nil {
		return nil, c.raise(err)
	}
	tmp := make([]byte, b.Size())
	b.CopyOut(0, tmp)
	return isendrecv(op, c, adi.Bytes(tmp), dest, sendtag, b, src, recvtag)
}

// Isendrecv starts sending sendbuf to dest and receiving into recvbuf from
// src (MPI_Isendrecv).
func Isendrecv[S, R Numeric](c *Comm, sendbuf []S, dest, sendtag int, recvbuf []R, src, recvtag int) (*Request, error) {
	return IsendrecvBuf(c, Slice(sendbuf), dest, sendtag, Slice(recvbuf), src, recvtag)
}

// IsendrecvReplace starts sending buf to dest and replacing its contents
// with a message from src (MPI_Isendrecv_replace).
func IsendrecvReplace[T Numeric](c *Comm, buf []T, dest, sendtag, src, recvtag int) (*Request, error) {
	return IsendrecvReplaceBuf(c, Slice(buf), dest, sendtag, src, recvtag)
}

// isendrecv posts the receive and the send, and returns a request whose
// goroutine waits for both, like a non-blocking collective's.
func isendrecv(op string, c *Comm, sb Buffer, dest, sendtag int, rb Buffer, src, recvtag int) (*Request, error) {
	rq, err := startNB(op, c, rb, src, recvtag, true, adi.ModeStandard, false)
	if err != nil {
		return nil, err
	}
	sq, err := startNB(op, c, sb, dest, sendtag, false, adi.ModeStandard, false)
	if err != nil {
		rq.Cancel()
		rq.wait()
		return nil, err // startNB ran the error handler
	}
	q := &Request{rt: rq.rt, comm: c, op: op, peer: src, tag: recvtag}
	ar, bg := &adi.Request{}, make(chan struct{})
	q.ar, q.bg = ar, bg
	var st Status
	go func() {
		defer close(bg)
		// wait, not Wait: the error handler runs once, in the
		// program's Wait on q.
		_, serr := sq.wait()
		rst, rerr := rq.wait()
		if rerr != nil && rst.Err == nil {
			rst.Err = rerr // the wait failed, not the receive
		}
		if serr != nil {
			rst.Err = serr
		}
		st = rst
		ar.Complete(adi.Status{Source: rst.Source, Tag: rst.Tag, Err: rst.Err, Bytes: rst.bytes})
		q.rt.dev.Wake() // a waiter may be asleep on the doorbell
	}()
	// st is written before ar completes and read only after.
	q.complete = func(s *Status) { *s = st }
	return q, nil
}
