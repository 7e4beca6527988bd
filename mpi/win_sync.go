package mpi

import (
	"fmt"
	"sync/atomic"

	"github.com/adimpi/adimpi/adi"
)

// originState is a window's epochs as this rank sees them, and the
// operations it has started and not yet completed.
type originState struct {
	fence    bool   // a fence epoch is open (the last Fence did not assert NoSucceed)
	fenceOps bool   // operations were started since the last Fence
	access   []bool // PSCW: the ranks of Start's group, nil outside Start..Complete
	exposure []bool // PSCW: the ranks of Post's group, nil outside Post..Wait
	locks    []int  // passive target: lock type held per rank (0: none), lockNoCheck or'ed in
	lockAll  bool
	dirty    []bool           // agent operations sent to the rank since its last flush
	pend     [][]*adi.Request // per rank: operations not yet complete locally
	accs     [][]queuedAcc    // per rank: accumulates kept until its next synchronisation (rma_accq.go)
	accBytes []int            // per rank: the bytes accs holds
	nextTag  uint32
}

const (
	lockNoCheck = 1 << 8 // the lock was taken with ModeNoCheck: no lock is held at the target
	lockNative  = 1 << 9 // the lock was taken in the target's control block, not by its agent
)

func (o *originState) init(n int) {
	o.locks, o.dirty, o.pend = make([]int, n), make([]bool, n), make([][]*adi.Request, n)
	o.accs, o.accBytes = make([][]queuedAcc, n), make([]int, n)
}

// may reports whether an epoch lets this rank access rank t.
func (o *originState) may(t int) bool {
	return o.fence || o.lockAll || o.locks[t] != 0 || (o.access != nil && o.access[t])
}

func (o *originState) used() { o.fenceOps = true }

// tag is a fresh answer tag.
func (o *originState) tag() uint32 {
	o.nextTag++
	if o.nextTag >= 1<<29 {
		o.nextTag = 1
	}
	return tagReplyBase + o.nextTag
}

// idle checks, for Free, that this rank has no access epoch open.
func (o *originState) idle(op string, w *Win) error {
	switch {
	case o.access != nil:
		return errorf(ErrRMASync, op, "window %s: the access epoch of Start is still open (call Complete first)", w.name)
	case o.lockAll:
		return errorf(ErrRMASync, op, "window %s: LockAll is still in force (call UnlockAll first)", w.name)
	case o.fence && o.fenceOps:
		return errorf(ErrRMASync, op, "window %s: operations since the last Fence are not completed (call Fence first)", w.name)
	}
	for t, l := range o.locks {
		if l != 0 {
			return errorf(ErrRMASync, op, "window %s: rank %d is still locked (call Unlock first)", w.name, t)
		}
	}
	return nil
}

// waitLocal waits until this rank's operations towards rank t (all ranks
// for t < 0) are complete locally, and returns the first failure.
func (w *Win) waitLocal(op string, t int) error {
	r := w.rt
	var list []*adi.Request
	r.mu.Lock()
	for i := range w.origin.pend {
		if t < 0 || i == t {
			list = append(list, w.origin.pend[i]...)
			w.origin.pend[i] = nil
		}
	}
	r.mu.Unlock()
	if len(list) == 0 {
		return nil
	}
	if err := r.waitFor(func() bool {
		for len(list) > 0 && list[0].Done() {
			list = list[1:]
		}
		return len(list) == 0
	}); err != nil {
		return named(op, err)
	}
	return nil
}

// waitLocalErr is waitLocal that also reports the operations' own failures.
func (w *Win) waitLocalErr(op string, t int) error {
	r := w.rt
	var list []*adi.Request
	r.mu.Lock()
	for i := range w.origin.pend {
		if t < 0 || i == t {
			list = append(list, w.origin.pend[i]...)
		}
	}
	r.mu.Unlock()
	if err := w.waitLocal(op, t); err != nil {
		return err
	}
	for _, q := range list {
		if err := q.Status.Err; err != nil {
			return restated(op, err, nil, false)
		}
	}
	return nil
}

