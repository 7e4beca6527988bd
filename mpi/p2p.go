package mpi

import (
	"math/bits"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// Numeric is the set of Go element types that the generic calls accept: every
// type whose underlying type is an integer, float or complex type.
type Numeric interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// Buffer is a (memory, count, datatype) triple, the form every call takes in
// its *Buf variant (SendBuf, RecvBuf, ...). Build one with Slice or Typed.
type Buffer = adi.Buffer

// Slice describes a Go slice as a buffer of len(s) elements of its predefined type.
func Slice[T Numeric](s []T) Buffer {
	t := datatype.Of[T]()
	if len(s) == 0 {
		return Buffer{Count: 0, Type: t}
	}
	mem := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*t.Size())
	return Buffer{Mem: mem, Count: len(s), Type: t}
}

// Typed describes count elements of type t laid out in mem. mem[0] is the
// buffer's origin (MPI's buf), or, for a type whose true lower bound is
// negative, origin+TrueLB (see datatype.Type.Span). Calls check that mem is
// long enough and that t is committed.
func Typed(mem []byte, count int, t *datatype.Type) Buffer {
	return Buffer{Mem: mem, Count: count, Type: t}
}

func checkComm(op string, c *Comm) error {
	if c == nil {
		return errorf(ErrComm, op, "communicator is nil (MPI_COMM_NULL)")
	}
	if c.freed {
		return errorf(ErrComm, op, "communicator %s has been freed", c.name)
	}
	return nil
}

func checkBuffer(op string, b Buffer) error {
	if b.Type == nil {
		return errorf(ErrType, op, "datatype is nil")
	}
	if b.Count < 0 {
		return errorf(ErrCount, op, "count %d is negative", b.Count)
	}
	if b.Type.Freed() {
		return errorf(ErrType, op, "datatype %s has been freed", b.Type)
	}
	if !b.Type.Committed() {
		return errorf(ErrType, op, "datatype %s is not committed (call Commit)", b.Type)
	}
	if need := b.Type.Span(b.Count); len(b.Mem) < need {
		return errorf(ErrBuffer, op, "buffer of %d bytes is too short for %d elements of %s (%d bytes)", len(b.Mem), b.Count, b.Type, need)
	}
	return nil
}

func checkPeer(op string, c *Comm, peer int, recv bool) error {
	if peer == ProcNull || (recv && peer == AnySource) {
		return nil
	}
	if peer < 0 || peer >= len(c.world) { // the remote group's size on an intercommunicator
		what := "dest"
		if recv {
			what = "source"
		}
		return errorf(ErrRank, op, "%s %d is out of range [0, %d) of %s", what, peer, len(c.world), c.Name())
	}
	return nil
}

func checkTag(op string, tag int, recv bool) error {
	if (recv && tag == AnyTag) || (tag >= 0 && tag <= TagUB) {
		return nil
	}
	return errorf(ErrTag, op, "tag %d is outside [0, %d]", tag, TagUB)
}

// plainArgs reports, cheaply, whether a point-to-point call's arguments
// are valid and name an ordinary peer and tag (no ProcNull, wildcard or
// error): the per-message test of blocking calls, which leave everything
// else to p2pArgs.
func plainArgs(c *Comm, b *Buffer, peer, tag int) bool {
	t := b.Type
	return c != nil && !c.freed && t != nil && b.Count >= 0 && t.Usable() &&
		uint(peer) < uint(len(c.world)) && uint(tag) <= TagUB && fits(b)
}

// p2pArgs checks the arguments of a point-to-point call and returns the
// runtime.
func p2pArgs(op string, c *Comm, b Buffer, peer, tag int, recv bool) (*runtime, error) {
	r, err := current(op)
	if err != nil {
		return nil, err
	}
	if err := checkComm(op, c); err != nil {
		return nil, err
	}
	if err := checkBuffer(op, b); err != nil {
		return nil, err
	}
	if err := checkPeer(op, c, peer, recv); err != nil {
		return nil, err
	}
	if err := checkTag(op, tag, recv); err != nil {
		return nil, err
	}
	return r, nil
}

