package mpi

import (
	"bytes"
	"fmt"
	"sync/atomic"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// The generic RMA path: an origin sends each operation it cannot carry out
// itself as a point-to-point message on the window's own communicator, and
// the target's agent, run by the target's progress engine (the waiting
// loops and the asynchronous progress goroutine) after each device pass,
// carries it out on the window memory and answers. Messages from one origin
// are carried out in the order they were sent (MPI's non-overtaking rule on
// one context), which gives accumulate ordering, and makes a flush or
// unlock answered by the target mean that every earlier operation of that
// origin is done. Every agent operation runs under the core's lock, so
// accumulates on one target are atomic with respect to each other.

// Message kinds.
const (
	amPut = iota + 1
	amGet
	amAcc
	amGetAcc
	amCAS
	amFlush
	amLock
	amUnlock
	amComplete
)

// Tags on a window's communicator.
const (
	tagReq       = 1  // an operation's header (the agent's receives)
	tagData      = 2  // what follows a header: its block list, its data
	tagPost      = 3  // PSCW: a target's Post tells its origins
	tagReplyBase = 16 // answers, one tag per operation in flight
)

// Header layout and sizes.
const (
	hdrSize   = 40
	rxSize    = 4096 // an agent receive buffer: header, blocks, inline data
	rxSlots   = 8    // receives an agent keeps posted
	inlineMax = 2048 // data up to this size travels in the header's message
	fData     = 1    // flag: the data follow in their own message
	fBlocks   = 2    // flag: the block list follows in its own message
)

// header is an operation as it travels.
type header struct {
	kind, op, basic, flags uint8
	reply                  uint32
	off                    uint64 // target byte offset in the window (dynamic: absolute address)
	n                      uint64 // data bytes
	nblk                   uint32 // blocks in the list (0: one block [0, n))
}

func (h *header) put(b []byte) {
	b[0], b[1], b[2], b[3] = h.kind, h.op, h.basic, h.flags
	le.PutUint32(b[4:], h.reply)
	le.PutUint64(b[8:], h.off)
	le.PutUint64(b[16:], h.n)
	le.PutUint32(b[24:], h.nblk)
}

func (h *header) get(b []byte) {
	h.kind, h.op, h.basic, h.flags = b[0], b[1], b[2], b[3]
	h.reply = le.Uint32(b[4:])
	h.off = le.Uint64(b[8:])
	h.n = le.Uint64(b[16:])
	h.nblk = le.Uint32(b[24:])
}

// blk is a contiguous piece of the target layout: bytes [off, off+n) from
// the target displacement.
type blk struct{ off, n int }

func putBlocks(b []byte, bs []blk) {
	for i, x := range bs {
		le.PutUint64(b[16*i:], uint64(int64(x.off)))
		le.PutUint64(b[16*i+8:], uint64(x.n))
	}
}

func getBlocks(b []byte, n int) []blk {
	bs := make([]blk, n)
	for i := range bs {
		bs[i] = blk{int(int64(le.Uint64(b[16*i:]))), int(le.Uint64(b[16*i+8:]))}
	}
	return bs
}

// rmaTypes numbers the basic types an accumulate names.
var rmaTypes = []*datatype.Type{nil, datatype.Int, datatype.Int8, datatype.Int16, datatype.Int32, datatype.Int64,
	datatype.Uint, datatype.Uint8, datatype.Uint16, datatype.Uint32, datatype.Uint64, datatype.Uintptr,
	datatype.Float32, datatype.Float64, datatype.Complex64, datatype.Complex128, datatype.Byte,
	datatype.Float32Int32, datatype.Float64Int32, datatype.Int64Int32, datatype.Int32Int32, datatype.Int16Int32}

func rmaTypeCode(t *datatype.Type) uint8 {
	for i, x := range rmaTypes {
		if x == t && t != nil {
			return uint8(i)
		}
	}
	return 0
}

// rmaWork is raised by a completing agent receive: the next pass of the
// progress engine runs the agents (serveRMA). rmaAgents are the running
// agents of this process, under the core's lock.
var (
	rmaWork   atomic.Bool
	rmaAgents []*agent
	// servingAgents counts the running agents that some origin asks
	// (Win.asked: not those of windows every origin reaches natively):
	// while there are any, a board wait polls instead of sleeping on its
	// board, which a peer's one-sided operation does not ring.
	servingAgents atomic.Int32
)

func raiseRMAWork(*adi.Request) { rmaWork.Store(true) }

// serveRMA runs every agent's pending work. The progress engine calls it
// with the core's lock held, after a device pass, when rmaWork is raised.
func (r *runtime) serveRMA() {
	if !rmaWork.Swap(false) {
		return
	}
	for _, a := range rmaAgents {
		a.serve()
	}
	// What the agents just did may have left device messages queued for
	// the device's next pass (a receive that matched a waiting rendezvous
	// queues its clear-to-send). A waiter that read the doorbell before
	// this pass would otherwise sleep on it while the origin waits for
	// that very message, until something else rang: ringing it here makes
	// that sleep return at once, so the next pass sends them.
	r.dev.Wake()
}

// agent is a window's target side.
type agent struct {
	w     *Win
	r     *runtime
	on    bool
	slots []*rxSlot      // posted receives for headers, in posting order
	busy  *pendingOp     // an operation waiting for what follows its header
	sends []*adi.Request // answers in flight

	held    map[int]uint8 // the locks granted by this agent: origin's comm rank → kind
	waiters []lockWaiter

	completes []int    // PSCW: Complete notices received, per origin comm rank
	posts     []int    // PSCW: Post notices this rank gave itself
	errs      []string // per origin comm rank: the first failed access since its last flush
}

type rxSlot struct {
	req adi.Request
	buf []byte
}

type lockWaiter struct {
	origin int   // comm rank
	kind   uint8 // LockExclusive, LockShared
	reply  uint32
	ticket uint64 // taken in this rank's control block (winCtl)
}

// pendingOp is an operation being carried out.
type pendingOp struct {
	h      header
	src    int // origin's comm rank
	blocks []blk
	data   []byte
	follow []*adi.Request // receives of what follows the header, in order
	direct bool           // the data were received straight into the window
	// sink, for an operation of this rank on itself, receives the answer
	// in place of a message.
	sink func([]byte)
}

func (a *agent) start(w *Win) error {
	n := w.comm.Size()
	a.w, a.r, a.held = w, w.rt, map[int]uint8{}
	a.completes, a.posts, a.errs = make([]int, n), make([]int, n), make([]string, n)
	if n > 1 {
		for range rxSlots {
			s := &rxSlot{buf: make([]byte, rxSize)}
			if err := a.post(s); err != nil {
				return err
			}
			a.slots = append(a.slots, s)
		}
	}
	a.on = true
	rmaAgents = append(rmaAgents, a)
	if w.asked {
		servingAgents.Add(1)
	}
	return nil
}

func (a *agent) post(s *rxSlot) error {
	s.req = adi.Request{Op: adi.OpRecv, Context: a.w.comm.ctx, Peer: AnySource, Tag: tagReq,
		Buf: adi.Bytes(s.buf), OnDone: raiseRMAWork}
	return a.r.dev.Irecv(&s.req)
}

// idle checks, for Free, that this rank exposes its window in no epoch.
func (a *agent) idle(op string, w *Win) error {
	if w.origin.exposure != nil {
		return errorf(ErrRMASync, op, "window %s: the exposure epoch of Post is still open (call Wait first)", w.name)
	}
	return nil
}

// stop withdraws the agent's receives and waits for its answers to leave.
func (a *agent) stop(op string) error {
	r := a.r
	for {
		r.mu.Lock()
		r.serveRMA()
		rmaWork.Store(true) // another agent may have work this pass took
		left := a.slots[:0]
		for _, s := range a.slots {
			if !s.req.Done() && !r.dev.CancelRecv(&s.req) {
				left = append(left, s)
			}
		}
		a.slots = left
		a.reap()
		done := len(a.slots) == 0 && a.busy == nil && len(a.sends) == 0
		if done {
			lockWaits.Add(-int32(len(a.waiters)))
			a.waiters = nil
			for i, x := range rmaAgents {
				if x == a {
					rmaAgents = append(rmaAgents[:i], rmaAgents[i+1:]...)
					break
				}
			}
			if a.w.asked {
				servingAgents.Add(-1)
			}
			a.on = false
		}
		r.mu.Unlock()
		if done {
			return nil
		}
		if err := r.waitFor(func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			a.reap()
			return len(a.sends) == 0 && (a.busy == nil || a.followed())
		}); err != nil {
			return named(op, err)
		}
	}
}