// flush makes every operation of this rank towards the ranks in ts
// complete at the target: an agent that answers a flush (or an unlock,
// kind) has carried out everything the origin sent before it.
func (w *Win) flush(op string, ts []int, kind uint8) error {
	r := w.rt
	type ask struct {
		t   int
		q   *adi.Request
		why []byte
	}
	var asks []ask
	r.mu.Lock()
	for _, t := range ts {
		if err := w.drainAccs(op, t); err != nil {
			r.mu.Unlock()
			return err
		}
	}
	if w.settled(ts, kind) {
		// Nothing of this rank's is in flight to ts: every operation
		// completed as it started (memory mapped here, the device's remote
		// write), or has been flushed.
		r.mu.Unlock()
		return nil
	}
	for _, t := range ts {
		if t == w.comm.rank {
			continue // this rank's operations on itself complete as they start; its lock is in its control block
		}
		if kind == amFlush && !w.origin.dirty[t] {
			continue
		}
		a := ask{t: t, why: make([]byte, 512)}
		q, err := w.ask(t, header{kind: kind}, a.why)
		if err != nil {
			r.mu.Unlock()
			return named(op, err)
		}
		a.q = q
		w.origin.dirty[t] = false
		asks = append(asks, a)
	}
	r.mu.Unlock()
	for _, t := range ts {
		if err := w.waitLocalErr(op, t); err != nil {
			return err
		}
	}
	if err := r.waitFor(func() bool {
		for _, a := range asks {
			if !a.q.Done() {
				return false
			}
		}
		return true
	}); err != nil {
		return named(op, err)
	}
	for _, a := range asks {
		if err := a.q.Status.Err; err != nil {
			return named(op, err)
		}
		if n := a.q.Status.Bytes; n > 0 {
			return errorf(ErrRMARange, op, "rank %d of window %s: %s", a.t, w.name, a.why[:n])
		}
	}
	return nil
}

// settled reports whether a flush of kind to ts has nothing to do.
// Called with the core's lock held.
func (w *Win) settled(ts []int, kind uint8) bool {
	if kind != amFlush {
		return len(ts) == 0
	}
	for _, t := range ts {
		if w.origin.dirty[t] || len(w.origin.pend[t]) > 0 {
			return false
		}
	}
	return true
}

// ask sends the header h to rank t's agent and posts the receive of its
// answer into buf, on a fresh tag; the returned request completes with the
// answer. Called with the core's lock held.
func (w *Win) ask(t int, h header, buf []byte) (*adi.Request, error) {
	r := w.rt
	h.reply = w.origin.tag()
	q := &adi.Request{Op: adi.OpRecv, Context: w.comm.ctx, Peer: w.comm.world[t], Tag: int(h.reply), Buf: adi.Bytes(buf)}
	if err := r.dev.Irecv(q); err != nil {
		return nil, err
	}
	msg := make([]byte, hdrSize)
	h.put(msg)
	s := &adi.Request{Op: adi.OpSend, Context: w.comm.ctx, Peer: w.comm.world[t], Tag: tagReq, Buf: adi.Bytes(msg)}
	err := r.dev.Isend(s)
	w.origin.pend[t] = append(w.origin.pend[t], s)
	return q, err
}

func allRanks(n int) []int { return identity(n) }

// checkAssert refuses assertion bits a call does not take.
func checkAssert(op string, assert, allowed int) error {
	if assert&^allowed != 0 {
		return errorf(ErrAssert, op, "assertion %#x has bits (%#x) that %s does not take", assert, assert&^allowed, op)
	}
	return nil
}

