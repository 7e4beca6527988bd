package dmcs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/adimpi/adimpi/internal/goid"
	"github.com/adimpi/adimpi/mpi"
)

// AccOp is how PutOp combines its data with the target's memory, word by
// word (8-byte little-endian words).
type AccOp uint8

// The accumulate operations.
const (
	Replace    AccOp = iota // store, as Put
	SumInt64                // add as int64
	SumFloat64              // add as float64
	MinInt64                // keep the smaller int64
	MaxInt64                // keep the larger int64
	BorUint64               // bitwise or
	BandUint64              // bitwise and
	BxorUint64              // bitwise exclusive or
)

// PutOpAsync combines data (whole 8-byte words) into dest's memory at p
// with op, a remote accumulate; c counts it once dest has applied it.
// data must not change until then.
func (d *DMCS) PutOpAsync(dest int, p Ptr, data []byte, op AccOp, c *Counter) error {
	if len(data)%8 != 0 || op > BxorUint64 {
		return fmt.Errorf("dmcs: PutOp of %d bytes with op %d: want whole 8-byte words and a known op", len(data), op)
	}
	if d.oneSided(dest, p) {
		return c.done(d.winAcc(dest, p, data, op))
	}
	return d.send(dest, &header{kind: kindAcc, op: uint8(op), ptr: p, id: d.newOp(pending{c: c})}, data)
}

// PutOp is PutOpAsync waiting for dest to have applied it.
func (d *DMCS) PutOp(dest int, p Ptr, data []byte, op AccOp) error {
	if d.oneSided(dest, p) && len(data)%8 == 0 && op <= BxorUint64 {
		return d.winAcc(dest, p, data, op)
	}
	var c Counter
	if err := d.PutOpAsync(dest, p, data, op, &c); err != nil {
		return err
	}
	return d.wait1(&c, "PutOp", dest)
}

// accumulate applies op to dst with src, word by word.
func accumulate(dst, src []byte, op AccOp) {
	le := binary.LittleEndian
	for i := 0; i+8 <= len(src); i += 8 {
		a, b := le.Uint64(dst[i:]), le.Uint64(src[i:])
		switch op {
		case Replace:
			a = b
		case SumInt64:
			a = uint64(int64(a) + int64(b))
		case SumFloat64:
			a = math.Float64bits(math.Float64frombits(a) + math.Float64frombits(b))
		case MinInt64:
			a = uint64(min(int64(a), int64(b)))
		case MaxInt64:
			a = uint64(max(int64(a), int64(b)))
		case BorUint64:
			a |= b
		case BandUint64:
			a &= b
		case BxorUint64:
			a ^= b
		}
		le.PutUint64(dst[i:], a)
	}
}