// reap drops the answers that have left.
func (a *agent) reap() {
	k := a.sends[:0]
	for _, s := range a.sends {
		if !s.Done() {
			k = append(k, s)
		}
	}
	clear(a.sends[len(k):])
	a.sends = k
}

func (a *agent) followed() bool {
	for _, f := range a.busy.follow {
		if !f.Done() {
			return false
		}
	}
	return true
}

// serve carries out every operation that has arrived, in order.
func (a *agent) serve() {
	if !a.on {
		return
	}
	a.reap()
	if len(a.waiters) > 0 {
		a.grant()
	}
	for {
		if a.busy != nil {
			if !a.followed() {
				return
			}
			p := a.busy
			a.busy = nil
			if err := a.finishFollow(p); err != nil {
				a.fail(p, err.Error())
			} else {
				a.apply(p)
			}
		}
		if len(a.slots) == 0 || !a.slots[0].req.Done() {
			return
		}
		s := a.slots[0]
		a.slots = a.slots[1:]
		a.arrive(s)
		if err := a.post(s); err != nil {
			a.errs[a.w.comm.rank] = err.Error()
			continue
		}
		a.slots = append(a.slots, s)
	}
}

// arrive takes the header (and what came with it) out of a slot.
func (a *agent) arrive(s *rxSlot) {
	st := s.req.Status
	src := a.w.comm.commRank(st.Source)
	if st.Err != nil || st.Bytes < hdrSize {
		a.errs[src] = fmt.Sprintf("agent receive: %d bytes, %v", st.Bytes, st.Err)
		return
	}
	msg := s.buf[:st.Bytes]
	p := &pendingOp{src: src}
	p.h.get(msg)
	rest := msg[hdrSize:]
	switch p.h.kind {
	case amLock:
		a.lock(src, p.h.op, p.h.reply)
		return
	case amUnlock:
		a.unlock(src)
		a.ack(src, p.h.reply)
		return
	case amFlush:
		a.ack(src, p.h.reply)
		return
	case amComplete:
		a.completes[src]++
		return
	}
	world := st.Source
	if p.h.flags&fBlocks == 0 {
		nb := int(p.h.nblk)
		p.blocks = getBlocks(rest, nb)
		rest = rest[16*nb:]
	} else {
		b := make([]byte, 16*int(p.h.nblk))
		p.follow = append(p.follow, a.recvFollow(world, b))
	}
	n := int(p.h.n)
	if p.h.kind == amCAS {
		n *= 2 // the new value and the compare value
	}
	switch {
	case p.h.kind == amGet:
	case p.h.flags&fData == 0:
		p.data = append([]byte(nil), rest[:n]...)
	default:
		if p.h.kind == amPut && p.h.flags&fBlocks == 0 {
			if pieces, err := a.target(p.h.off, p.blocks, n); err == nil && len(pieces) == 1 {
				p.data, p.direct = pieces[0], true
			}
		}
		if p.data == nil {
			p.data = make([]byte, n)
		}
		p.follow = append(p.follow, a.recvFollow(world, p.data))
	}
	if len(p.follow) > 0 {
		a.busy = p
		return
	}
	a.apply(p)
}

