package adi

import (
	"sync/atomic"

	"github.com/adimpi/adimpi/internal/order"
)

// Wildcards and the null process, as world- or communicator-rank values.
const (
	AnySource = -2
	AnyTag    = -1
	ProcNull  = -1
)

// Op says whether a request sends or receives.
type Op uint8

// The request operations.
const (
	OpSend Op = iota + 1
	OpRecv
)

// Mode is an MPI send mode. Buffered sends reach the device as Standard
// sends of a copy the core made.
type Mode uint8

// The send modes a device sees.
const (
	ModeStandard Mode = iota
	ModeSync          // completes only once a matching receive has started
	ModeReady         // a matching receive is already posted (the device may treat it as standard)
)

// Envelope is what MPI matches on. Source is a world rank.
type Envelope struct {
	Context uint32
	Source  int
	Tag     int
}

// Status describes a completed request.
type Status struct {
	Source    int   // world rank of the sender (receives)
	Tag       int   // the message's tag (receives)
	Bytes     int   // packed bytes received (receives) or sent
	Cancelled bool  // the request was cancelled
	Err       error // the request's own error, e.g. ErrTruncate
}

// Request is one point-to-point operation in flight. The core fills in the
// operation and arguments; the device keeps its own state in Dev and calls
// Complete once.
type Request struct {
	Op      Op
	Mode    Mode
	Context uint32
	Peer    int // world rank: destination of a send; source (or AnySource) of a receive
	Tag     int // tag of a send; tag (or AnyTag) of a receive
	Buf     Buffer

	Status Status
	Dev    any            // device-private state
	OnDone func(*Request) // called by Complete (core use: buffered sends)

	// MatchSeq is owned by package adi/match: the receive's place in the
	// order of posting while it waits in the posted queues.
	MatchSeq uint64

	// Held is set by the core while it looks at the request's completion
	// only under the lock that serialises its device calls, and only on a
	// device that completes requests there alone (LockedCompleter):
	// Complete then marks the request done with a plain store, which that
	// lock orders, instead of an atomic one. The core clears Held, under
	// the lock, before it waits for the request without the lock.
	Held bool
	fin  bool   // done, when completed while Held
	done uint32 // done (1), when completed otherwise: a release store, read atomically
}

// Matches reports whether a message with envelope e may be received by this
// receive request.
func (r *Request) Matches(e Envelope) bool {
	return r.Context == e.Context &&
		(r.Peer == AnySource || r.Peer == e.Source) &&
		(r.Tag == AnyTag || r.Tag == e.Tag)
}

// Complete records the final status and marks the request done. A device
// calls it exactly once per started request.
func (r *Request) Complete(st Status) {
	onDone := r.OnDone // read before done: a waiter may reuse r at once
	// Field by field: copying st whole goes through the stack, whose
	// wide loads of narrow stores stall on the per-message path.
	r.Status.Source, r.Status.Tag, r.Status.Bytes = st.Source, st.Tag, st.Bytes
	r.Status.Cancelled, r.Status.Err = st.Cancelled, st.Err
	r.Dev = nil
	if r.Held {
		r.fin = true
	} else {
		// A release store, not atomic's sequentially consistent one
		// (an XCHG on amd64, which waits for the status's stores to
		// reach the cache): a waiter that sees done sees the status.
		order.StoreRelease32(&r.done, 1)
	}
	if onDone != nil {
		onDone(r)
	}
}

// Done reports whether the request has completed. It may be called without
// the core's lock.
func (r *Request) Done() bool { return r.fin || atomic.LoadUint32(&r.done) != 0 }

// Restart makes r, a completed request that nothing else reaches any
// more (the core's pool of them), a new operation with these arguments
// and nothing else set, as a fresh Request would be. It clears the done
// flag without an atomic store: r's completion, seen through Done,
// happened before, and no other goroutine looks at r until it is
// started.
func (r *Request) Restart(op Op, mode Mode, ctx uint32, peer, tag int, buf *Buffer) {
	r.Op, r.Mode, r.Context, r.Peer, r.Tag = op, mode, ctx, peer, tag
	r.Buf.Mem, r.Buf.Count, r.Buf.Type = buf.Mem, buf.Count, buf.Type
	r.Status.Source, r.Status.Tag, r.Status.Bytes = 0, 0, 0
	r.Status.Cancelled, r.Status.Err = false, nil
	r.Dev, r.OnDone, r.MatchSeq = nil, nil, 0
	r.Held, r.fin = false, false
	r.done = 0
}

// Reset makes a completed request startable again (persistent requests).
func (r *Request) Reset() {
	r.Status = Status{}
	r.Dev = nil
	r.Held, r.fin = false, false
	atomic.StoreUint32(&r.done, 0)
}
