package mpi

import "github.com/adimpi/adimpi/adi"

// Matched probes (MPI_Mprobe): a probe that removes the message it finds
// from matching, so that no other receive, in this goroutine or another,
// can take it before the Mrecv that names it. The device interface has a
// probe but no dequeue; under the same hold of the runtime's lock as the
// probe that found it, the message is claimed by a receive posted for
// exactly its (source, tag, context) into a buffer of its size. Messages
// from one source do not overtake each other, and the probed one is the
// first from its source with its tag (any earlier one would have matched
// the probe first), so that receive matches it and nothing else. Mrecv then
// copies the data into the program's buffer.

// Message is a message taken out of matching by Mprobe or Improbe
// (MPI_Message), to be received by Mrecv or Imrecv, once.
type Message struct {
	comm   *Comm
	ar     *adi.Request // the receive that claimed the message, into buf
	buf    []byte
	src    int // the sender's rank in comm
	noProc bool
	taken  bool // Mrecv or Imrecv has started on it
}

// MessageNoProc is the message a matched probe of ProcNull returns
// (MPI_MESSAGE_NO_PROC): receiving it completes at once with source
// ProcNull, tag AnyTag and no data.
var MessageNoProc = &Message{noProc: true}

// Mprobe blocks until a message matching (src, tag) on c can be received,
// removes it from matching and returns it with its status (MPI_Mprobe): only
// Mrecv or Imrecv of the returned Message receives it.
func Mprobe(c *Comm, src, tag int) (*Message, Status, error) {
	const op = "MPI_Mprobe"
	r, err := current(op)
	if err != nil {
		return nil, emptyStatus, err
	}
	if err := probeArgs(op, c, src, tag); err != nil {
		return nil, emptyStatus, c.raise(err)
	}
	if src == ProcNull {
		return MessageNoProc, Status{Source: ProcNull, Tag: AnyTag}, nil
	}
	var m *Message
	var perr error
	err = r.waitFor(func() bool {
		m, perr = r.claim(c, src, tag)
		return m != nil || perr != nil
	})
	if err == nil {
		err = named(op, perr)
	}
	if err != nil {
		return nil, emptyStatus, c.raise(err)
	}
	return m, m.probed(), nil
}

// Improbe is Mprobe without blocking (MPI_Improbe): it reports false, and a
// nil Message, when no matching message can be received yet.
func Improbe(c *Comm, src, tag int) (*Message, Status, bool, error) {
	const op = "MPI_Improbe"
	r, err := current(op)
	if err != nil {
		return nil, emptyStatus, false, err
	}
	if err := probeArgs(op, c, src, tag); err != nil {
		return nil, emptyStatus, false, c.raise(err)
	}
	if src == ProcNull {
		return MessageNoProc, Status{Source: ProcNull, Tag: AnyTag}, true, nil
	}
	if err := r.progress(); err != nil {
		return nil, emptyStatus, false, c.raise(named(op, err))
	}
	m, err := r.claim(c, src, tag)
	if m == nil || err != nil {
		return nil, emptyStatus, false, c.raise(named(op, err))
	}
	return m, m.probed(), true, nil
}

// claim probes for a message matching (src, tag) on c and, under the same
// hold of the lock, posts the receive that takes it out of matching.
func (r *runtime) claim(c *Comm, src, tag int) (*Message, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok, err := r.dev.Iprobe(c.ctx, c.worldRank(src), tag)
	if !ok || err != nil {
		return nil, err
	}
	m := &Message{comm: c, buf: make([]byte, st.Bytes), src: c.commRank(st.Source)}
	m.ar = &adi.Request{Op: adi.OpRecv, Mode: adi.ModeStandard, Context: c.ctx,
		Peer: st.Source, Tag: st.Tag, Buf: adi.Bytes(m.buf)}
	if err := r.dev.Irecv(m.ar); err != nil {
		return nil, err
	}
	return m, nil
}

// probed is the status a matched probe reports for m.
func (m *Message) probed() Status {
	return Status{Source: m.src, Tag: m.ar.Tag, bytes: len(m.buf)}
}

// MrecvBuf receives the message m that a matched probe returned into b
// (MPI_Mrecv). A message longer than b fills it and gives ErrTruncate.
func MrecvBuf(m *Message, b Buffer) (Status, error) {
	q, err := startMrecv("MPI_Mrecv", m, b)
	if err != nil {
		return emptyStatus, err
	}
	return q.Wait()
}

// ImrecvBuf starts receiving the message m into b (MPI_Imrecv).
func ImrecvBuf(m *Message, b Buffer) (*Request, error) {
	return startMrecv("MPI_Imrecv", m, b)
}

// Mrecv receives the message m into buf (MPI_Mrecv).
func Mrecv[T Numeric](m *Message, buf []T) (Status, error) { return MrecvBuf(m, Slice(buf)) }

// Imrecv starts receiving the message m into buf (MPI_Imrecv).
func Imrecv[T Numeric](m *Message, buf []T) (*Request, error) { return ImrecvBuf(m, Slice(buf)) }

// startMrecv checks m and b and returns the request that completes with the
// message copied into b: the claiming receive, which the request's
// complete hook copies out of.
func startMrecv(op string, m *Message, b Buffer) (*Request, error) {
	var c *Comm // whose error handler runs: the message's, else MPI_COMM_WORLD's
	if m != nil {
		c = m.comm
	}
	q, err := newMrecv(op, m, b)
	return q, c.raise(err)
}

// newMrecv is startMrecv without the error handler.
func newMrecv(op string, m *Message, b Buffer) (*Request, error) {
	r, err := current(op)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errorf(ErrRequest, op, "message is nil (MPI_MESSAGE_NULL)")
	}
	if err := checkBuffer(op, b); err != nil {
		return nil, err
	}
	q := &Request{rt: r, op: op, recv: true, tag: AnyTag}
	if m.noProc {
		q.comm, q.peer = r.self, ProcNull
		q.ar = &adi.Request{}
		q.ar.Complete(adi.Status{Source: ProcNull, Tag: AnyTag})
		return q, nil
	}
	if m.taken {
		return nil, errorf(ErrRequest, op, "message from rank %d, tag %d, was already received", m.src, m.ar.Tag)
	}
	if err := checkComm(op, m.comm); err != nil {
		return nil, err
	}
	m.taken = true
	q.comm, q.peer, q.tag, q.ar = m.comm, m.src, m.ar.Tag, m.ar
	q.complete = func(st *Status) {
		if st.Err != nil {
			return
		}
		n := min(len(m.buf), b.Size())
		b.CopyIn(0, m.buf[:n])
		st.bytes = n
		if n < len(m.buf) {
			st.Err = errorf(ErrTruncate, op, "message of %d bytes from rank %d, tag %d, does not fit the receive buffer of %d bytes (%d × %s)",
				len(m.buf), m.src, m.ar.Tag, b.Size(), b.Count, b.Type)
		}
	}
	if r.asyncOn.Load() {
		r.kick()
	}
	return q, nil
}