func (a *agent) recvFollow(world int, b []byte) *adi.Request {
	q := &adi.Request{Op: adi.OpRecv, Context: a.w.comm.ctx, Peer: world, Tag: tagData, Buf: adi.Bytes(b), OnDone: raiseRMAWork}
	if err := a.r.dev.Irecv(q); err != nil {
		q.Complete(adi.Status{Err: err})
	}
	return q
}

// finishFollow decodes the block list that followed a header.
func (a *agent) finishFollow(p *pendingOp) error {
	for _, f := range p.follow {
		if f.Status.Err != nil {
			return f.Status.Err
		}
	}
	if p.h.flags&fBlocks != 0 {
		p.blocks = getBlocks(p.follow[0].Buf.Mem, int(p.h.nblk))
	}
	return nil
}

// target resolves an access of n bytes laid out as blocks from byte offset
// off into pieces of this rank's window memory.
func (a *agent) target(off uint64, blocks []blk, n int) ([][]byte, error) {
	if len(blocks) == 0 {
		blocks = []blk{{0, n}}
	}
	w := a.w
	pieces := make([][]byte, 0, len(blocks))
	for _, b := range blocks {
		if b.n == 0 {
			continue
		}
		if w.flavor == FlavorDynamic {
			lo := uintptr(int64(off) + int64(b.off))
			p, ok := w.attached(lo, b.n)
			if !ok {
				return nil, fmt.Errorf("bytes [%#x, %#x) are not inside memory attached to window %s on rank %d", lo, lo+uintptr(b.n), w.name, w.comm.rank)
			}
			pieces = append(pieces, p)
			continue
		}
		lo := int64(off) + int64(b.off)
		if lo < 0 || lo+int64(b.n) > int64(len(w.mem)) {
			return nil, fmt.Errorf("bytes [%d, %d) are outside the %d bytes of window %s on rank %d", lo, lo+int64(b.n), len(w.mem), w.name, w.comm.rank)
		}
		pieces = append(pieces, w.mem[lo:lo+int64(b.n)])
	}
	return pieces, nil
}

