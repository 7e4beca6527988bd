package mpi

import (
	"sync/atomic"

	"github.com/adimpi/adimpi/adi"
)

// Request is a non-blocking or persistent operation. A non-blocking request
// becomes inactive once Wait or Test has returned its completion; a
// persistent one becomes inactive until the next Start.
type Request struct {
	rt         *runtime
	comm       *Comm
	op         string // the starting call, for errors
	recv       bool
	mode       adi.Mode
	buffered   bool
	persistent bool
	freed      bool // Free was called: the handle is MPI_REQUEST_NULL
	peer, tag  int
	ar         *adi.Request // the operation in flight; nil when inactive
	// body is what ar points to for a point-to-point operation, and holds
	// its buffer (body.Buf) from newRequest on. It comes from r.bodies and
	// goes back there once Wait or Test has returned the completion (a
	// persistent or owned request keeps it): a request the program holds
	// on to is small.
	body *adi.Request
	// owned: the program's own Request (IsendIn, IrecvIn), which it
	// starts again and again: it keeps its body from one operation to
	// the next, as a persistent request does, with no trip through
	// r.bodies, and always the same memory.
	owned bool
	bg    chan struct{} // non-blocking collectives: closed when the goroutine running it has exited
	plan  *plan         // persistent collectives: what Start runs
	// complete, if set, finishes the status of a completed operation
	// whose result is not ar's alone (Imrecv copies its message out,
	// Isendrecv reports its receive); it may run more than once
	// (GetStatus, then Wait) and must give the same status each time.
	complete func(st *Status)
	// sent is the byte count of a send that the device took whole when it
	// started (startFlatIn): ar is then the runtime's sentShort.
	sent int
}

// handleSlab is a block of request handles handed out one at a time: a
// program that keeps starting non-blocking operations holds on to every
// handle it was given, so handles cannot be pooled, but carving them from
// blocks costs one atomic add each instead of an allocation each (and the
// collector sees one object per block). A finished request holds no
// buffer (finish drops body), so a block kept alive by one live handle
// keeps only its other handles' communicators alive besides.
type handleSlab struct {
	next atomic.Int32
	reqs [64]Request
}

// newHandle returns a fresh, zero Request from the runtime's current slab.
func (r *runtime) newHandle() *Request {
	for {
		s := r.slab.Load()
		if s != nil {
			if i := s.next.Add(1) - 1; int(i) < len(s.reqs) {
				return &s.reqs[i]
			}
		}
		ns := new(handleSlab)
		ns.next.Store(1)
		if r.slab.CompareAndSwap(s, ns) {
			return &ns.reqs[0]
		}
	}
}

// heldSlab is the slab of the flat path (startFlatIn), which carves its
// handles under r.mu, which it holds anyway: no atomic operation per
// handle.
type heldSlab struct {
	reqs *[64]Request
	next int
}

// reset makes q a fresh, not yet started request of the flat path
// (startFlatIn): every field set or cleared one by one (but body, which
// is nil in a new handle and kept in an owned one), where assigning a
// composite literal builds the whole struct on the stack and copies it,
// whose wide loads of the narrow stores just made stall the pipeline.
func (q *Request) reset(r *runtime, c *Comm, op string, recv bool, mode adi.Mode, peer, tag int) {
	q.rt, q.comm, q.op = r, c, op
	q.recv, q.mode, q.buffered, q.persistent, q.freed = recv, mode, false, false, false
	q.peer, q.tag = peer, tag
	q.ar, q.bg, q.plan, q.complete = nil, nil, nil, nil
	q.sent = 0
}

// newHandleHeld is newHandle for a caller that holds r.mu.
func (r *runtime) newHandleHeld() *Request {
	h := &r.held
	if h.reqs == nil || h.next == len(h.reqs) {
		h.reqs, h.next = new([64]Request), 0
	}
	q := &h.reqs[h.next]
	h.next++
	return q
}

// maxBodies bounds r.bodies: a program that once had many operations in
// flight keeps at most this many idle adi.Requests after they complete.
const maxBodies = 1024

// takeBody returns a completed adi.Request to start an operation on, from
// r.bodies if it has one. Called with r.mu held.
func (r *runtime) takeBody() *adi.Request {
	if n := len(r.bodies); n > 0 {
		ar := r.bodies[n-1]
		r.bodies = r.bodies[:n-1]
		return ar
	}
	return new(adi.Request)
}