// Fence closes the fence epoch (completing every RMA operation on the
// window, by this rank and on this rank's memory) and opens the next
// (MPI_Win_fence). It is collective. assert takes ModeNoStore, ModeNoPut,
// ModeNoPrecede and ModeNoSucceed.
func (w *Win) Fence(assert int) error {
	const op = "MPI_Win_fence"
	if _, err := winStart(op, w); err != nil {
		return w.raise(err)
	}
	if err := checkAssert(op, assert, ModeNoStore|ModeNoPut|ModeNoPrecede|ModeNoSucceed); err != nil {
		return w.raise(err)
	}
	o := &w.origin
	switch {
	case o.access != nil || o.exposure != nil:
		return w.raise(errorf(ErrRMASync, op, "window %s: a PSCW epoch is open (Start/Post without Complete/Wait)", w.name))
	case o.lockAll || hasLock(o.locks):
		return w.raise(errorf(ErrRMASync, op, "window %s: a passive-target epoch (Lock) is open", w.name))
	case assert&ModeNoPrecede != 0 && o.fence && o.fenceOps:
		return w.raise(errorf(ErrRMASync, op, "window %s: MPI_MODE_NOPRECEDE asserted after operations in the fence epoch", w.name))
	}
	if o.fenceOps {
		if err := w.flush(op, allRanks(w.comm.Size()), amFlush); err != nil {
			return w.raise(err)
		}
	}
	if err := barrierOn(w.comm); err != nil {
		return w.raise(named(op, err))
	}
	o.fence = assert&ModeNoSucceed == 0
	o.fenceOps = false
	return nil
}

func hasLock(l []int) bool {
	for _, x := range l {
		if x != 0 {
			return true
		}
	}
	return false
}

// groupRanks maps a group's members to the window's ranks.
func (w *Win) groupRanks(op string, g *Group) ([]bool, []int, error) {
	if err := checkGroup(op, g); err != nil {
		return nil, nil, err
	}
	set := make([]bool, w.comm.Size())
	var ranks []int
	for _, wr := range g.world {
		i, ok := w.comm.local[wr]
		if !ok {
			return nil, nil, errorf(ErrGroup, op, "world rank %d of the group is not in window %s", wr, w.name)
		}
		set[i] = true
		ranks = append(ranks, i)
	}
	return set, ranks, nil
}

// Post opens an exposure epoch for the origins in group g (MPI_Win_post):
// they may access this rank's window between their Start and Complete.
// assert takes ModeNoCheck (the origins do not wait for Post), ModeNoStore
// and ModeNoPut.
func (w *Win) Post(g *Group, assert int) error {
	const op = "MPI_Win_post"
	r, err := winStart(op, w)
	if err != nil {
		return w.raise(err)
	}
	if err := checkAssert(op, assert, ModeNoCheck|ModeNoStore|ModeNoPut); err != nil {
		return w.raise(err)
	}
	if w.origin.exposure != nil {
		return w.raise(errorf(ErrRMASync, op, "window %s: the previous Post's exposure epoch is still open (call Wait first)", w.name))
	}
	set, ranks, err := w.groupRanks(op, g)
	if err != nil {
		return w.raise(err)
	}
	w.origin.exposure = set
	if assert&ModeNoCheck != 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range ranks {
		if o == w.comm.rank {
			w.ag.posts[o]++
			continue
		}
		w.ag.send(o, tagPost, nil)
	}
	return nil
}