// attached finds n bytes at address lo in a dynamic window's memory.
func (w *Win) attached(lo uintptr, n int) ([]byte, bool) {
	for _, g := range w.regions {
		if lo >= g.addr && lo+uintptr(n) <= g.addr+uintptr(len(g.mem)) {
			o := lo - g.addr
			return g.mem[o : o+uintptr(n)], true
		}
	}
	return nil, false
}

func gather(pieces [][]byte, n int) []byte {
	out := make([]byte, 0, n)
	for _, p := range pieces {
		out = append(out, p...)
	}
	return out
}

func scatter(pieces [][]byte, data []byte) {
	for _, p := range pieces {
		data = data[copy(p, data):]
	}
}

// apply carries out a data operation on the window memory and answers it.
func (a *agent) apply(p *pendingOp) {
	n := int(p.h.n)
	pieces, err := a.target(p.h.off, p.blocks, n)
	if err != nil {
		a.fail(p, err.Error())
		return
	}
	switch p.h.kind {
	case amPut:
		if !p.direct {
			scatter(pieces, p.data)
		}
	case amGet:
		if len(pieces) == 1 && p.sink == nil {
			a.answer(p, pieces[0])
			return
		}
		a.answer(p, gather(pieces, n))
	case amAcc, amGetAcc, amCAS:
		var old []byte
		var why string
		a.w.atomically(a.w.comm.rank, func() { old, why = combine(p.h, pieces, p.data) })
		if why != "" {
			a.fail(p, why)
			return
		}
		if p.h.kind != amAcc {
			a.answer(p, old)
		}
	}
}

