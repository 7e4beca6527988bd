package mpi

import (
	"bytes"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// rmaArgs is one RMA operation as the program gave it.
type rmaArgs struct {
	op      string // the MPI call, for errors
	kind    uint8
	origin  Buffer // data sent (Put, accumulates, CAS's new value)
	result  Buffer // data returned (Get, GetAccumulate, FetchAndOp, CAS)
	compare []byte // CAS's compare value, packed
	target  int
	disp    int
	tcount  int
	ttype   *datatype.Type
	mpiOp   *Op
}

// rma checks and starts an operation and returns the request that
// completes with it locally (the origin's buffers may be reused).
func (w *Win) rma(a *rmaArgs) (*adi.Request, error) {
	r, err := winStart(a.op, w)
	if err != nil {
		return nil, err
	}
	n := w.comm.Size()
	if a.target == ProcNull {
		return completed, nil
	}
	if a.target < 0 || a.target >= n {
		return nil, errorf(ErrRank, a.op, "target rank %d out of range [0,%d) of window %s", a.target, n, w.name)
	}
	if !w.origin.may(a.target) {
		return nil, errorf(ErrRMASync, a.op, "no access epoch to rank %d is open on window %s (call Fence, Start, Lock or LockAll first)", a.target, w.name)
	}
	if err := w.checkRMA(a); err != nil {
		return nil, err
	}
	size := a.tcount * a.ttype.Size()
	blocks := flatten(a.ttype, a.tcount)
	off := int64(a.disp) * int64(w.units[a.target])
	if w.flavor != FlavorDynamic {
		if lo, hi := blockSpan(blocks, size); size > 0 && (off+int64(lo) < 0 || off+int64(hi) > int64(w.sizes[a.target])) {
			return nil, errorf(ErrRMARange, a.op, "target bytes [%d, %d) (displacement %d × unit %d, %d×%s) are outside rank %d's window %s of %d bytes",
				off+int64(lo), off+int64(hi), a.disp, w.units[a.target], a.tcount, a.ttype, a.target, w.name, w.sizes[a.target])
		}
	} else if a.disp < 0 {
		return nil, errorf(ErrDisp, a.op, "displacement %d is negative (a dynamic window's displacements are addresses)", a.disp)
	}
	w.origin.used()
	h := header{kind: a.kind, n: uint64(size), off: uint64(off)}
	if a.mpiOp != nil {
		h.op = uint8(a.mpiOp.code)
		h.basic = rmaTypeCode(basicOf(a.ttype))
	}
	if size == 0 {
		return completed, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.queues(a.target) {
		if a.kind == amAcc {
			return w.queueAcc(a, h, off, blocks, size)
		}
		// Any other operation to the target comes after the queued
		// accumulates, as the program called them.
		if err := w.drainAccs(a.op, a.target); err != nil {
			return nil, err
		}
	}
	switch {
	case a.target == w.comm.rank:
		q, err := w.local(a, h, blocks)
		// An origin that keeps working on its own memory (spinning on a
		// lock word there) must still serve the others' operations.
		_, perr := r.dev.Progress()
		r.serveRMA()
		if err == nil && perr != nil {
			err = named(a.op, perr)
		}
		return q, err
	case (a.kind == amPut || a.kind == amGet) && (w.direct[a.target] != nil || w.remote[a.target]):
		return w.native(a, off, blocks, size)
	case w.ctls[a.target] != nil && (w.direct[a.target] != nil || w.remote[a.target]):
		return w.nativeAcc(a, h, off, blocks, size)
	}
	return w.message(a, h, blocks)
}

// checkRMA checks an operation's buffers, datatypes and operation.
func (w *Win) checkRMA(a *rmaArgs) error {
	for _, b := range []Buffer{a.origin, a.result} {
		if b.Type == nil && b.Count == 0 && b.Mem == nil {
			continue
		}
		if err := checkBuffer(a.op, b); err != nil {
			return err
		}
	}
	if a.kind != amGet && a.origin.Type == nil {
		return errorf(ErrBuffer, a.op, "origin buffer has no datatype (only MPI_Get_accumulate with MPI_NO_OP takes none)")
	}
	tb := Buffer{Count: a.tcount, Type: a.ttype}
	if a.ttype == nil {
		return errorf(ErrType, a.op, "target datatype is nil")
	}
	if a.tcount < 0 {
		return errorf(ErrCount, a.op, "target count %d is negative", a.tcount)
	}
	if !a.ttype.Committed() || a.ttype.Freed() {
		return errorf(ErrType, a.op, "target datatype %s is not committed or has been freed", tb.Type)
	}
	size := a.tcount * a.ttype.Size()
	for _, b := range []Buffer{a.origin, a.result} {
		if b.Type != nil && b.Size() != size {
			return errorf(ErrType, a.op, "origin buffer holds %d bytes (%d×%s), the target %d (%d×%s)", b.Size(), b.Count, b.Type, size, a.tcount, a.ttype)
		}
	}
	if a.mpiOp == nil {
		return nil
	}
	if a.mpiOp.user != nil {
		return errorf(ErrOp, a.op, "%s is a user operation; RMA accumulates take predefined operations only", a.mpiOp.name)
	}
	tbasic := basicOf(a.ttype)
	for _, b := range []Buffer{a.origin, a.result} {
		if b.Type != nil && a.mpiOp.code != opNoOp && basicOf(b.Type) != tbasic {
			return errorf(ErrType, a.op, "origin datatype %s and target datatype %s are made of different basic types", b.Type, a.ttype)
		}
	}
	if rmaTypeCode(tbasic) == 0 {
		return errorf(ErrType, a.op, "target datatype %s is not made of one predefined type", a.ttype)
	}
	if _, err := reducerFor(a.op, a.mpiOp, tbasic, a.tcount*(a.ttype.Size()/max(1, tbasic.Size()))); err != nil {
		return err
	}
	return nil
}

// basicOf is the predefined type t is made of (nil if several).
func basicOf(t *datatype.Type) *datatype.Type {
	if t == nil {
		return nil
	}
	return t.Basic()
}

// flatten lists the blocks of count elements of t, as byte offsets from
// the buffer's origin (nil for contiguous data starting at the origin).
func flatten(t *datatype.Type, count int) []blk {
	n := count * t.Size()
	if n == 0 {
		return nil
	}
	if t.Contiguous() && t.Origin() == 0 {
		return nil
	}
	mem := make([]byte, t.Span(count)) // never touched: only its addresses are read
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	var bs []blk
	_ = t.Blocks(mem, count, 0, n, func(p []byte) error {
		o := int(uintptr(unsafe.Pointer(unsafe.SliceData(p)))-base) - t.Origin()
		if k := len(bs) - 1; k >= 0 && bs[k].off+bs[k].n == o {
			bs[k].n += len(p)
		} else {
			bs = append(bs, blk{o, len(p)})
		}
		return nil
	})
	if len(bs) == 1 && bs[0].off == 0 {
		return nil
	}
	return bs
}

// blockSpan is the range of bytes blocks cover ([0, n) for nil: see flatten).
func blockSpan(bs []blk, size int) (lo, hi int) {
	if bs == nil {
		return 0, size
	}
	lo, hi = bs[0].off, bs[0].off+bs[0].n
	for _, b := range bs[1:] {
		lo, hi = min(lo, b.off), max(hi, b.off+b.n)
	}
	return lo, hi
}

// completed is a request that has completed without error, shared by the
// operations that complete as they start (nothing ever changes it).
var completed = doneRequest(nil)

// doneRequest is a request that has already completed with err.
func doneRequest(err error) *adi.Request {
	q := &adi.Request{}
	q.Complete(adi.Status{Source: AnySource, Tag: AnyTag, Err: err})
	return q
}

// local carries out an operation on this rank's own window memory at once,
// through its agent (so that it is atomic with the others' accumulates).
func (w *Win) local(a *rmaArgs, h header, blocks []blk) (*adi.Request, error) {
	p := &pendingOp{h: h, src: w.comm.rank, blocks: blocks}
	if a.origin.Type != nil {
		p.data = packIn(a.origin)
		if a.kind == amCAS {
			p.data = append(append([]byte(nil), p.data...), a.compare...)
		}
	}
	var got []byte
	answered := false
	p.sink = func(b []byte) { got, answered = b, true }
	w.ag.errs[w.comm.rank] = ""
	w.ag.apply(p)
	if why := w.ag.errs[w.comm.rank]; why != "" {
		w.ag.errs[w.comm.rank] = ""
		return nil, errorf(ErrRMARange, a.op, "%s", why)
	}
	if answered && a.result.Type != nil {
		a.result.CopyIn(0, got)
	}
	return completed, nil
}

// native moves a Put's or Get's data itself: a copy into or out of memory
// mapped here (a shared window) or the device's remote write or read.
// Called with the core's lock held.
func (w *Win) native(a *rmaArgs, off int64, blocks []blk, size int) (*adi.Request, error) {
	t := a.target
	if mem := w.direct[t]; mem != nil && blocks == nil && a.origin.Contiguous() && a.result.Contiguous() {
		// The common case: one copy through the mapping.
		if a.kind == amPut {
			copy(mem[off:off+int64(size)], a.origin.Mem[:size])
		} else {
			copy(a.result.Mem[:size], mem[off:off+int64(size)])
		}
		return completed, nil
	}
	if blocks == nil {
		blocks = []blk{{0, size}}
	}
	var data []byte
	if a.kind == amPut {
		data = packIn(a.origin)
	} else {
		var store func()
		data, store = packOut(a.result, false)
		defer store()
	}
	for _, b := range blocks {
		chunk := data[:b.n]
		data = data[b.n:]
		at := off + int64(b.off)
		if mem := w.direct[t]; mem != nil {
			if a.kind == amPut {
				copy(mem[at:], chunk)
			} else {
				copy(chunk, mem[at:])
			}
			continue
		}
		if err := w.remoteCopy(t, at, []blk{{0, b.n}}, [][]byte{chunk}, a.kind == amPut); err != nil {
			return nil, errorf(ErrOther, a.op, "rank %d of window %s: %v", t, w.name, err)
		}
	}
	return completed, nil
}

// nativeAcc carries out an accumulate or compare-and-swap on the target's
// memory, holding the target's accumulate lock (in its control block,
// mapped here) as its agent does: on memory mapped here in place, else
// (the device's remote memory access) by reading the target bytes,
// combining and writing them back. Called with the core's lock held.
func (w *Win) nativeAcc(a *rmaArgs, h header, off int64, blocks []blk, size int) (*adi.Request, error) {
	t := a.target
	if blocks == nil {
		blocks = []blk{{0, size}}
	}
	mem := w.direct[t]
	pieces := make([][]byte, 0, len(blocks))
	for _, b := range blocks {
		at := off + int64(b.off)
		if mem != nil {
			pieces = append(pieces, mem[at:at+int64(b.n)])
		} else {
			pieces = append(pieces, make([]byte, b.n))
		}
	}
	data := packIn(a.origin)
	if a.kind == amCAS {
		data = append(append([]byte(nil), data...), a.compare...)
	}
	var old []byte
	var why string
	var err error
	w.atomically(t, func() {
		if mem == nil {
			if err = w.remoteCopy(t, off, blocks, pieces, false); err != nil {
				return
			}
		}
		if old, why = combine(h, pieces, data); why != "" || mem != nil {
			return
		}
		err = w.remoteCopy(t, off, blocks, pieces, true)
	})
	if err != nil {
		return nil, errorf(ErrOther, a.op, "rank %d of window %s: %v", t, w.name, err)
	}
	if why != "" {
		return nil, errorf(ErrOp, a.op, "%s", why)
	}
	if a.result.Type != nil {
		a.result.CopyIn(0, old)
	}
	return completed, nil
}

// remoteCopy writes (or reads) pieces, one per block, to (from) rank t's
// window memory from byte off with the device's remote memory access.
func (w *Win) remoteCopy(t int, off int64, blocks []blk, pieces [][]byte, write bool) error {
	p := w.comm.world[t]
	for i, b := range blocks {
		addr := w.bases[t] + uintptr(off+int64(b.off))
		var err error
		if write {
			err = w.rm.RemoteWrite(p, w.keys[t], addr, pieces[i])
		} else {
			err = w.rm.RemoteRead(p, w.keys[t], addr, pieces[i])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// message sends an operation to the target's agent. Called with the core's
// lock held.
func (w *Win) message(a *rmaArgs, h header, blocks []blk) (*adi.Request, error) {
	r, t := w.rt, a.target
	peer := w.comm.world[t]
	size := int(h.n)
	dataLen := 0
	switch a.kind {
	case amPut, amAcc, amGetAcc:
		dataLen = size
	case amCAS:
		dataLen = 2 * size
	}
	h.nblk = uint32(len(blocks))
	blkLen := 16 * len(blocks)
	if hdrSize+blkLen > rxSize {
		h.flags |= fBlocks
		blkLen = 0
	}
	if dataLen > inlineMax || hdrSize+blkLen+dataLen > rxSize {
		h.flags |= fData
	}
	var parts []*adi.Request
	var reply *adi.Request
	if a.result.Type != nil {
		h.reply = w.origin.tag()
		reply = &adi.Request{Op: adi.OpRecv, Context: w.comm.ctx, Peer: peer, Tag: int(h.reply), Buf: a.result}
		if err := r.dev.Irecv(reply); err != nil {
			return nil, named(a.op, err)
		}
		parts = append(parts, reply)
	}
	msg := make([]byte, hdrSize, hdrSize+blkLen+dataLen)
	h.put(msg)
	if h.flags&fBlocks == 0 && len(blocks) > 0 {
		msg = msg[:hdrSize+blkLen]
		putBlocks(msg[hdrSize:], blocks)
	}
	if h.flags&fData == 0 && dataLen > 0 {
		at := len(msg)
		msg = msg[:at+size]
		a.origin.CopyOut(0, msg[at:])
		msg = append(msg, a.compare...)
	}
	send := func(tag int, b Buffer) error {
		q := &adi.Request{Op: adi.OpSend, Context: w.comm.ctx, Peer: peer, Tag: tag, Buf: b}
		if err := r.dev.Isend(q); err != nil {
			return named(a.op, err)
		}
		parts = append(parts, q)
		return nil
	}
	if err := send(tagReq, adi.Bytes(msg)); err != nil {
		return nil, err
	}
	if h.flags&fBlocks != 0 {
		bl := make([]byte, 16*len(blocks))
		putBlocks(bl, blocks)
		if err := send(tagData, adi.Bytes(bl)); err != nil {
			return nil, err
		}
	}
	if h.flags&fData != 0 {
		b := a.origin
		if a.kind == amCAS {
			b = adi.Bytes(append(packIn(a.origin), a.compare...))
		}
		if err := send(tagData, b); err != nil {
			return nil, err
		}
	}
	if a.kind != amGet && a.kind != amGetAcc && a.kind != amCAS {
		w.origin.dirty[t] = true
	}
	q := composite(parts, reply, size, t)
	w.origin.pend[t] = append(w.origin.pend[t], q)
	return q, nil
}

// composite is one request for the parts of an operation: it completes
// when all have, with the first error, or ErrRMARange when the answer
// (reply) is not the size expected (the target failed the access).
func composite(parts []*adi.Request, reply *adi.Request, size, target int) *adi.Request {
	q := &adi.Request{}
	left := len(parts)
	var first error
	one := func(p *adi.Request) {
		if first == nil {
			first = p.Status.Err
		}
		if p == reply && first == nil && p.Status.Bytes != size {
			first = errorf(ErrRMARange, "", "rank %d refused the access (see the error of the next Flush or Unlock)", target)
		}
		if left--; left == 0 {
			q.Complete(adi.Status{Source: AnySource, Tag: AnyTag, Err: first})
		}
	}
	// A device may complete a request as it is started (an eager send):
	// those count now, the others when they complete. The core's lock is
	// held, so none completes in between.
	for _, p := range parts {
		if p.Done() {
			one(p)
		} else {
			p.OnDone = one
		}
	}
	return q
}

// rmaRequest turns a started operation into a request of the program.
func (w *Win) rmaRequest(op string, q *adi.Request) *Request {
	return &Request{rt: w.rt, comm: w.comm, op: op, peer: AnySource, tag: AnyTag, ar: q}
}

// ---------------------------------------------------------------------------
// The calls.

// PutBuf writes origin into rank target's window (MPI_Put): tcount
// elements of ttype from displacement disp (in the target's displacement
// units). It completes at the next synchronisation of the epoch.
func (w *Win) PutBuf(origin Buffer, target, disp, tcount int, ttype *datatype.Type) error {
	_, err := w.rma(&rmaArgs{op: "MPI_Put", kind: amPut, origin: origin, target: target, disp: disp, tcount: tcount, ttype: ttype})
	return w.raise(err)
}

// Put writes origin into rank target's window from displacement disp, as
// len(origin) elements of T (MPI_Put).
func Put[T Numeric](w *Win, origin []T, target, disp int) error {
	if w.mappedCopy(bytesOf(origin), target, disp, true) {
		return nil
	}
	b := Slice(origin)
	return w.PutBuf(b, target, disp, b.Count, b.Type)
}

// bytesOf is the memory of s.
func bytesOf[T Numeric](s []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// mappedCopy is the fast path of Put and Get of contiguous data to memory
// of another rank mapped here (an allocated or shared window on this
// host): if the epoch allows it and the bytes lie inside the target's
// window, it copies b to (put) or from the target's memory at displacement
// disp and reports true; anything else (another path, an error to report)
// reports false and leaves the call to the general path. The copy is the
// operation's completion, so the epoch has nothing left to flush.
func (w *Win) mappedCopy(b []byte, target, disp int, put bool) bool {
	mem := w.mapped(target, disp, len(b))
	if mem == nil {
		return false
	}
	if put {
		copy(mem, b)
	} else {
		copy(b, mem)
	}
	w.origin.fenceOps = true
	return true
}

// selfServe: one in this many fast-path operations on this rank's own
// memory takes the general path instead (see mapped).
const selfServe = 64

// mapped is the n bytes at displacement disp of rank target's window
// memory if it is mapped here (another rank's, or this rank's own where
// every rank maps it), and the epoch allows the
// access; else nil (the general path takes the call, and reports errors).
func (w *Win) mapped(target, disp, n int) []byte {
	if w == nil || w.freed || uint(target) >= uint(len(w.direct)) || live.Load() == nil {
		return nil
	}
	// This rank's own memory takes the fast path only where every other
	// rank maps it too, so that none needs this rank's agent; and even
	// then one call in selfServe goes the general way, whose device pass
	// and agent keep point-to-point moving for a rank that loops on its
	// own window.
	if target == w.comm.rank && (!w.allMapped || w.selfOps.Add(1)%selfServe == 0) {
		return nil
	}
	mem := w.direct[target]
	if mem == nil || !w.origin.may(target) || disp < 0 || n == 0 {
		return nil
	}
	off := uint64(disp) * uint64(w.units[target])
	if off > uint64(len(mem)) || uint64(n) > uint64(len(mem))-off {
		return nil
	}
	return mem[off : off+uint64(n)]
}

// mappedAccumulate is the fast path of Accumulate (result nil) and
// GetAccumulate with Sum, Prod, Replace or NoOp on memory of another rank
// mapped here: the elements are updated in place under the target's
// accumulate lock, as every other accumulate on them is. It reports false
// where the general path must run.
func mappedAccumulate[T Numeric](w *Win, origin, result []T, target, disp int, o *Op) bool {
	n := len(origin)
	if o == NoOp && n == 0 {
		n = len(result)
	}
	if o != Sum && o != Prod && o != Replace && o != NoOp || result != nil && len(result) != n || o != NoOp && len(origin) != n {
		return false
	}
	var z T
	mem := w.mapped(target, disp, n*int(unsafe.Sizeof(z)))
	if mem == nil || w.ctls[target] == nil || uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%unsafe.Alignof(z) != 0 {
		return false
	}
	p := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(mem))), n)
	w.atomically(target, func() {
		for i, old := range p {
			if result != nil {
				result[i] = old
			}
			switch o {
			case Sum:
				p[i] = old + origin[i]
			case Prod:
				p[i] = old * origin[i]
			case Replace:
				p[i] = origin[i]
			}
		}
	})
	w.origin.fenceOps = true
	return true
}

// mappedCAS is the fast path of CompareAndSwap on memory of another rank
// mapped here: the element is compared bitwise (as the general path does,
// so that NaN matches NaN) and replaced under the target's accumulate lock.
// ok is false where the general path must run.
func mappedCAS[T Numeric](w *Win, value, compare T, target, disp int) (old T, ok bool) {
	mem := w.mapped(target, disp, int(unsafe.Sizeof(old)))
	if mem == nil || w.ctls[target] == nil {
		return old, false
	}
	want := bytesOf([]T{compare})
	w.atomically(target, func() {
		copy(bytesOf(unsafe.Slice(&old, 1)), mem)
		if bytes.Equal(mem, want) {
			copy(mem, bytesOf([]T{value}))
		}
	})
	w.origin.fenceOps = true
	return old, true
}

// GetBuf reads tcount elements of ttype at displacement disp of rank
// target's window into result (MPI_Get). result holds the data after the
// next synchronisation of the epoch.
func (w *Win) GetBuf(result Buffer, target, disp, tcount int, ttype *datatype.Type) error {
	_, err := w.rma(&rmaArgs{op: "MPI_Get", kind: amGet, result: result, target: target, disp: disp, tcount: tcount, ttype: ttype})
	return w.raise(err)
}

// Get reads len(result) elements of T at displacement disp of rank
// target's window (MPI_Get).
func Get[T Numeric](w *Win, result []T, target, disp int) error {
	if w.mappedCopy(bytesOf(result), target, disp, false) {
		return nil
	}
	b := Slice(result)
	return w.GetBuf(b, target, disp, b.Count, b.Type)
}

// AccumulateBuf combines origin into rank target's window with o
// (MPI_Accumulate): target = target o origin, element by element, atomic
// for each element with respect to the other accumulates with the same
// basic type. o is a predefined operation (Replace makes it an atomic put).
func (w *Win) AccumulateBuf(origin Buffer, target, disp, tcount int, ttype *datatype.Type, o *Op) error {
	_, err := w.rma(&rmaArgs{op: "MPI_Accumulate", kind: amAcc, origin: origin, target: target, disp: disp, tcount: tcount, ttype: ttype, mpiOp: o})
	return w.raise(err)
}

// Accumulate combines origin into rank target's window at displacement
// disp with o (MPI_Accumulate).
func Accumulate[T Numeric](w *Win, origin []T, target, disp int, o *Op) error {
	if o != NoOp && mappedAccumulate(w, origin, nil, target, disp, o) {
		return nil
	}
	b := Slice(origin)
	return w.AccumulateBuf(b, target, disp, b.Count, b.Type, o)
}

// GetAccumulateBuf returns the target's data in result and combines origin
// into it with o, atomically (MPI_Get_accumulate). With NoOp, origin may be
// empty (Buffer{}): an atomic get.
func (w *Win) GetAccumulateBuf(origin, result Buffer, target, disp, tcount int, ttype *datatype.Type, o *Op) error {
	_, err := w.getAcc("MPI_Get_accumulate", origin, result, target, disp, tcount, ttype, o)
	return w.raise(err)
}

func (w *Win) getAcc(op string, origin, result Buffer, target, disp, tcount int, ttype *datatype.Type, o *Op) (*adi.Request, error) {
	if o == NoOp && origin.Type == nil && ttype != nil {
		// An atomic get: the origin's values are not used.
		size := tcount * ttype.Size()
		origin = Typed(make([]byte, size), size, datatype.Byte)
		if b := basicOf(ttype); b != nil && b.Size() > 0 {
			origin = Typed(origin.Mem, size/b.Size(), b)
		}
	}
	return w.rma(&rmaArgs{op: op, kind: amGetAcc, origin: origin, result: result, target: target, disp: disp, tcount: tcount, ttype: ttype, mpiOp: o})
}

// GetAccumulate is GetAccumulateBuf on slices of T (MPI_Get_accumulate).
func GetAccumulate[T Numeric](w *Win, origin, result []T, target, disp int, o *Op) error {
	if result != nil && mappedAccumulate(w, origin, result, target, disp, o) {
		return nil
	}
	b, res := Slice(origin), Slice(result)
	if o == NoOp && len(origin) == 0 {
		b = Buffer{}
	}
	return w.GetAccumulateBuf(b, res, target, disp, res.Count, res.Type, o)
}

// FetchAndOp combines value into the element of T at displacement disp of
// rank target's window with o and returns the element's old value
// (MPI_Fetch_and_op). It waits for the answer.
func FetchAndOp[T Numeric](w *Win, value T, target, disp int, o *Op) (T, error) {
	var res [1]T
	if mappedAccumulate(w, []T{value}, res[:], target, disp, o) {
		return res[0], nil
	}
	var old T
	q, err := w.rma(&rmaArgs{op: "MPI_Fetch_and_op", kind: amGetAcc, origin: Slice([]T{value}), result: Slice(unsafe.Slice(&old, 1)), target: target, disp: disp, tcount: 1, ttype: datatype.Of[T](), mpiOp: o})
	if err == nil {
		err = w.finishNow("MPI_Fetch_and_op", q)
	}
	return old, w.raise(err)
}

// CompareAndSwap replaces the element of T at displacement disp of rank
// target's window with value if it equals compare, atomically, and returns
// its old value (MPI_Compare_and_swap). It waits for the answer.
func CompareAndSwap[T Numeric](w *Win, value, compare T, target, disp int) (T, error) {
	if old, ok := mappedCAS(w, value, compare, target, disp); ok {
		return old, nil
	}
	var old T
	cb := Slice([]T{compare})
	q, err := w.rma(&rmaArgs{op: "MPI_Compare_and_swap", kind: amCAS, origin: Slice([]T{value}), compare: cb.Mem, result: Slice(unsafe.Slice(&old, 1)), target: target, disp: disp, tcount: 1, ttype: datatype.Of[T](), mpiOp: nil})
	if err == nil {
		err = w.finishNow("MPI_Compare_and_swap", q)
	}
	return old, w.raise(err)
}

// finishNow waits for an operation's local completion.
func (w *Win) finishNow(op string, q *adi.Request) error {
	if !q.Done() {
		if err := w.rt.waitFor(q.Done); err != nil {
			return named(op, err)
		}
	}
	if err := q.Status.Err; err != nil {
		return restated(op, err, nil, false)
	}
	return nil
}

// RputBuf is PutBuf returning a request that completes when origin may be
// reused (MPI_Rput); the write is complete at the target after the next
// flush or synchronisation.
func (w *Win) RputBuf(origin Buffer, target, disp, tcount int, ttype *datatype.Type) (*Request, error) {
	const op = "MPI_Rput"
	q, err := w.rma(&rmaArgs{op: op, kind: amPut, origin: origin, target: target, disp: disp, tcount: tcount, ttype: ttype})
	if err != nil {
		return nil, w.raise(err)
	}
	return w.rmaRequest(op, q), nil
}

// Rput is Put returning a request (MPI_Rput).
func Rput[T Numeric](w *Win, origin []T, target, disp int) (*Request, error) {
	b := Slice(origin)
	return w.RputBuf(b, target, disp, b.Count, b.Type)
}

// RgetBuf is GetBuf returning a request that completes when result holds
// the data (MPI_Rget).
func (w *Win) RgetBuf(result Buffer, target, disp, tcount int, ttype *datatype.Type) (*Request, error) {
	const op = "MPI_Rget"
	q, err := w.rma(&rmaArgs{op: op, kind: amGet, result: result, target: target, disp: disp, tcount: tcount, ttype: ttype})
	if err != nil {
		return nil, w.raise(err)
	}
	return w.rmaRequest(op, q), nil
}

// Rget is Get returning a request (MPI_Rget).
func Rget[T Numeric](w *Win, result []T, target, disp int) (*Request, error) {
	b := Slice(result)
	return w.RgetBuf(b, target, disp, b.Count, b.Type)
}

// RaccumulateBuf is AccumulateBuf returning a request that completes when
// origin may be reused (MPI_Raccumulate).
func (w *Win) RaccumulateBuf(origin Buffer, target, disp, tcount int, ttype *datatype.Type, o *Op) (*Request, error) {
	const op = "MPI_Raccumulate"
	q, err := w.rma(&rmaArgs{op: op, kind: amAcc, origin: origin, target: target, disp: disp, tcount: tcount, ttype: ttype, mpiOp: o})
	if err != nil {
		return nil, w.raise(err)
	}
	return w.rmaRequest(op, q), nil
}

// Raccumulate is Accumulate returning a request (MPI_Raccumulate).
func Raccumulate[T Numeric](w *Win, origin []T, target, disp int, o *Op) (*Request, error) {
	b := Slice(origin)
	return w.RaccumulateBuf(b, target, disp, b.Count, b.Type, o)
}

// RgetAccumulateBuf is GetAccumulateBuf returning a request that completes
// when result holds the old data (MPI_Rget_accumulate).
func (w *Win) RgetAccumulateBuf(origin, result Buffer, target, disp, tcount int, ttype *datatype.Type, o *Op) (*Request, error) {
	const op = "MPI_Rget_accumulate"
	q, err := w.getAcc(op, origin, result, target, disp, tcount, ttype, o)
	if err != nil {
		return nil, w.raise(err)
	}
	return w.rmaRequest(op, q), nil
}

// RgetAccumulate is GetAccumulate returning a request (MPI_Rget_accumulate).
func RgetAccumulate[T Numeric](w *Win, origin, result []T, target, disp int, o *Op) (*Request, error) {
	b, res := Slice(origin), Slice(result)
	if o == NoOp && len(origin) == 0 {
		b = Buffer{}
	}
	return w.RgetAccumulateBuf(b, res, target, disp, res.Count, res.Type, o)
}