// Start opens an access epoch to the targets in group g (MPI_Win_start),
// waiting until each has posted. assert takes ModeNoCheck.
func (w *Win) Start(g *Group, assert int) error {
	const op = "MPI_Win_start"
	r, err := winStart(op, w)
	if err != nil {
		return w.raise(err)
	}
	if err := checkAssert(op, assert, ModeNoCheck); err != nil {
		return w.raise(err)
	}
	if w.origin.access != nil {
		return w.raise(errorf(ErrRMASync, op, "window %s: the previous Start's access epoch is still open (call Complete first)", w.name))
	}
	if w.origin.lockAll || hasLock(w.origin.locks) {
		return w.raise(errorf(ErrRMAConflict, op, "window %s: a passive-target epoch (Lock) is open", w.name))
	}
	set, ranks, err := w.groupRanks(op, g)
	if err != nil {
		return w.raise(err)
	}
	if assert&ModeNoCheck == 0 {
		var reqs []*adi.Request
		self := false
		r.mu.Lock()
		for _, t := range ranks {
			if t == w.comm.rank {
				self = true
				continue
			}
			q := &adi.Request{Op: adi.OpRecv, Context: w.comm.ctx, Peer: w.comm.world[t], Tag: tagPost, Buf: adi.Bytes(nil)}
			if err := r.dev.Irecv(q); err != nil {
				r.mu.Unlock()
				return w.raise(named(op, err))
			}
			reqs = append(reqs, q)
		}
		r.mu.Unlock()
		if err := r.waitFor(func() bool {
			for _, q := range reqs {
				if !q.Done() {
					return false
				}
			}
			if self {
				r.mu.Lock()
				defer r.mu.Unlock()
				return w.ag.posts[w.comm.rank] > 0
			}
			return true
		}); err != nil {
			return w.raise(named(op, err))
		}
		if self {
			r.mu.Lock()
			w.ag.posts[w.comm.rank]--
			r.mu.Unlock()
		}
	}
	w.origin.access = set
	return nil
}

// Complete closes the access epoch of Start (MPI_Win_complete): this
// rank's operations are complete locally, and each target learns, after
// them, that this origin is done.
func (w *Win) Complete() error {
	const op = "MPI_Win_complete"
	r, err := winStart(op, w)
	if err != nil {
		return w.raise(err)
	}
	if w.origin.access == nil {
		return w.raise(errorf(ErrRMASync, op, "window %s: no access epoch of Start is open", w.name))
	}
	r.mu.Lock()
	err = w.drainAccs(op, -1)
	r.mu.Unlock()
	if err != nil {
		return w.raise(err)
	}
	if err := w.waitLocalErr(op, -1); err != nil {
		return w.raise(err)
	}
	r.mu.Lock()
	for t, in := range w.origin.access {
		if !in {
			continue
		}
		if t == w.comm.rank {
			w.ag.completes[t]++
			continue
		}
		msg := make([]byte, hdrSize)
		h := header{kind: amComplete}
		h.put(msg)
		q := &adi.Request{Op: adi.OpSend, Context: w.comm.ctx, Peer: w.comm.world[t], Tag: tagReq, Buf: adi.Bytes(msg)}
		if err := r.dev.Isend(q); err != nil {
			r.mu.Unlock()
			return w.raise(named(op, err))
		}
		w.ag.sends = append(w.ag.sends, q)
		w.origin.dirty[t] = false
	}
	r.mu.Unlock()
	w.origin.access = nil
	return nil
}

// Wait closes the exposure epoch of Post (MPI_Win_wait): it returns once
// every origin of Post's group has called Complete, so that all their
// operations on this rank's memory are done.
func (w *Win) Wait() error {
	const op = "MPI_Win_wait"
	r, err := w.exposing(op)
	if err != nil {
		return w.raise(err)
	}
	if err := r.waitFor(func() bool { return w.completed() }); err != nil {
		return w.raise(named(op, err))
	}
	w.endExposure()
	return nil
}

// Test is Wait without blocking (MPI_Win_test): it reports whether the
// exposure epoch is over, and closes it if so.
func (w *Win) Test() (bool, error) {
	const op = "MPI_Win_test"
	r, err := w.exposing(op)
	if err != nil {
		return false, w.raise(err)
	}
	if err := r.progress(); err != nil {
		return false, w.raise(named(op, err))
	}
	if !w.completed() {
		return false, nil
	}
	w.endExposure()
	return true, nil
}