// giveBody keeps a completed adi.Request, which the device and the program
// can no longer reach, for takeBody. Called with r.mu held.
func (r *runtime) giveBody(ar *adi.Request) {
	if len(r.bodies) < maxBodies {
		r.bodies = append(r.bodies, ar)
	}
}

// start posts the request's operation to the device.
func (q *Request) start() error {
	r := q.rt
	ar := q.body
	// A pooled or restarted request is complete, so Restart may clear
	// its done flag without an atomic store.
	ar.Restart(0, q.mode, q.comm.ctx, 0, q.tag, &ar.Buf)
	q.ar = ar
	if q.peer == ProcNull {
		ar.Complete(adi.Status{Source: ProcNull, Tag: AnyTag})
		return nil
	}
	ar.Peer = q.comm.worldRank(q.peer)
	if q.recv {
		ar.Op = adi.OpRecv
		r.mu.Lock()
		err := r.dev.Irecv(ar)
		r.mu.Unlock()
		return err
	}
	ar.Op = adi.OpSend
	if q.buffered {
		return r.bsendStart(q.op, ar)
	}
	r.mu.Lock()
	err := r.dev.Isend(ar)
	r.mu.Unlock()
	return err
}

// plain reports whether q is an active point-to-point operation whose
// status is its adi.Request's alone: no goroutine (bg) or completion hook
// (complete) of its own. Its completion may then run under r.mu
// (finishHeld).
func (q *Request) plain() bool { return q.bg == nil && q.complete == nil }

// finish turns the device's completion into a Status and makes the request inactive.
func (q *Request) finish() Status {
	if q.bg != nil {
		<-q.bg // the collective's goroutine is done with the device
		q.bg = nil
	}
	ar := q.ar
	st := q.status()
	q.ar = nil
	if ar == q.body && !q.persistent && !q.owned {
		// The device is done with it and the program can no longer reach
		// it (an inactive request's Wait and Test do not look at it).
		q.body = nil
		r := q.rt
		r.mu.Lock()
		r.giveBody(ar)
		r.mu.Unlock()
	}
	return st
}

// finishHeld is finish for a plain request (q.plain()), called with r.mu
// held: the body goes back to r.bodies under the caller's hold.
func (q *Request) finishHeld() Status {
	ar := q.ar
	st := q.status()
	q.ar = nil
	if ar == q.body && !q.persistent && !q.owned {
		q.body = nil
		q.rt.giveBody(ar)
	}
	return st
}

// finishQuiet is finishHeld for a caller that wants no status (statuses
// ignored, the operation's error known to be nil): Waitall's loop over a
// window of sends.
func (q *Request) finishQuiet() {
	ar := q.ar
	q.ar = nil
	if ar == q.body && !q.persistent && !q.owned {
		q.body = nil
		q.rt.giveBody(ar)
	}
}

// statusInto writes the status of q.ar, a completed plain operation
// (q.plain()) without an error, into *dst field by field: status's
// Status, built and copied whole, goes through the stack, whose wide
// loads of narrow stores stall Waitall's loop over a window.
func (q *Request) statusInto(dst *Status) {
	ar := q.ar
	dst.Source, dst.Tag, dst.Cancelled, dst.Err = q.peer, q.tag, ar.Status.Cancelled, nil
	dst.bytes = ar.Status.Bytes
	if ar == &q.rt.sentShort {
		dst.bytes = q.sent
	}
	if q.recv {
		dst.Tag = ar.Status.Tag
		if src := ar.Status.Source; q.peer < 0 || src != ar.Peer {
			dst.Source = q.comm.commRank(src)
		}
	}
}

// status is the status of the completed operation q.ar.
func (q *Request) status() Status {
	ar := q.ar
	st := Status{Source: q.peer, Tag: q.tag, Cancelled: ar.Status.Cancelled, Err: ar.Status.Err, bytes: ar.Status.Bytes}
	if ar == &q.rt.sentShort {
		st.bytes = q.sent
	}
	if st.Err != nil {
		st.Err = restated(q.op, st.Err, q.comm.commRank, false)
	}
	if q.recv {
		st.Tag = ar.Status.Tag
		if src := ar.Status.Source; q.peer < 0 || src != ar.Peer {
			st.Source = q.comm.commRank(src)
		}
	}
	if q.complete != nil {
		return q.completed(st)
	}
	return st
}