// newRequest checks the arguments of a point-to-point call and builds its
// (not yet started) request.
func newRequest(op string, c *Comm, b Buffer, peer, tag int, recv bool, mode adi.Mode, buffered bool) (*Request, error) {
	r, err := p2pArgs(op, c, b, peer, tag, recv)
	if err != nil {
		return nil, c.raise(err)
	}
	q, _ := r.reqs.Get().(*Request)
	if q == nil {
		q = r.newHandle()
	}
	// Field by field: a pooled request is inactive (ar, bg, plan and body
	// nil, not persistent).
	q.rt, q.comm, q.op = r, c, op
	q.recv, q.mode, q.buffered = recv, mode, buffered
	q.peer, q.tag = peer, tag
	r.mu.Lock()
	ar := r.takeBody()
	r.mu.Unlock()
	ar.Buf = b // start resets the rest
	q.body = ar
	return q, nil
}

func startNew(op string, c *Comm, b Buffer, peer, tag int, recv bool, mode adi.Mode, buffered bool) (*Request, error) {
	q, err := newRequest(op, c, b, peer, tag, recv, mode, buffered)
	if err != nil {
		return nil, err
	}
	if err := q.start(); err != nil {
		return nil, c.raise(named(op, err))
	}
	return q, nil
}

// startNB starts a non-blocking operation: the program may now compute
// while it is in flight, which the progress goroutine is told.
func startNB(op string, c *Comm, b Buffer, peer, tag int, recv bool, mode adi.Mode, buffered bool) (*Request, error) {
	if r := live.Load(); r != nil && !buffered && plainNB(c, &b, peer, tag, recv) {
		return r.startFlatIn(nil, op, c, &b, peer, tag, recv, mode)
	}
	q, err := startNew(op, c, b, peer, tag, recv, mode, buffered)
	if err == nil && q.rt.asyncOn.Load() {
		q.rt.kick()
	}
	return q, err
}

// plainNB reports, cheaply, whether a non-blocking call's arguments are
// valid and name an ordinary peer (or, for a receive, AnySource) and an
// ordinary tag (or, for a receive, AnyTag): the per-message test of
// Isend and Irecv, which leave everything else (ProcNull, errors) to
// p2pArgs.
func plainNB(c *Comm, b *Buffer, peer, tag int, recv bool) bool {
	t := b.Type
	return t != nil && b.Count >= 0 && t.Usable() && plainPeer(c, peer, tag, recv) && fits(b)
}

// plainPeer is plainNB's test of the communicator, the peer and the tag.
func plainPeer(c *Comm, peer, tag int, recv bool) bool {
	return c != nil && !c.freed &&
		(uint(peer) < uint(len(c.world)) || recv && peer == AnySource) &&
		(uint(tag) <= TagUB || recv && tag == AnyTag)
}

// fits reports whether b.Mem holds b.Count elements of b.Type (a usable
// type): for a contiguous type without the general Span's arithmetic.
func fits(b *Buffer) bool {
	t := b.Type
	if t.Contiguous() {
		// A product checked for overflow, not a division: fits runs on
		// every message, and a division costs tens of cycles.
		hi, lo := bits.Mul64(uint64(b.Count), uint64(t.Size()))
		return hi == 0 && lo <= uint64(len(b.Mem))
	}
	return len(b.Mem) >= t.Span(b.Count)
}

// startFlatIn is the flat non-blocking path of Isend, Issend, Irsend and
// Irecv with plain arguments (plainNB), into the inactive request q that
// the caller owns (IsendIn, IrecvIn), or, when q is nil, into a new
// handle from the slab: the operation's adi.Request from r.bodies and
// the device call, all under one hold of the lock, and nothing allocated
// but a new handle's share of its slab. It returns the request started.
func (r *runtime) startFlatIn(q *Request, op string, c *Comm, b *Buffer, peer, tag int, recv bool, mode adi.Mode) (*Request, error) {
	wpeer := peer
	if peer >= 0 {
		wpeer = c.world[peer]
	}
	r.mu.Lock()
	if q == nil {
		q = r.newHandleHeld()
	} else {
		q.owned = true
	}
	q.reset(r, c, op, recv, mode, peer, tag)
	if !recv && mode == adi.ModeStandard && r.short != nil && b.Type.Contiguous() &&
		r.hotShort().SendShort(c.ctx, wpeer, tag, b.Type.Signature(), b.Mem[:b.Size()]) {
		// The device took the data at once, as a blocking Send's does
		// (sendShort): the send is complete, with no operation in flight
		// and nothing for Wait to give back but its byte count.
		q.ar, q.sent = &r.sentShort, b.Size()
		r.mu.Unlock()
		return q, nil
	}
	ar := q.body // an owned request's, from its last operation
	if ar == nil {
		ar = r.takeBody()
		q.body = ar
	}
	q.ar = ar
	var err error
	if recv {
		ar.Restart(adi.OpRecv, mode, c.ctx, wpeer, tag, b)
		err = r.hot().Irecv(ar)
	} else {
		ar.Restart(adi.OpSend, mode, c.ctx, wpeer, tag, b)
		err = r.hot().Isend(ar)
	}
	r.mu.Unlock()
	if err != nil {
		q.ar = nil
		return nil, c.raise(named(op, err))
	}
	if r.asyncOn.Load() {
		r.kick()
	}
	return q, nil
}