// exposing checks, for Wait and Test, that w is live and an exposure
// epoch of Post is open.
func (w *Win) exposing(op string) (*runtime, error) {
	r, err := winStart(op, w)
	if err != nil {
		return nil, err
	}
	if w.origin.exposure == nil {
		return nil, errorf(ErrRMASync, op, "window %s: no exposure epoch of Post is open", w.name)
	}
	return r, nil
}

func (w *Win) completed() bool {
	r := w.rt
	r.mu.Lock()
	defer r.mu.Unlock()
	r.serveRMA()
	for o, in := range w.origin.exposure {
		if in && w.ag.completes[o] == 0 {
			return false
		}
	}
	return true
}

func (w *Win) endExposure() {
	r := w.rt
	r.mu.Lock()
	for o, in := range w.origin.exposure {
		if in {
			w.ag.completes[o]--
		}
	}
	r.mu.Unlock()
	w.origin.exposure = nil
}

// Lock opens a passive-target epoch to rank target (MPI_Win_lock), with an
// exclusive or shared lock; it returns once the lock is held. assert takes
// ModeNoCheck (no other origin holds a conflicting lock: none is taken).
// The target's progress engine grants the lock (see docs/rma.md).
func (w *Win) Lock(lockType, target, assert int) error {
	const op = "MPI_Win_lock"
	if _, err := winStart(op, w); err != nil {
		return w.raise(err)
	}
	if err := w.lockable(op); err != nil {
		return w.raise(err)
	}
	if lockType != LockExclusive && lockType != LockShared {
		return w.raise(errorf(ErrLocktype, op, "lock type %d is neither LockExclusive (%d) nor LockShared (%d)", lockType, LockExclusive, LockShared))
	}
	if err := checkAssert(op, assert, ModeNoCheck); err != nil {
		return w.raise(err)
	}
	if target == ProcNull {
		return nil
	}
	if target < 0 || target >= w.comm.Size() {
		return w.raise(errorf(ErrRank, op, "target rank %d out of range [0,%d) of window %s", target, w.comm.Size(), w.name))
	}
	o := &w.origin
	switch {
	case o.lockAll || o.locks[target] != 0:
		return w.raise(errorf(ErrRMASync, op, "window %s: rank %d is already locked by this rank", w.name, target))
	case o.access != nil:
		return w.raise(errorf(ErrRMAConflict, op, "window %s: the access epoch of Start is open", w.name))
	case o.fence && o.fenceOps:
		return w.raise(errorf(ErrRMASync, op, "window %s: operations of a fence epoch are not completed (call Fence with MPI_MODE_NOSUCCEED first)", w.name))
	}
	if assert&ModeNoCheck != 0 {
		o.locks[target] = lockType | lockNoCheck
		o.fence = false
		return nil
	}
	if err := w.acquire(op, []int{target}, uint8(lockType)); err != nil {
		return w.raise(err)
	}
	o.locks[target] |= lockType
	o.fence = false
	return nil
}

// acquire takes a lock of kind on every rank of ts: in the rank's control
// block where this process maps it (one rank after the other, so that a
// LockAll waiting for one rank holds no ticket on the next), else through
// the rank's agent.
func (w *Win) acquire(op string, ts []int, kind uint8) error {
	r := w.rt
	var reqs []*adi.Request
	for _, t := range ts {
		if w.ctls[t] != nil {
			if err := w.lockNative(op, t, kind); err != nil {
				return err
			}
		}
	}
	r.mu.Lock()
	for _, t := range ts {
		if w.ctls[t] != nil {
			continue
		}
		q, err := w.ask(t, header{kind: amLock, op: kind}, nil)
		if err != nil {
			r.mu.Unlock()
			return named(op, err)
		}
		reqs = append(reqs, q)
	}
	r.mu.Unlock()
	if err := r.waitFor(func() bool {
		for _, q := range reqs {
			if !q.Done() {
				return false
			}
		}
		return true
	}); err != nil {
		return named(op, err)
	}
	for _, q := range reqs {
		if err := q.Status.Err; err != nil {
			return named(op, err)
		}
	}
	return nil
}