// completed runs q.complete on a copy of st: apart from status, so that
// only a request with a hook pays for the Status escaping to it.
//
//go:noinline
func (q *Request) completed(st Status) Status {
	s := st
	q.complete(&s)
	return s
}

// GetStatus reports whether the request has completed and, if it has, its
// status, without making it inactive or freeing it: a later Wait or Test
// returns the same status (MPI_Request_get_status). An inactive request
// reports true with an empty status.
func (q *Request) GetStatus() (Status, bool, error) {
	const op = "MPI_Request_get_status"
	if q == nil {
		return emptyStatus, false, q.raise(errorf(ErrRequest, op, "request is nil"))
	}
	if q.ar == nil {
		return emptyStatus, true, nil
	}
	if !q.ar.Done() {
		if err := q.rt.progress(); err != nil {
			return emptyStatus, false, q.raise(named(op, err))
		}
		if !q.ar.Done() {
			return emptyStatus, false, nil
		}
	}
	return q.status(), true, nil
}

// Free releases the request handle (MPI_Request_free): an operation in
// flight still completes (a send's data are delivered, a receive's buffer
// filled), but nothing reports when, and the handle becomes
// MPI_REQUEST_NULL: Wait and Test on it return an empty status at once,
// Start is an error. Freeing a persistent request that is inactive ends
// it. Freeing a request twice, or a nil one, is an ErrRequest error.
func (q *Request) Free() error {
	const op = "MPI_Request_free"
	if q == nil {
		return q.raise(errorf(ErrRequest, op, "request is nil"))
	}
	if q.freed {
		return q.raise(errorf(ErrRequest, op, "request was already freed"))
	}
	q.freed = true
	if q.ar == nil && q.body != nil {
		// An inactive persistent or owned request: the device holds nothing.
		q.rt.mu.Lock()
		q.rt.giveBody(q.body)
		q.rt.mu.Unlock()
	}
	// An operation in flight keeps its adi.Request with the device, which
	// completes it; the handle lets go of it and of its goroutine (bg).
	q.ar, q.body, q.bg, q.plan, q.complete = nil, nil, nil, nil, nil
	q.persistent, q.owned = false, false
	return nil
}

// emptyStatus is what an inactive request's completion returns.
var emptyStatus = Status{Source: AnySource, Tag: AnyTag}

// Active reports whether the request has an operation in flight (started and
// not yet returned by Wait or Test).
func (q *Request) Active() bool { return q != nil && q.ar != nil }

// Wait blocks until the request completes and returns its status. The error
// is the operation's own (e.g. ErrTruncate). Waiting on an inactive request
// returns at once with an empty status.
func (q *Request) Wait() (st Status, err error) {
	// Into the named result: a local Status returned is copied with wide
	// loads of waitInto's narrow stores, which stall.
	err = q.waitInto(&st)
	return st, q.raise(err)
}

// wait is Wait without the error handler (Waitall runs it once for all).
func (q *Request) wait() (st Status, err error) {
	err = q.waitInto(&st)
	return st, err
}

// waitInto is wait writing the status into *st: a plain operation that
// ends without an error gets it field by field (statusInto), with no
// Status built and copied on the way up.
func (q *Request) waitInto(st *Status) error {
	if q == nil {
		*st = emptyStatus
		return errorf(ErrRequest, "MPI_Wait", "request is nil")
	}
	if q.ar == nil {
		*st = emptyStatus
		return nil
	}
	if q.plain() {
		// One hold of the lock polls and, once the operation is done,
		// takes its body back.
		r := q.rt
		r.mu.Lock()
		done, err := r.pollHeld(q.ar)
		if !done {
			r.mu.Unlock()
			if err == nil {
				err = r.waitOn(q.ar.Done, nil, q.ar, q.comm)
			}
			if err != nil {
				*st = emptyStatus
				return named("MPI_Wait", err)
			}
			r.mu.Lock()
		}
		if q.ar.Status.Err == nil {
			q.statusInto(st)
			q.finishQuiet()
			r.mu.Unlock()
			return nil
		}
		*st = q.finishHeld()
		r.mu.Unlock()
		return st.Err
	}
	if !q.ar.Done() {
		if q.bg != nil {
			// A collective's own goroutine drives progress until it is
			// done; polling here as well would only contend with it for
			// the device and the CPU.
			<-q.bg
		} else if err := q.rt.waitDone(q.ar, q.comm); err != nil {
			*st = emptyStatus
			return named("MPI_Wait", err)
		}
	}
	*st = q.finish()
	return st.Err
}