func persistent(op string, c *Comm, b Buffer, peer, tag int, recv bool, mode adi.Mode, buffered bool) (*Request, error) {
	q, err := newRequest(op, c, b, peer, tag, recv, mode, buffered)
	if err != nil {
		return nil, err
	}
	q.persistent = true
	return q, nil
}

// blocking completes a request that a blocking call started. The caller
// never sees the request, so once it is complete it goes back to the pool
// that newRequest draws from: a blocking Send or Recv allocates nothing.
func blocking(q *Request, err error) (Status, error) {
	if err != nil {
		return emptyStatus, err
	}
	st, err := q.Wait()
	if q.ar == nil && q.bg == nil {
		q.rt.reqs.Put(q)
	}
	return st, err
}

// blockingCall is a blocking Send, Ssend, Rsend or Recv: the program never
// sees its request, so the call runs on a bare adi.Request from a pool,
// without a Request around it — the per-message path of every latency-bound
// program. It writes the operation's status into *st.
func blockingCall(op string, c *Comm, b *Buffer, peer, tag int, recv bool, mode adi.Mode, st *Status) error {
	r := live.Load()
	if r == nil || !plainArgs(c, b, peer, tag) {
		var err error
		if r, err = p2pArgs(op, c, *b, peer, tag, recv); err != nil {
			*st = emptyStatus
			return c.raise(err)
		}
		if peer == ProcNull {
			if recv {
				*st = Status{Source: ProcNull, Tag: AnyTag}
				return nil
			}
			*st = Status{Source: ProcNull, Tag: tag}
			return nil
		}
	}
	// The request comes from r.bodies under the lock that the device
	// call takes anyway, and goes back there under the same hold when the
	// first polls complete it: no atomic operation of its own on the way
	// from a message's arrival to the return.
	r.mu.Lock()
	ar := r.takeBody()
	var err error
	if recv {
		ar.Restart(adi.OpRecv, mode, c.ctx, c.worldRank(peer), tag, b)
	} else {
		ar.Restart(adi.OpSend, mode, c.ctx, c.worldRank(peer), tag, b)
	}
	// Until the lock is let go, ar's completion is looked at only under
	// it: on a device that completes requests under it alone, Complete
	// may mark ar done without an atomic store.
	ar.Held = r.heldOK
	if recv {
		err = r.hot().Irecv(ar)
	} else {
		err = r.hot().Isend(ar)
	}
	done := false
	if err == nil {
		done, err = r.pollHeld(ar)
	}
	if !done {
		ar.Held = false // waited for without the lock from here on
		r.mu.Unlock()
		if err != nil {
			*st = emptyStatus
			return c.raise(named(op, err))
		}
		if err := r.waitOn(ar.Done, nil, ar, c); err != nil {
			*st = emptyStatus
			return c.raise(named(op, err)) // ar stays with the device
		}
		r.mu.Lock()
	}
	// Field by field into the caller's Status (a struct of five fields
	// lives in memory, and building one and copying it stalls).
	st.Source, st.Tag, st.Cancelled, st.Err, st.bytes = peer, tag, ar.Status.Cancelled, ar.Status.Err, ar.Status.Bytes
	if recv {
		st.Tag = ar.Status.Tag
		if src := ar.Status.Source; peer < 0 || src != ar.Peer {
			st.Source = c.commRank(src)
		}
	}
	r.giveBody(ar)
	r.mu.Unlock()
	if st.Err != nil {
		st.Err = restated(op, st.Err, c.commRank, false)
		return c.raise(st.Err)
	}
	return nil
}

