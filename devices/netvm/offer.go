package netvm

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/adi/devkit/recv"
)

// Non-contiguous rendezvous messages travel as a pipelined stream of chunks
// through the eager ring (the sender packs a chunk, the receiver unpacks
// it): two copies, but both in cache and on both cores at once, which on an
// idle machine beats process_vm_writev/readv with one iovec per block (the
// kernel pins the pages of every remote iovec separately). Its weak points
// are a loaded machine, where every chunk hand-off needs both processes on a
// CPU, and a machine whose stores into a ring line that the other core holds
// wait long for that copy to be invalidated, where the stream falls far
// behind the contiguous path's single copy (docs/performance-netvm.md).
//
// So the sender also offers its buffer's layout (ctlOffer, one regular run in
// the control slot itself, put ahead of its backlog). The receiver keeps the
// offered streams in order; whenever the oldest one makes no progress for
// Device.stall (the sender is not running, or packs slower than the
// receiver unpacks), the receiver reads the next takeChunk bytes from the
// END of the message itself with process_vm_readv (readRemote), and again,
// until chunks come again or the two meet. The sender streams from the
// front and, before each chunk, claims its bytes in a word of the
// receiver's segment (offClaim) after reading the receiver's limit
// (offLimit, where the tail read here begins): it packs only up to the
// limit, and stops there. The receiver lowers its limit before it reads
// and reads nothing the sender has claimed, so that each byte moves once
// (a claim stored while the limit moves is packed whole, and the receiver
// may read some of its bytes too: the same bytes from the same unchanged
// buffer, a waste but no error). Chunks carry no offset: the receiver
// counts the bytes they cover (rvRecv.got) and drops those at or past
// rvRecv.back. Once the message is complete the
// receiver tells the sender (ctlPulled), which drops what is left of its
// stream and sends its SC at once. A sender whose stream was offered
// completes its send only on ctlPulled, so its buffer never changes while
// the receiver may read it.
//
// After a takeover the sender counts as stalled (Device.stalled) and the
// next offered stream that has not started is taken over at once, until a
// chunk of a live stream shows that the sender runs again.

// defaultStall is how long the oldest offered stream may make no progress
// before the receiver starts reading its tail (option stall=N µs): longer
// than a chunk takes to unpack, so that on an idle machine (the sender packs
// faster than the receiver unpacks) the receiver never leaves the chunks
// waiting, and short enough that the receiver's idle time between chunks is
// used when the sender packs slowly (docs/performance-netvm.md).
const defaultStall = 10

// takeChunk is how much of a stalled stream the receiver reads at a time
// before it looks at its rings again.
const takeChunk = 64 << 10

// claimWait is how long after the stream's last progress the receiver
// leaves the bytes the sender has claimed to its chunks (several chunk
// times when the sender packs slowly); after that the sender has likely
// lost its CPU mid-chunk, and the receiver reads them too.
const claimWait = 200 * time.Microsecond

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
	d.post(p, outMsg{ctl: ctl{id: c.ctx}, data: s.req.Buf, runs: runs, stream: true, offer: true, total: n, fin: ctl{typ: ctlSC, id: c.ctx}, req: s.req})
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
	rv.back = rv.n
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

// claim reserves the bytes [m.off, m.off+k) of the offered stream m for the
// sender's next chunk; it returns k cut to the receiver's limit (0: the
// receiver reads the rest itself). A stored claim is never cut (the
// receiver may have seen it and read only past it), not even when the chunk
// must wait for ring space.
func (d *Device) claim(p *peer, m *outMsg, k int) int {
	if m.claimed > m.off {
		return m.claimed - m.off
	}
	rid := m.id
	if l := atomic.LoadUint64(p.limitOut); uint32(l>>32) == rid && int(uint32(l)) < m.off+k {
		k = max(int(uint32(l))-m.off, 0)
	}
	if k > 0 {
		m.claimed = m.off + k
		atomic.StoreUint64(p.claimOut, uint64(rid)<<32|uint64(m.claimed))
	}
	return k
}

// takeOver reads the next part of the tail of the oldest offered stream
// when it has stalled. It reports whether it did anything.
func (d *Device) takeOver() bool {
	for len(d.offerQ) > 0 {
		rid := d.offerQ[0]
		rv := d.recvs[rid]
		if rv == nil || rv.remote.count == 0 || rv.got >= rv.back {
			d.popOffer()
			continue
		}
		now := time.Now()
		if !(d.stalled && rv.got == 0) && now.Sub(rv.last) < d.stall {
			d.stallAt.Store(rv.last.Add(d.stall).UnixNano())
			return false
		}
		p := d.peers[rv.src]
		from := max(rv.back-takeChunk, rv.got)
		atomic.StoreUint64(p.limitIn, uint64(rid)<<32|uint64(from))
		// The bytes the sender has claimed are left to its chunks, unless
		// it has not moved for a long while (it lost its CPU mid-chunk).
		if c := atomic.LoadUint64(p.claimIn); uint32(c>>32) == rid && now.Sub(rv.last) < claimWait {
			from = max(from, int(uint32(c)))
		}
		if from >= rv.back { // wait for the claimed chunks
			d.stallAt.Store(rv.last.Add(claimWait).UnixNano())
			return false
		}
		k := rv.back - from
		local, lpos := rv.layout(), uint64(from)
		if local == nil {
			d.lruns = localRuns(rv.req.Buf, from, k, d.lruns[:0])
			local, lpos = d.lruns, 0
		}
		if d.bounce == nil && bounces(rv.remote, uint64(len(d.sink))) {
			d.bounce = make([]byte, bounceBytes)
		}
		if err := readRemote(p.pid, rv.req.Buf.Mem, local, lpos, rv.remote, uint64(from), uint64(k), d.bounce, d.sink); err != nil {
			// cannot read: the stream brings every byte
			atomic.StoreUint64(p.limitIn, 0)
			rv.remote = vrun{}
			d.popOffer()
			continue
		}
		if rv.back == rv.n {
			d.cnt.takeovers++
		}
		d.cnt.remoteReads++
		d.stalled = true
		rv.back = from
		d.offerDone(p, rv, rid)
		return true
	}
	d.stallAt.Store(0)
	return false
}

// chunkIn takes a chunk (payload a then b) of an offered stream: the bytes
// [rv.got, rv.got+len) of the message, the last of which this process may
// have read itself already.
func (d *Device) chunkIn(rv *rvRecv, a, b []byte) {
	lo := rv.got
	rv.got += len(a) + len(b)
	rv.last = time.Now()
	d.stalled = false
	if keep := rv.back - lo; keep < len(a)+len(b) {
		keep = max(keep, 0)
		if keep <= len(a) {
			a, b = a[:keep], nil
		} else {
			b = b[:keep-len(a)]
		}
	}
	rv.copyIn(lo, a)
	rv.copyIn(lo+len(a), b)
}

// offerDone completes an offered receive once the sender's chunks and the
// tail read here meet, and tells the sender; the stream's SC may still come.
func (d *Device) offerDone(p *peer, rv *rvRecv, rid uint32) {
	if rv.got < rv.back {
		return
	}
	delete(d.recvs, rid)
	d.taken[rid] = true
	d.post(p, outMsg{ctl: ctl{typ: ctlPulled, id: rv.sid, n: 1}})
	rv.req.Complete(recv.Status(rv.req, rv.src, rv.tag, rv.size, rv.n))
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