// Test reports whether the request has completed, without blocking; when it
// has, it returns the status like Wait.
func (q *Request) Test() (Status, bool, error) {
	st, done, err := q.test()
	return st, done, q.raise(err)
}

// test is Test without the error handler.
func (q *Request) test() (Status, bool, error) {
	if q == nil {
		return emptyStatus, false, errorf(ErrRequest, "MPI_Test", "request is nil")
	}
	if q.ar == nil {
		return emptyStatus, true, nil
	}
	if q.plain() {
		// One hold of the lock for the poll and the completion.
		r := q.rt
		r.mu.Lock()
		if !q.ar.Done() {
			if _, err := r.dev.Progress(); err != nil {
				r.mu.Unlock()
				return emptyStatus, false, named("MPI_Test", progressError(r, err))
			}
			if !q.ar.Done() {
				r.mu.Unlock()
				return emptyStatus, false, nil
			}
		}
		st := q.finishHeld()
		r.mu.Unlock()
		return st, true, st.Err
	}
	if !q.ar.Done() {
		if err := q.rt.progress(); err != nil {
			return emptyStatus, false, named("MPI_Test", err)
		}
		if !q.ar.Done() {
			return emptyStatus, false, nil
		}
	}
	st := q.finish()
	return st, true, st.Err
}

// Cancel asks for the operation to be cancelled. A receive that has not
// matched a message is withdrawn, and its Wait returns a status with
// Cancelled set; a send, or a receive already matched, completes normally.
func (q *Request) Cancel() error {
	if q == nil {
		return q.raise(errorf(ErrRequest, "MPI_Cancel", "request is nil"))
	}
	if q.ar == nil || !q.recv || q.ar.Done() {
		return nil
	}
	q.rt.mu.Lock()
	q.rt.dev.CancelRecv(q.ar)
	q.rt.mu.Unlock()
	return nil
}

// Start starts a persistent request's operation again.
func (q *Request) Start() error { return q.raise(q.restart()) }

// restart is Start without the error handler (Startall runs it once).
func (q *Request) restart() error {
	if q == nil {
		return errorf(ErrRequest, "MPI_Start", "request is nil")
	}
	if q.freed {
		return errorf(ErrRequest, "MPI_Start", "request was freed (Free)")
	}
	if !q.persistent {
		return errorf(ErrRequest, "MPI_Start", "request is not persistent (made by SendInit, RecvInit, BcastInit, ...)")
	}
	if q.ar != nil {
		return errorf(ErrRequest, "MPI_Start", "request is still active; Wait for it first")
	}
	if q.plan != nil {
		if err := checkComm("MPI_Start", q.comm); err != nil {
			return err
		}
		q.plan.launch(q)
		return nil
	}
	if err := q.start(); err != nil {
		return err
	}
	if q.rt.asyncOn.Load() {
		q.rt.kick()
	}
	return nil
}

// Startall starts every persistent request in reqs.
func Startall(reqs []*Request) error {
	for i, q := range reqs {
		if err := q.restart(); err != nil {
			return q.raise(errorf(ErrRequest, "MPI_Startall", "request %d: %v", i, err))
		}
	}
	return nil
}

func runtimeOf(reqs []*Request) *runtime {
	for _, q := range reqs {
		if q != nil && q.ar != nil {
			return q.rt
		}
	}
	return nil
}

// Waitall waits for every request. If any completed with an error, it returns
// ErrInStatus and each status's Err says which.
func Waitall(reqs []*Request) ([]Status, error) {
	sts := make([]Status, len(reqs))
	bad, err := waitallInto("MPI_Waitall", reqs, sts)
	if err != nil {
		return sts, reqs[bad].raise(err)
	}
	return sts, nil
}