// combine carries out an accumulate (amAcc, amGetAcc) or a compare-and-swap
// on the window pieces and returns their old contents, or why it cannot.
// The caller holds the window's accumulate lock (atomically).
func combine(h header, pieces [][]byte, data []byte) ([]byte, string) {
	n := int(h.n)
	old := gather(pieces, n)
	if h.kind == amCAS {
		if bytes.Equal(old, data[n:]) {
			scatter(pieces, data[:n])
		}
		return old, ""
	}
	k := builtin(opCode(h.op), rmaTypes[h.basic])
	if k == nil {
		return nil, fmt.Sprintf("operation %d is not defined for %s", h.op, rmaTypes[h.basic])
	}
	nw := append([]byte(nil), data...)
	k(old, nw) // nw = old op origin: Replace gives the origin's value, NoOp the old one
	scatter(pieces, nw)
	return old, ""
}

// atomically runs fn holding rank t's accumulate lock, which every process
// that carries out accumulates on t's memory takes: t's agent, and origins
// on t's host that map it (winCtl). A window without control blocks has
// only its agent, which runs under the core's lock.
func (w *Win) atomically(t int, fn func()) {
	c := w.ctls[t]
	if c == nil {
		fn()
		return
	}
	for !atomic.CompareAndSwapUint32(c.mu, 0, 1) {
		osYield() // the holder copies a few bytes; it may have lost its CPU
	}
	fn()
	atomic.StoreUint32(c.mu, 0)
}

// fail records a failed access for its origin's next flush, and answers an
// operation that returns data with an empty message, which the origin
// takes as the failure.
func (a *agent) fail(p *pendingOp, why string) {
	if a.errs[p.src] == "" {
		a.errs[p.src] = why
	}
	switch p.h.kind {
	case amGet, amGetAcc, amCAS:
		a.answer(p, nil)
	}
}

// answer sends an operation's result to its origin.
func (a *agent) answer(p *pendingOp, b []byte) {
	if p.sink != nil {
		p.sink(b)
		return
	}
	a.send(p.src, p.h.reply, b)
}

func (a *agent) send(origin int, tag uint32, b []byte) {
	q := &adi.Request{Op: adi.OpSend, Context: a.w.comm.ctx, Peer: a.w.comm.world[origin], Tag: int(tag), Buf: adi.Bytes(b)}
	if err := a.r.dev.Isend(q); err != nil {
		a.errs[origin] = err.Error()
		return
	}
	a.sends = append(a.sends, q)
}

// ack answers a flush or unlock with the origin's first failed access
// since its last one ("" if none).
func (a *agent) ack(origin int, tag uint32) {
	why := a.errs[origin]
	a.errs[origin] = ""
	a.send(origin, tag, []byte(why))
}

// lock takes a ticket for origin's lock of kind and grants it if its turn
// has come, else queues it.
func (a *agent) lock(origin int, kind uint8, reply uint32) {
	tk := a.w.ctls[a.w.comm.rank].ticket(kind)
	a.waiters = append(a.waiters, lockWaiter{origin, kind, reply, tk})
	lockWaits.Add(1)
	a.grant()
}

// unlock releases origin's lock and grants what can be granted next.
func (a *agent) unlock(origin int) {
	kind, ok := a.held[origin]
	if !ok {
		if a.errs[origin] == "" {
			a.errs[origin] = fmt.Sprintf("rank %d unlocked window %s on rank %d, which it had not locked", origin, a.w.name, a.w.comm.rank)
		}
		return
	}
	delete(a.held, origin)
	a.w.release(a.w.comm.rank, kind)
	a.grant()
}

// grant grants the queued locks whose turn has come. Holders on this host
// release the lock without the agent's knowledge: while a lock waits, the
// agent runs at every progress pass, and a waiter of this process sleeps
// no longer than rmaNap (sleepBound).
func (a *agent) grant() {
	c := a.w.ctls[a.w.comm.rank]
	k := a.waiters[:0]
	for _, q := range a.waiters {
		if !c.turn(q.kind, q.ticket) {
			k = append(k, q)
			continue
		}
		lockWaits.Add(-1)
		a.held[q.origin] = q.kind
		a.send(q.origin, q.reply, nil)
	}
	clear(a.waiters[len(k):])
	a.waiters = k
	if len(k) > 0 {
		rmaWork.Store(true)
	}
}