// unlock releases the locks of this rank on the ranks ts: after every
// operation on them is complete, in the control block where it was taken
// there, else by the owner's agent, whose answer says that everything
// before it is done.
func (w *Win) unlock(op string, ts []int) error {
	r := w.rt
	var agentTs, flushTs []int
	var first error
	for _, t := range ts {
		l := w.origin.locks[t]
		switch {
		case l&lockNative != 0:
			// Operations that went through the agent (a device without
			// remote memory access) must be done before the release; one
			// that failed is reported, and the lock released all the same.
			if err := w.flush(op, []int{t}, amFlush); err != nil && first == nil {
				first = err
			}
			r.mu.Lock()
			w.release(t, uint8(l&0xff))
			if t == w.comm.rank {
				w.ag.grant() // requests of other hosts' origins may wait for it
			}
			r.mu.Unlock()
		case l&lockNoCheck != 0:
			flushTs = append(flushTs, t)
		default:
			agentTs = append(agentTs, t)
		}
		w.origin.locks[t] = 0
	}
	for _, err := range []error{w.flush(op, flushTs, amFlush), w.flush(op, agentTs, amUnlock)} {
		if first == nil {
			first = err
		}
	}
	return first
}

// Unlock closes the passive-target epoch to rank target (MPI_Win_unlock):
// every operation of this rank on it is complete at the target, and the
// lock is released.
func (w *Win) Unlock(target int) error {
	const op = "MPI_Win_unlock"
	if _, err := winStart(op, w); err != nil {
		return w.raise(err)
	}
	if target == ProcNull {
		return nil
	}
	if target < 0 || target >= w.comm.Size() {
		return w.raise(errorf(ErrRank, op, "target rank %d out of range [0,%d) of window %s", target, w.comm.Size(), w.name))
	}
	if w.origin.locks[target] == 0 || w.origin.lockAll {
		return w.raise(errorf(ErrRMASync, op, "window %s: rank %d is not locked by this rank (with Lock)", w.name, target))
	}
	return w.raise(w.unlock(op, []int{target}))
}

// LockAll opens a passive-target epoch to every rank with shared locks
// (MPI_Win_lock_all). assert takes ModeNoCheck.
func (w *Win) LockAll(assert int) error {
	const op = "MPI_Win_lock_all"
	if _, err := winStart(op, w); err != nil {
		return w.raise(err)
	}
	if err := w.lockable(op); err != nil {
		return w.raise(err)
	}
	if err := checkAssert(op, assert, ModeNoCheck); err != nil {
		return w.raise(err)
	}
	o := &w.origin
	switch {
	case o.lockAll || hasLock(o.locks):
		return w.raise(errorf(ErrRMASync, op, "window %s: a passive-target epoch is already open", w.name))
	case o.access != nil:
		return w.raise(errorf(ErrRMAConflict, op, "window %s: the access epoch of Start is open", w.name))
	case o.fence && o.fenceOps:
		return w.raise(errorf(ErrRMASync, op, "window %s: operations of a fence epoch are not completed", w.name))
	}
	if assert&ModeNoCheck == 0 {
		if err := w.acquire(op, allRanks(w.comm.Size()), LockShared); err != nil {
			return w.raise(err)
		}
		for i := range o.locks {
			o.locks[i] |= LockShared
		}
	} else {
		for i := range o.locks {
			o.locks[i] = LockShared | lockNoCheck
		}
	}
	o.lockAll = true
	o.fence = false
	return nil
}