// WaitallInto is Waitall writing the statuses into sts, as MPI_Waitall
// writes them into the caller's array_of_statuses: sts[i] is reqs[i]'s.
// A nil sts ignores them (MPI_STATUSES_IGNORE), except that an error still
// names the request it came from; otherwise sts must be as long as reqs.
// Unlike Waitall it allocates nothing: the call for windows of small
// messages.
func WaitallInto(reqs []*Request, sts []Status) error {
	if sts != nil && len(sts) < len(reqs) {
		return anyActive(reqs).raise(errorf(ErrArg, "MPI_Waitall", "%d statuses for %d requests", len(sts), len(reqs)))
	}
	bad, err := waitallInto("MPI_Waitall", reqs, sts)
	if err != nil {
		return reqs[bad].raise(err)
	}
	return nil
}

// waitall is Waitall without the error handler; it also returns the index
// of the request whose error it reports. Plain requests (q.plain()) that
// are done, or that the first polls complete, finish under one hold of the
// lock for the whole array.
func waitall(op string, reqs []*Request) ([]Status, int, error) {
	sts := make([]Status, len(reqs))
	bad, err := waitallInto(op, reqs, sts)
	return sts, bad, err
}

// waitallInto is waitall writing into sts (nil: nowhere).
func waitallInto(op string, reqs []*Request, sts []Status) (int, error) {
	return waitallHeld(op, reqs, sts, nil)
}

// waitallHeld is waitallInto for a caller that holds held's lock (nil:
// none), which it takes over and lets go of.
func waitallHeld(op string, reqs []*Request, sts []Status, held *runtime) (int, error) {
	bad, first := -1, error(nil)
	for i, q := range reqs {
		if q == nil {
			if sts != nil {
				sts[i] = emptyStatus
			}
			continue
		}
		var st Status
		var err error
		if q.ar != nil && q.plain() {
			if held != q.rt {
				if held != nil {
					held.mu.Unlock()
				}
				held = q.rt
				held.mu.Lock()
			}
			// Done first: in a window most requests are, and pollHeld is a
			// call that looks at the progress settings before it does.
			done := q.ar.Done()
			if !done {
				done, _ = held.pollHeld(q.ar)
			}
			if done {
				if q.ar.Status.Err == nil {
					// No error to report: the status, if wanted, goes
					// straight into the caller's array.
					if sts != nil {
						q.statusInto(&sts[i])
					}
					q.finishQuiet()
					continue
				}
				st = q.finishHeld()
				err = st.Err
			} else {
				held.mu.Unlock()
				held = nil
				st, err = q.wait()
			}
		} else {
			if held != nil {
				held.mu.Unlock()
				held = nil
			}
			st, err = q.wait()
		}
		if err != nil && st.Err == nil {
			st.Err = err // the wait itself failed (e.g. progress), not the request
		}
		if sts != nil {
			sts[i] = st
		}
		if err != nil && bad < 0 {
			bad, first = i, err
		}
	}
	if held != nil {
		held.mu.Unlock()
	}
	if bad >= 0 {
		return bad, errorf(ErrInStatus, op, "request %d: %v", bad, first)
	}
	return -1, nil
}

// Waitany waits until one active request completes and returns its index and
// status; with no active request it returns Undefined at once.
func Waitany(reqs []*Request) (int, Status, error) {
	r := runtimeOf(reqs)
	if r == nil {
		return Undefined, emptyStatus, nil
	}
	idx := -1
	err := r.waitFor(func() bool {
		for i, q := range reqs {
			if q != nil && q.ar != nil && q.ar.Done() {
				idx = i
				return true
			}
		}
		return false
	})
	if err != nil {
		return Undefined, emptyStatus, anyActive(reqs).raise(named("MPI_Waitany", err))
	}
	st := reqs[idx].finish()
	return idx, st, reqs[idx].raise(st.Err)
}

// Waitsome waits until at least one active request completes and returns the
// indices and statuses of all that have; with no active request it returns
// nil indices.
func Waitsome(reqs []*Request) ([]int, []Status, error) {
	r := runtimeOf(reqs)
	if r == nil {
		return nil, nil, nil
	}
	if err := r.waitFor(func() bool { return anyDone(reqs) }); err != nil {
		return nil, nil, anyActive(reqs).raise(named("MPI_Waitsome", err))
	}
	return collectDone("MPI_Waitsome", reqs)
}