// handle serves request h from src, whose inline payload is payload (a
// separate one is received here). Called with pollMu held. It is long
// because it is one switch over the request kinds, each a few lines,
// which read best side by side with the senders' headers.
func (d *DMCS) handle(h *header, src int, payload []byte) error {
	t0, s0 := d.clk.now(), d.clk.inSends.Load()
	var m, hdur int64 // time in MPI calls and in the handler (Timing)
	d.recvd.Add(1)
	// recvInto receives a separate payload straight into dst (its length
	// is h.n), or copies the inline one.
	recvInto := func(dst []byte) error {
		if h.flags&flagSeparate == 0 {
			copy(dst, payload)
			return nil
		}
		m0 := d.clk.now()
		_, err := mpi.Recv(d.comm, dst, src, tagData)
		m += d.clk.now() - m0
		return err
	}
	var err error
	switch h.kind {
	case kindRSR:
		if h.flags&flagSeparate != 0 {
			payload = make([]byte, h.n)
			err = recvInto(payload)
		}
		if err == nil {
			h0 := d.clk.now()
			err = d.runHandler(h, src, payload)
			hdur = d.clk.now() - h0
		}
		d.ack(src, h.id, nil)
	case kindPut, kindAcc:
		d.mu.Lock()
		dst, merr := d.mem(h.ptr, int(h.n))
		d.mu.Unlock()
		switch {
		case merr != nil:
			if h.flags&flagSeparate != 0 {
				err = recvInto(make([]byte, h.n)) // drain it
			}
		case h.kind == kindPut:
			err = recvInto(dst)
		default:
			data := payload
			if h.flags&flagSeparate != 0 {
				data = make([]byte, h.n)
				err = recvInto(data)
			}
			if h.ptr.seg() == heapSeg {
				// Atomically with the window's own accumulates.
				err = d.winAcc(d.rank, h.ptr, data, AccOp(h.op))
			} else {
				d.mu.Lock()
				accumulate(dst, data, AccOp(h.op))
				d.mu.Unlock()
			}
		}
		d.ack(src, h.id, merr)
	case kindGet:
		d.mu.Lock()
		b, merr := d.mem(h.ptr, int(h.args[0]))
		d.mu.Unlock()
		if merr != nil {
			err = d.send(src, &header{kind: kindGetReply, id: h.id, op: 1}, []byte(merr.Error()))
		} else {
			err = d.send(src, &header{kind: kindGetReply, id: h.id}, b)
		}
	case kindGetReply:
		d.mu.Lock()
		p, ok := d.pend.peek(h.id)
		d.mu.Unlock()
		var failed error
		switch {
		case h.op != 0:
			failed = errors.New(string(payload))
		case ok && int(h.n) == len(p.buf):
			err = recvInto(p.buf)
		case h.flags&flagSeparate != 0:
			err = recvInto(make([]byte, h.n))
		}
		d.complete(h.id, failed)
	case kindMalloc:
		d.mu.Lock()
		var ptr Ptr
		if off, ok := d.heapAlloc(int(h.args[0])); ok {
			ptr = mkPtr(heapSeg) + Ptr(off)
		} else {
			ptr = d.addSeg(make([]byte, h.args[0]))
		}
		d.malloced[ptr] = true
		d.mu.Unlock()
		err = d.send(src, &header{kind: kindMallocReply, id: h.id, ptr: ptr}, nil)
	case kindMallocReply:
		d.mu.Lock()
		if p, ok := d.pend.peek(h.id); ok && p.ptr != nil {
			*p.ptr = h.ptr
		}
		d.mu.Unlock()
		d.complete(h.id, nil)
	case kindFree:
		var ferr error
		d.mu.Lock()
		if d.malloced[h.ptr] {
			if h.ptr.seg() == heapSeg {
				d.heap.release(h.ptr.off())
			} else {
				delete(d.segs, h.ptr.seg())
			}
			delete(d.malloced, h.ptr)
		} else {
			ferr = fmt.Errorf("%v is not a block Malloc gave on rank %d (or is freed)", h.ptr, d.rank)
		}
		d.mu.Unlock()
		d.ack(src, h.id, ferr)
	case kindAck:
		var failed error
		if h.op != 0 {
			failed = errors.New(string(payload))
		}
		d.complete(h.id, failed)
	default:
		err = fmt.Errorf("dmcs: unknown request kind %d from rank %d", h.kind, src)
	}
	d.clk.handled(t0, s0, m, hdur)
	return err
}