// UnlockAll closes LockAll's epoch (MPI_Win_unlock_all).
func (w *Win) UnlockAll() error {
	const op = "MPI_Win_unlock_all"
	if _, err := winStart(op, w); err != nil {
		return w.raise(err)
	}
	o := &w.origin
	if !o.lockAll {
		return w.raise(errorf(ErrRMASync, op, "window %s: LockAll is not in force", w.name))
	}
	err := w.unlock(op, allRanks(w.comm.Size()))
	o.lockAll = false
	clear(o.locks)
	return w.raise(err)
}

// passive checks that a flush call runs inside a passive-target epoch.
func (w *Win) passive(op string, target int) error {
	if _, err := winStart(op, w); err != nil {
		return err
	}
	if target >= w.comm.Size() || target < -1 {
		return errorf(ErrRank, op, "target rank %d out of range [0,%d) of window %s", target, w.comm.Size(), w.name)
	}
	o := &w.origin
	if !o.lockAll && (target < 0 && !hasLock(o.locks) || target >= 0 && o.locks[target] == 0) {
		who := "any rank"
		if target >= 0 {
			who = fmt.Sprintf("rank %d", target)
		}
		return errorf(ErrRMASync, op, "window %s: no passive-target epoch (Lock, LockAll) to %s is open", w.name, who)
	}
	return nil
}

// Flush completes every operation of this rank on rank target, at the
// target, inside a passive-target epoch (MPI_Win_flush).
func (w *Win) Flush(target int) error {
	const op = "MPI_Win_flush"
	if target == ProcNull {
		return nil
	}
	if w.flushed(target) {
		return nil
	}
	if err := w.passive(op, target); err != nil {
		return w.raise(err)
	}
	return w.raise(w.flush(op, []int{target}, amFlush))
}

// flushed is Flush's fast path: it reports whether a passive-target epoch
// to target is open and nothing of this rank's is in flight to it (every
// operation completed as it started), so that Flush has nothing to do.
// The window's origin state is this rank's, changed only by its own calls.
func (w *Win) flushed(target int) bool {
	if w == nil || w.freed || uint(target) >= uint(len(w.origin.locks)) {
		return false
	}
	o := &w.origin
	return (o.lockAll || o.locks[target] != 0) && !o.dirty[target] && len(o.pend[target]) == 0 && live.Load() != nil
}

// FlushAll is Flush for every rank (MPI_Win_flush_all).
func (w *Win) FlushAll() error {
	const op = "MPI_Win_flush_all"
	if err := w.passive(op, -1); err != nil {
		return w.raise(err)
	}
	return w.raise(w.flush(op, allRanks(w.comm.Size()), amFlush))
}

// FlushLocal completes every operation of this rank on rank target locally:
// its buffers may be reused (MPI_Win_flush_local).
func (w *Win) FlushLocal(target int) error {
	const op = "MPI_Win_flush_local"
	if target == ProcNull {
		return nil
	}
	if err := w.passive(op, target); err != nil {
		return w.raise(err)
	}
	return w.raise(w.waitLocalErr(op, target))
}

// FlushLocalAll is FlushLocal for every rank (MPI_Win_flush_local_all).
func (w *Win) FlushLocalAll() error {
	const op = "MPI_Win_flush_local_all"
	if err := w.passive(op, -1); err != nil {
		return w.raise(err)
	}
	return w.raise(w.waitLocalErr(op, -1))
}

// syncWord orders Sync's memory accesses.
var syncWord atomic.Uint64

// Sync synchronises this rank's view of its window memory with RMA
// (MPI_Win_sync). adimpi's windows are unified, so it is a full memory
// barrier for the program's own loads and stores; it also orders them
// after everything this process's agent has written into the window (the
// agent writes under the core's lock, which Sync takes), so a program may
// poll a word that RMA operations update: Sync, then read.
func (w *Win) Sync() error {
	r, err := winStart("MPI_Win_sync", w)
	if err != nil {
		return w.raise(err)
	}
	r.mu.Lock()
	syncWord.Add(1)
	r.mu.Unlock()
	return nil
}