// Testall reports whether every request has completed; only if so are they
// all completed (made inactive) and their statuses returned.
func Testall(reqs []*Request) ([]Status, bool, error) {
	sts := make([]Status, len(reqs))
	done, bad, err := testallInto("MPI_Testall", reqs, sts)
	if !done {
		sts = nil
	}
	if err != nil {
		if bad < 0 {
			return nil, false, anyActive(reqs).raise(err)
		}
		return sts, true, reqs[bad].raise(err)
	}
	return sts, done, nil
}

// TestallInto is Testall writing the statuses into sts, as WaitallInto
// does (nil: MPI_STATUSES_IGNORE); sts is written only when every request
// has completed. It allocates nothing, and takes the device's lock once
// for the poll, the look at every request and their completion.
func TestallInto(reqs []*Request, sts []Status) (bool, error) {
	if sts != nil && len(sts) < len(reqs) {
		return false, anyActive(reqs).raise(errorf(ErrArg, "MPI_Testall", "%d statuses for %d requests", len(sts), len(reqs)))
	}
	done, bad, err := testallInto("MPI_Testall", reqs, sts)
	if err != nil {
		if bad < 0 {
			return false, anyActive(reqs).raise(err)
		}
		return true, reqs[bad].raise(err)
	}
	return done, nil
}

// testallInto is TestallInto without the error handler: whether all
// requests are done, and, if so, waitallInto's results. A progress error
// comes with index -1 and done false.
func testallInto(op string, reqs []*Request, sts []Status) (bool, int, error) {
	r := runtimeOf(reqs)
	if r != nil {
		r.mu.Lock()
		_, err := r.hot().Progress()
		if err != nil {
			r.mu.Unlock()
			return false, -1, named(op, progressError(r, err))
		}
		for _, q := range reqs {
			if q != nil && q.ar != nil && !q.ar.Done() {
				r.mu.Unlock()
				return false, -1, nil
			}
		}
		// All are done: their completions under the same hold.
	}
	bad, err := waitallHeld(op, reqs, sts, r)
	return true, bad, err
}

// Testany completes one request that has completed, if any. It returns
// Undefined and true when no request is active.
func Testany(reqs []*Request) (int, Status, bool, error) {
	r := runtimeOf(reqs)
	if r == nil {
		return Undefined, emptyStatus, true, nil
	}
	r.mu.Lock()
	if _, err := r.dev.Progress(); err != nil {
		r.mu.Unlock()
		return Undefined, emptyStatus, false, anyActive(reqs).raise(named("MPI_Testany", progressError(r, err)))
	}
	for i, q := range reqs {
		if q != nil && q.ar != nil && q.ar.Done() {
			var st Status
			if q.plain() && q.rt == r {
				st = q.finishHeld()
				r.mu.Unlock()
			} else {
				r.mu.Unlock()
				st = q.finish()
			}
			return i, st, true, q.raise(st.Err)
		}
	}
	r.mu.Unlock()
	return Undefined, emptyStatus, false, nil
}

// Testsome completes every request that has completed and returns their
// indices and statuses (none if none has).
func Testsome(reqs []*Request) ([]int, []Status, error) {
	r := runtimeOf(reqs)
	if r == nil {
		return nil, nil, nil
	}
	if err := r.progress(); err != nil {
		return nil, nil, anyActive(reqs).raise(named("MPI_Testsome", err))
	}
	return collectDone("MPI_Testsome", reqs)
}

func anyDone(reqs []*Request) bool {
	for _, q := range reqs {
		if q != nil && q.ar != nil && q.ar.Done() {
			return true
		}
	}
	return false
}

func collectDone(op string, reqs []*Request) ([]int, []Status, error) {
	var idx []int
	var sts []Status
	var err error
	var bad *Request
	for i, q := range reqs {
		if q != nil && q.ar != nil && q.ar.Done() {
			st := q.finish()
			idx = append(idx, i)
			sts = append(sts, st)
			if st.Err != nil && err == nil {
				err, bad = errorf(ErrInStatus, op, "request %d: %v", i, st.Err), q
			}
		}
	}
	if err != nil {
		return idx, sts, bad.raise(err)
	}
	return idx, sts, nil
}

// anyActive is the first active request of reqs, whose communicator's error
// handler runs for an error of a call on all of them (nil if none is
// active: MPI_COMM_WORLD's).
func anyActive(reqs []*Request) *Request {
	for _, q := range reqs {
		if q != nil && q.ar != nil {
			return q
		}
	}
	return nil
}
