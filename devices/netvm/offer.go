package netvm

import (
	"time"
	"unsafe"
)

// Non-contiguous rendezvous messages travel as a pipelined stream of chunks
// through the eager ring (the sender packs a chunk, the receiver unpacks
// it): two copies, but both in cache and on both cores at once, which on an
// idle machine beats process_vm_writev/readv with one iovec per block (the
// kernel pins the pages of every remote iovec separately). Its weak point is
// a loaded machine: every chunk hand-off needs both processes on a CPU.
//
// So the sender also offers its buffer's layout (ctlOffer, one regular run in
// the control slot itself, put ahead of its backlog). The receiver keeps the
// offered streams in order; while the oldest one makes no progress for
// Device.stall (the sender is not running), the receiver reads the next
// takeChunk bytes of the message itself with process_vm_readv (vmCopy,
// taking the sender's small gaps along), and again, until the sender's
// chunks come again or the message is complete. Chunks carry no offset: the
// receiver counts the bytes they cover (rvRecv.sent) and skips those it has
// read itself. Once the message is complete the receiver tells the sender
// (ctlPulled), which drops what is left of its stream and sends its SC at
// once. A sender whose stream was offered completes its send only on
// ctlPulled, so its buffer never changes while the receiver may read it.

// After a takeover the sender counts as stalled (Device.stalled) and the
// next offered stream that has not started is taken over at once, until a
// chunk of a live stream shows that the sender runs again.

// defaultStall is how long the oldest offered stream may make no progress
// before the receiver takes over its copy (option stall=N µs): several
// chunk times on an idle machine, far below a scheduler's time slice.
const defaultStall = 50

// takeChunk is how much of a stalled stream the receiver reads at a time
// before it looks at its rings again.
const takeChunk = 128 << 10

// offerStream starts the stream of a send whose receive buffer is not
// contiguous (CTS without address), offering the receiver its layout. It
// reports false when the send does not qualify (small, no remote copies,
// self, or a layout that is not one regular run).
func (d *Device) offerStream(p *peer, s *outSend, c *ctl) bool {
	n := int(c.n)
	if d.offerMin == 0 || n < d.offerMin || n >= 1<<31 || !p.remoteOK || p.seg == d.seg {
		return false
	}
	runs := regularRuns(s.req.Buf)
	if len(runs) != 1 || runsBytes(runs) < uint64(n) {
		return false
	}
	r := runs[0]
	if r.n >= 1<<32 || r.count >= 1<<32 || int64(int32(r.stride)) != r.stride {
		return false
	}
	base := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(s.req.Buf.Mem))))
	sid := d.newID()
	s.n, s.rid, s.offer = n, c.ctx, true
	d.pulls[sid] = s
	m := outMsg{ctl: ctl{typ: ctlOffer, id: c.ctx, ctx: sid, tag: int32(r.stride), addr: base + r.addr, n: r.n | r.count<<32}}
	if !d.put(p, &m) { // ahead of the backlog when there is a free slot
		d.post(p, m)
	}
	d.post(p, outMsg{ctl: ctl{id: c.ctx}, data: s.req.Buf, runs: runs, stream: true, total: n, fin: ctl{typ: ctlSC, id: c.ctx}, req: s.req})
	return true
}

// offered records a ctlOffer: the receive's stream may be taken over.
func (d *Device) offered(p *peer, c *ctl) {
	rv := d.recvs[c.id]
	if rv == nil {
		return
	}
	rv.sid = c.ctx
	rv.remote = vrun{addr: c.addr, n: c.n & (1<<32 - 1), stride: int64(c.tag), count: c.n >> 32}
	rv.last = time.Now()
	d.offerQ = append(d.offerQ, c.id)
}

// stopStream ends an offered send's stream early: its remaining chunks are
// dropped and its SC goes next.
func (d *Device) stopStream(p *peer, s *outSend) {
	for _, m := range p.backlog {
		if m.stream && m.req == s.req && m.id == s.rid {
			m.total = 0
			return
		}
	}
}

// takeOver reads the rest of the oldest offered stream when it has stalled.
// It reports whether it did anything.
func (d *Device) takeOver() bool {
	for len(d.offerQ) > 0 {
		rid := d.offerQ[0]
		rv := d.recvs[rid]
		if rv == nil || rv.remote.count == 0 || rv.got >= rv.n {
			d.popOffer()
			continue
		}
		now := time.Now()
		if !(d.stalled && rv.got == 0) && now.Sub(rv.last) < d.stall {
			d.stallAt.Store(rv.last.Add(d.stall).UnixNano())
			return false
		}
		p := d.peers[rv.src]
		k := min(rv.n-rv.got, takeChunk)
		local, lpos := rv.layout(), uint64(rv.got)
		if local == nil {
			d.lruns = localRuns(rv.req.Buf, rv.got, k, d.lruns[:0])
			local, lpos = d.lruns, 0
		}
		if d.bounce == nil && bounces(rv.remote) {
			d.bounce = make([]byte, bounceBytes)
		}
		if err := readRemote(p.pid, rv.req.Buf.Mem, local, lpos, rv.remote, uint64(rv.got), uint64(k), d.bounce, d.sink); err != nil {
			// cannot read: wait for the stream; its chunks fill what is missing
			rv.remote = vrun{}
			d.popOffer()
			continue
		}
		if rv.got == rv.sent {
			d.cnt.takeovers++
		}
		d.cnt.remoteReads++
		d.stalled = true
		rv.got += k
		d.offerDone(p, rv, rid)
		return true
	}
	d.stallAt.Store(0)
	return false
}

// chunkIn takes a chunk (payload a then b) of an offered stream: the bytes
// [rv.sent, rv.sent+len) of the message, some of which this process may
// have read itself already.
func (d *Device) chunkIn(rv *rvRecv, a, b []byte) {
	lo := rv.sent
	rv.sent += len(a) + len(b)
	rv.last = time.Now()
	d.stalled = false
	if skip := rv.got - lo; skip > 0 {
		if skip >= len(a) {
			b, a = b[min(skip-len(a), len(b)):], nil
		} else {
			a = a[skip:]
		}
	}
	at := max(rv.got, lo)
	rv.copyIn(at, a)
	rv.copyIn(at+len(a), b)
	rv.got = max(rv.got, rv.sent)
}

// offerDone completes an offered receive whose last bytes this process
// has read itself, and tells the sender; the stream's SC may still come.
func (d *Device) offerDone(p *peer, rv *rvRecv, rid uint32) {
	if rv.got < rv.n {
		return
	}
	delete(d.recvs, rid)
	d.taken[rid] = true
	d.post(p, outMsg{ctl: ctl{typ: ctlPulled, id: rv.sid, n: 1}})
	rv.req.Complete(recvStatus(rv.req, rv.src, rv.tag, rv.size, rv.n))
}

// popOffer drops the oldest offered stream; the next one's stall clock starts now.
func (d *Device) popOffer() {
	d.offerQ = d.offerQ[1:]
	if len(d.offerQ) == 0 {
		d.offerQ = nil
		return
	}
	if rv := d.recvs[d.offerQ[0]]; rv != nil {
		rv.last = time.Now()
	}
}

// sleepFor caps a Sleep so that a stalled stream is taken over in time.
func (d *Device) sleepFor(timeout time.Duration) time.Duration {
	if at := d.stallAt.Load(); at != 0 {
		if until := time.Until(time.Unix(0, at)); until < timeout {
			return max(until, time.Microsecond)
		}
	}
	return timeout
}