func sendErr(_ Status, err error) error { return err }

// IsendBuf starts a standard-mode send.
func IsendBuf(c *Comm, b Buffer, dest, tag int) (*Request, error) {
	return startNB("MPI_Isend", c, b, dest, tag, false, adi.ModeStandard, false)
}

// IssendBuf starts a synchronous send: it completes only once the matching
// receive has started.
func IssendBuf(c *Comm, b Buffer, dest, tag int) (*Request, error) {
	return startNB("MPI_Issend", c, b, dest, tag, false, adi.ModeSync, false)
}

// IbsendBuf starts a buffered send: the data is copied into the buffer given
// to BufferAttach, and the request completes at once.
func IbsendBuf(c *Comm, b Buffer, dest, tag int) (*Request, error) {
	return startNB("MPI_Ibsend", c, b, dest, tag, false, adi.ModeStandard, true)
}

// IrsendBuf starts a ready-mode send; the matching receive must already be posted.
func IrsendBuf(c *Comm, b Buffer, dest, tag int) (*Request, error) {
	return startNB("MPI_Irsend", c, b, dest, tag, false, adi.ModeReady, false)
}

// IrecvBuf posts a receive.
func IrecvBuf(c *Comm, b Buffer, src, tag int) (*Request, error) {
	return startNB("MPI_Irecv", c, b, src, tag, true, adi.ModeStandard, false)
}

// SendBuf sends in standard mode and returns once the buffer may be reused.
func SendBuf(c *Comm, b Buffer, dest, tag int) error {
	if plainArgs(c, &b, dest, tag) && b.Type.Contiguous() && sendShort(c, dest, tag, b.Type.Signature(), b.Mem[:b.Size()]) {
		return nil
	}
	var st Status
	return blockingCall("MPI_Send", c, &b, dest, tag, false, adi.ModeStandard, &st)
}

// sendShort is a blocking standard-mode send of contiguous data, whose type
// signature is sig, when the device can put it on the wire at once with no
// request (adi.ShortSender): the path of every small message. It reports
// false, having sent nothing, when the device cannot or the arguments are
// anything but an ordinary valid peer and tag (the caller then takes the
// request path, which reports errors).
func sendShort(c *Comm, dest, tag int, sig uint32, data []byte) bool {
	r := live.Load()
	if r == nil || r.short == nil || c == nil || c.freed || uint(dest) >= uint(len(c.world)) || uint(tag) > TagUB {
		return false
	}
	r.mu.Lock()
	sent := r.hotShort().SendShort(c.ctx, c.world[dest], tag, sig, data)
	r.mu.Unlock()
	return sent
}

// SsendBuf sends synchronously: it returns once the matching receive has started.
func SsendBuf(c *Comm, b Buffer, dest, tag int) error {
	var st Status
	return blockingCall("MPI_Ssend", c, &b, dest, tag, false, adi.ModeSync, &st)
}

// BsendBuf sends through the attached buffer and returns at once.
func BsendBuf(c *Comm, b Buffer, dest, tag int) error {
	return sendErr(blocking(startNew("MPI_Bsend", c, b, dest, tag, false, adi.ModeStandard, true)))
}

// RsendBuf sends in ready mode.
func RsendBuf(c *Comm, b Buffer, dest, tag int) error {
	var st Status
	return blockingCall("MPI_Rsend", c, &b, dest, tag, false, adi.ModeReady, &st)
}

// RecvBuf receives a message.
func RecvBuf(c *Comm, b Buffer, src, tag int) (st Status, err error) {
	// Into the named result: a local Status returned is copied with wide
	// loads of blockingCall's narrow stores, which stall (see Recv).
	err = blockingCall("MPI_Recv", c, &b, src, tag, true, adi.ModeStandard, &st)
	return st, err
}

// SendInitBuf makes a persistent standard-mode send; Start runs it.
func SendInitBuf(c *Comm, b Buffer, dest, tag int) (*Request, error) {
	return persistent("MPI_Send_init", c, b, dest, tag, false, adi.ModeStandard, false)
}

// SsendInitBuf makes a persistent synchronous send.
func SsendInitBuf(c *Comm, b Buffer, dest, tag int) (*Request, error) {
	return persistent("MPI_Ssend_init", c, b, dest, tag, false, adi.ModeSync, false)
}