// runHandler runs RSR handler h.handler.
func (d *DMCS) runHandler(h *header, src int, payload []byte) error {
	d.mu.Lock()
	var fn Handler
	if int(h.handler) < len(d.handlers) {
		fn = d.handlers[h.handler]
	}
	if fn == nil || len(d.deferred) > 0 {
		// Not registered here yet (a peer started sooner): keep it, in
		// order, for when it is (Register).
		d.deferred = append(d.deferred, deferredRSR{h: h.handler, src: src,
			args: append([]uint64(nil), h.args[:h.nargs]...), payload: append([]byte(nil), payload...)})
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()
	d.noteHolder()
	fn(d, src, h.args[:h.nargs], payload)
	return nil
}

// noteHolder records, before a handler runs on a waiter that polls in the
// poll thread's place, that waiter's goroutine, so that a synchronous call
// in the handler is refused rather than waiting for itself. Once per
// hand-over that runs handlers: reading the goroutine id is slow.
func (d *DMCS) noteHolder() {
	if d.waiterHolds && d.holderG.Load() == 0 {
		d.holderG.Store(goid.ID())
	}
}

// deferredRSR is a request for a handler not registered yet when it came.
type deferredRSR struct {
	h       uint32
	src     int
	args    []uint64
	payload []byte
}

// runDeferred runs the kept requests whose handlers are registered now,
// in order of arrival (in a poll).
func (d *DMCS) runDeferred() {
	for {
		d.mu.Lock()
		if len(d.deferred) == 0 || int(d.deferred[0].h) >= len(d.handlers) {
			d.mu.Unlock()
			return
		}
		r := d.deferred[0]
		d.deferred = d.deferred[1:]
		fn := d.handlers[r.h]
		d.mu.Unlock()
		d.noteHolder()
		fn(d, r.src, r.args, r.payload)
	}
}

// ack tells src that its operation id is done, or why it failed.
func (d *DMCS) ack(src int, id uint64, failed error) {
	if id == 0 {
		return
	}
	h := header{kind: kindAck, id: id}
	var msg []byte
	if failed != nil {
		h.op = 1
		msg = []byte(failed.Error())
		if len(msg) > InlineMax {
			msg = msg[:InlineMax]
		}
	}
	if err := d.send(src, &h, msg); err != nil {
		d.mu.Lock()
		if d.err == nil {
			d.err = err
		}
		d.mu.Unlock()
	}
}

// complete counts operation id done; failed is the target's error.
func (d *DMCS) complete(id uint64, failed error) {
	d.mu.Lock()
	p, ok := d.pend.remove(id)
	d.mu.Unlock()
	if ok && p.c != nil {
		if failed != nil {
			p.c.err.CompareAndSwap(nil, &failed)
		}
		p.c.n.Add(1)
	}
	if d.thread {
		d.mu.Lock()
		d.cond.Broadcast()
		d.mu.Unlock()
	}
}

// Close ends DMCS; it is collective. It serves requests until no process
// has an operation in flight — every request sent has been handled, twice
// in a row — then stops the poll thread and frees the communicator.
func (d *DMCS) Close() error {
	var last [2]int64
	for round := 0; ; round++ {
		// This process's own operations first.
		if err := d.drainOwn(); err != nil {
			return err
		}
		counts := []int64{d.sent.Load(), d.recvd.Load()}
		sum := make([]int64, 2)
		q, err := mpi.Iallreduce(d.comm, counts, sum, mpi.Sum)
		if err != nil {
			return fmt.Errorf("dmcs: Close: %w", err)
		}
		if err := d.waitServing(q); err != nil {
			return err
		}
		if sum[0] == sum[1] && round > 0 && sum[0] == last[0] && sum[1] == last[1] {
			break
		}
		last = [2]int64{sum[0], sum[1]}
	}
	d.stop.Store(true)
	d.me.wakeAll()
	if d.thread {
		<-d.done
	}
	if d.remote {
		_ = d.rreq.Cancel()
		close(d.arm)
		<-d.watchDone
		if !d.armed {
			_, _ = d.rreq.Wait()
		}
	}
	d.mu.Lock()
	sends := d.sends
	d.sends, d.bufs = nil, nil
	d.mu.Unlock()
	if _, err := mpi.Waitall(sends); err != nil {
		d.mu.Lock()
		if d.err == nil {
			d.err = err
		}
		d.mu.Unlock()
	}
	d.mu.Lock()
	err := d.err
	if err == nil && len(d.deferred) > 0 {
		err = fmt.Errorf("dmcs: Close: rank %d asked for handler %d, never registered here (%d handlers are)", d.deferred[0].src, d.deferred[0].h, len(d.handlers))
	}
	d.mu.Unlock()
	if d.heap != nil {
		if ferr := d.heap.close(); err == nil && ferr != nil {
			err = ferr
		}
	}
	if d.shm != nil {
		if ferr := d.shm.close(); err == nil && ferr != nil {
			err = ferr
		}
	}
	if ferr := d.comm.Free(); err == nil && ferr != nil {
		err = ferr
	}
	return err
}

// drainOwn returns once every operation of this process has its reply,
// serving requests meanwhile (or letting the poll thread serve them).
func (d *DMCS) drainOwn() error {
	pend0 := func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.pend.n == 0 || d.err != nil
	}
	if d.thread {
		if err := d.waitThreaded(pend0); err != nil {
			return err
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.err
	}
	if !d.pollMu.TryLock() {
		return errBlocked
	}
	defer d.pollMu.Unlock()
	err := d.waitLoop(pend0)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// Barrier returns once every process has called it, serving requests
// meanwhile (a blocking MPI barrier would leave peers that wait for this
// process's service stuck). Operations issued before it are not
// necessarily complete: wait for their Counters first.
func (d *DMCS) Barrier() error {
	q, err := mpi.Ibarrier(d.comm)
	if err != nil {
		return fmt.Errorf("dmcs: Barrier: %w", err)
	}
	return d.waitServing(q)
}

// waitServing waits for q, serving requests meanwhile: a goroutine waits
// in MPI and rings this process's bell when q completes.
func (d *DMCS) waitServing(q *mpi.Request) error {
	if d.thread {
		_, err := q.Wait()
		return err
	}
	if !d.pollMu.TryLock() {
		return errBlocked
	}
	defer d.pollMu.Unlock()
	var fin atomic.Bool
	var qerr error
	go func() {
		_, qerr = q.Wait()
		fin.Store(true)
		d.me.force()
	}()
	if err := d.waitLoop(fin.Load); err != nil {
		return err
	}
	return qerr
}