// BsendInitBuf makes a persistent buffered send.
func BsendInitBuf(c *Comm, b Buffer, dest, tag int) (*Request, error) {
	return persistent("MPI_Bsend_init", c, b, dest, tag, false, adi.ModeStandard, true)
}

// RsendInitBuf makes a persistent ready-mode send.
func RsendInitBuf(c *Comm, b Buffer, dest, tag int) (*Request, error) {
	return persistent("MPI_Rsend_init", c, b, dest, tag, false, adi.ModeReady, false)
}

// RecvInitBuf makes a persistent receive.
func RecvInitBuf(c *Comm, b Buffer, src, tag int) (*Request, error) {
	return persistent("MPI_Recv_init", c, b, src, tag, true, adi.ModeStandard, false)
}

// SendrecvBuf sends one message and receives another, without deadlock
// whatever the partner does first.
func SendrecvBuf(c *Comm, sb Buffer, dest, sendtag int, rb Buffer, src, recvtag int) (Status, error) {
	rq, err := startNew("MPI_Sendrecv", c, rb, src, recvtag, true, adi.ModeStandard, false)
	if err != nil {
		return emptyStatus, err
	}
	sq, err := startNew("MPI_Sendrecv", c, sb, dest, sendtag, false, adi.ModeStandard, false)
	if err != nil {
		rq.Cancel()
		rq.wait()
		return emptyStatus, err
	}
	_, serr := sq.wait()
	st, rerr := rq.wait()
	if serr != nil {
		return st, c.raise(serr)
	}
	return st, c.raise(rerr)
}

// SendrecvReplaceBuf sends the buffer's contents and replaces them with the
// received message.
func SendrecvReplaceBuf(c *Comm, b Buffer, dest, sendtag, src, recvtag int) (Status, error) {
	if err := checkBuffer("MPI_Sendrecv_replace", b); err != nil {
		return emptyStatus, c.raise(err)
	}
	tmp := make([]byte, b.Size())
	b.CopyOut(0, tmp)
	return SendrecvBuf(c, adi.Bytes(tmp), dest, sendtag, b, src, recvtag)
}

// Iprobe reports, without blocking, whether a message matching (src, tag)
// can be received, and its status.
func Iprobe(c *Comm, src, tag int) (Status, bool, error) {
	st, ok, err := iprobe(c, src, tag)
	return st, ok, c.raise(err)
}

func iprobe(c *Comm, src, tag int) (Status, bool, error) {
	const op = "MPI_Iprobe"
	r, err := current(op)
	if err != nil {
		return emptyStatus, false, err
	}
	if err := probeArgs(op, c, src, tag); err != nil {
		return emptyStatus, false, err
	}
	if src == ProcNull {
		return Status{Source: ProcNull, Tag: AnyTag}, true, nil
	}
	if err := r.progress(); err != nil {
		return emptyStatus, false, err
	}
	r.mu.Lock()
	st, ok, err := r.dev.Iprobe(c.ctx, c.worldRank(src), tag)
	r.mu.Unlock()
	if !ok || err != nil {
		return emptyStatus, false, named(op, err)
	}
	return Status{Source: c.commRank(st.Source), Tag: st.Tag, bytes: st.Bytes}, true, nil
}

// Probe blocks until a message matching (src, tag) can be received and
// returns its status; a Recv with the status's source and tag then receives
// exactly that message.
func Probe(c *Comm, src, tag int) (Status, error) {
	st, err := probe(c, src, tag)
	return st, c.raise(err)
}

func probe(c *Comm, src, tag int) (Status, error) {
	const op = "MPI_Probe"
	r, err := current(op)
	if err != nil {
		return emptyStatus, err
	}
	if err := probeArgs(op, c, src, tag); err != nil {
		return emptyStatus, err
	}
	if src == ProcNull {
		return Status{Source: ProcNull, Tag: AnyTag}, nil
	}
	var st adi.Status
	var perr error
	err = r.waitFor(func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		s, ok, e := r.dev.Iprobe(c.ctx, c.worldRank(src), tag)
		st, perr = s, e
		return ok || e != nil
	})
	if err == nil {
		err = named(op, perr)
	}
	if err != nil {
		return emptyStatus, err
	}
	return Status{Source: c.commRank(st.Source), Tag: st.Tag, bytes: st.Bytes}, nil
}

func probeArgs(op string, c *Comm, src, tag int) error {
	if err := checkComm(op, c); err != nil {
		return err
	}
	if err := checkPeer(op, c, src, true); err != nil {
		return err
	}
	return checkTag(op, tag, true)
}

// Send sends buf to rank dest with tag, in standard mode.
func Send[T Numeric](c *Comm, buf []T, dest, tag int) error {
	// A slice of a predefined type is always a valid contiguous buffer.
	t := datatype.Of[T]()
	if sendShort(c, dest, tag, t.Signature(), unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)*t.Size())) {
		return nil
	}
	// The device refused the short path (a peer on another host, a full
	// ring): straight to the request, not through SendBuf, which would
	// ask it again under another hold of the lock.
	b := Slice(buf)
	var st Status
	return blockingCall("MPI_Send", c, &b, dest, tag, false, adi.ModeStandard, &st)
}

// Ssend sends buf synchronously: it returns once the matching receive has started.
func Ssend[T Numeric](c *Comm, buf []T, dest, tag int) error {
	return SsendBuf(c, Slice(buf), dest, tag)
}

// Bsend sends buf through the buffer given to BufferAttach.
func Bsend[T Numeric](c *Comm, buf []T, dest, tag int) error {
	return BsendBuf(c, Slice(buf), dest, tag)
}

// Rsend sends buf in ready mode (the matching receive is already posted).
func Rsend[T Numeric](c *Comm, buf []T, dest, tag int) error {
	return RsendBuf(c, Slice(buf), dest, tag)
}

// Recv receives into buf a message from src (or AnySource) with tag (or AnyTag).
func Recv[T Numeric](c *Comm, buf []T, src, tag int) (st Status, err error) {
	var b Buffer
	sliceInto(&b, buf)
	// blockingCall writes the named result in place: a local Status
	// returned was copied to the result with 16-byte loads of its 8-byte
	// stores, which cannot be forwarded and stalled every receive.
	err = blockingCall("MPI_Recv", c, &b, src, tag, true, adi.ModeStandard, &st)
	return st, err
}

// Isend starts sending buf; buf must not change until the request completes.
func Isend[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return IsendBuf(c, Slice(buf), dest, tag)
}

// Issend starts a synchronous send of buf.
func Issend[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return IssendBuf(c, Slice(buf), dest, tag)
}

// Ibsend starts a buffered send of buf.
func Ibsend[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return IbsendBuf(c, Slice(buf), dest, tag)
}

// Irsend starts a ready-mode send of buf.
func Irsend[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return IrsendBuf(c, Slice(buf), dest, tag)
}

// Irecv starts receiving into buf.
func Irecv[T Numeric](c *Comm, buf []T, src, tag int) (*Request, error) {
	return IrecvBuf(c, Slice(buf), src, tag)
}

// SendInit makes a persistent send of buf; each Start sends buf's current contents.
func SendInit[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return SendInitBuf(c, Slice(buf), dest, tag)
}

// SsendInit makes a persistent synchronous send of buf.
func SsendInit[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return SsendInitBuf(c, Slice(buf), dest, tag)
}

// BsendInit makes a persistent buffered send of buf.
func BsendInit[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return BsendInitBuf(c, Slice(buf), dest, tag)
}

// RsendInit makes a persistent ready-mode send of buf.
func RsendInit[T Numeric](c *Comm, buf []T, dest, tag int) (*Request, error) {
	return RsendInitBuf(c, Slice(buf), dest, tag)
}

// RecvInit makes a persistent receive into buf.
func RecvInit[T Numeric](c *Comm, buf []T, src, tag int) (*Request, error) {
	return RecvInitBuf(c, Slice(buf), src, tag)
}

// Sendrecv sends sendbuf to dest and receives into recvbuf from src.
func Sendrecv[S, R Numeric](c *Comm, sendbuf []S, dest, sendtag int, recvbuf []R, src, recvtag int) (Status, error) {
	return SendrecvBuf(c, Slice(sendbuf), dest, sendtag, Slice(recvbuf), src, recvtag)
}

// SendrecvReplace sends buf to dest and replaces its contents with a message from src.
func SendrecvReplace[T Numeric](c *Comm, buf []T, dest, sendtag, src, recvtag int) (Status, error) {
	return SendrecvReplaceBuf(c, Slice(buf), dest, sendtag, src, recvtag)
}
