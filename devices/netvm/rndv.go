package netvm

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/recv"
	"github.com/adimpi/adimpi/datatype"
)

// This file is the rendezvous: a matched RTS is answered by CTS, which picks
// the path the data takes (cts* below), and the receive completes on SC.
// The paths: one remote write into a contiguous receive buffer (writeData);
// a stream of chunks (stream.go), offered for takeover (offer.go); a copy
// split between both processes, or read entirely by the receiver (split.go);
// per-block remote writes into a non-contiguous buffer (scatter.go).

// CTS variants, in the tag field.
const (
	ctsAddress = 0 // write the data at addr (0: in chunks through the eager ring)
	ctsLayout  = 1 // the receive buffer's pieces follow in ctlIov batches
	ctsDiscard = 2 // the receiver refused the message; complete the send
	ctsPull    = 3 // send your buffer's layout in a ctlPullIov: the receiver reads the whole message
)

// outSend is a rendezvous send waiting for its receiver.
type outSend struct {
	req    *adi.Request
	peer   *peer
	off    int    // scatter: packed bytes written so far
	n      int    // scatter: packed bytes to write; split: the message's bytes
	pull   int    // split: the tail bytes the receiver reads
	rid    uint32 // split: the receive's id
	all    bool   // the receiver reads the whole message (ctsPull)
	offer  bool   // the stream was offered: complete on ctlPulled (offer.go)
	remote []vrun // split: the receive buffer's layout
}

// rvRecv is the device state of a receive matched to a rendezvous message.
type rvRecv struct {
	req  *adi.Request
	src  int
	tag  int
	size int  // the message's size
	n    int  // bytes that will arrive (min(size, capacity))
	got  int  // stream mode: bytes arrived so far
	tail bool // split copy: this process failed to read the tail; the sender writes it and sends a second SC
	pull bool // CTS asked the sender for its layout (ctsPull): this process reads the whole message
	// offered stream (offer.go)
	sid    uint32    // the sender's id for ctlPulled, 0: no offer
	remote vrun      // the sender's layout
	last   time.Time // the stream's last progress
	back   int       // bytes [back, n) were read here from the sender's buffer; the chunks cover [0, got)
	lr     []vrun    // stream: the receive buffer's layout when regular (regularRuns)
	lrSet  bool      // lr was computed
}

// sendCTS answers a matched RTS with the path its data takes: the receive
// buffer's address (or 0 to ask for the data in chunks through the eager
// ring), its layout, or a request for the sender's layout.
func (d *Device) sendCTS(r *adi.Request, src, tag, size int, sid uint32) {
	p := d.peers[src]
	n := min(size, r.Buf.Size())
	id := d.newID()
	d.recvs[id] = &rvRecv{req: r, src: src, tag: tag, size: size, n: n}
	if n > 0 && d.pullMin > 0 && n >= d.pullMin && n < 1<<31 && p.remoteOK && p.seg != d.seg && !r.Buf.Contiguous() {
		// A large non-contiguous receive: the sender describes its buffer
		// and this process reads the whole message in place with
		// process_vm_readv, its own pieces as local iovecs and the
		// sender's regular runs as few remote ones (see vmCopy). One copy,
		// one round trip per message, and no chunk hand-offs that need
		// both processes on a CPU at once.
		d.recvs[id].pull = true
		d.post(p, outMsg{ctl: ctl{typ: ctlCTS, ctx: id, id: sid, tag: ctsPull, n: uint64(n)}})
		return
	}
	if n > 0 && d.scatterMin > 0 && p.remoteOK && p.seg != d.seg && !r.Buf.Contiguous() {
		// A non-contiguous receive buffer of blocks of at least d.scatterMin
		// bytes: describe its pieces so that the sender writes each block
		// straight into place (one copy, no bounce through the eager ring).
		// Off by default: the kernel pins pages per piece, and pipelined
		// chunk copies on both cores measured faster for every block size.
		if seg, err := datatype.NewSegment(r.Buf.Type, r.Buf.Count); err == nil && bigBlocks(seg, r.Buf.Mem, d.scatterMin) {
			d.post(p, outMsg{ctl: ctl{typ: ctlCTS, ctx: id, id: sid, tag: ctsLayout, n: uint64(n)}})
			d.post(p, outMsg{ctl: ctl{ctx: id, id: sid}, data: r.Buf, layout: seg, total: n})
			return
		}
	}
	addr := d.bufAddr(p, r)
	if d.streamMin > 0 && n >= d.streamMin {
		addr = 0 // a stream of chunks through the eager ring (offered for takeover)
	}
	d.post(p, outMsg{ctl: ctl{typ: ctlCTS, ctx: id, id: sid, addr: addr, n: uint64(n)}})
}

// bufAddr is where a sender may remote-write into r's buffer, or 0 when the
// data must come in chunks (no permission, non-contiguous, self, empty).
func (d *Device) bufAddr(p *peer, r *adi.Request) uint64 {
	if r.Buf.Size() > 0 && p.remoteOK && r.Buf.Contiguous() && p.seg != d.seg {
		return uint64(uintptr(unsafe.Pointer(&r.Buf.Mem[0])))
	}
	return 0
}

// ctsIn starts the data of a send on the path its CTS picked.
func (d *Device) ctsIn(p *peer, c *ctl) error {
	s := d.sends[c.id]
	if s == nil {
		return fmt.Errorf("netvm: CTS from rank %d for unknown send %d", p.rank, c.id)
	}
	delete(d.sends, c.id)
	switch c.tag {
	case ctsDiscard: // the receiver refused the message (signature mismatch)
		s.req.Complete(adi.Status{})
		return nil
	case ctsPull: // the receiver reads the whole message
		s.n = int(c.n)
		return d.offerAll(p, s, c.ctx)
	case ctsLayout: // the receive buffer's layout follows in ctlIov batches
		s.n = int(c.n)
		d.scatters[c.id] = s
		return nil
	}
	if d.splitCopy(p, s, c) || (c.addr == 0 && d.offerStream(p, s, c)) {
		return nil
	}
	return d.writeData(p, s.req, c.addr, int(c.n), ctl{typ: ctlSC, id: c.ctx})
}

// scIn completes a rendezvous receive on its SC.
func (d *Device) scIn(p *peer, c *ctl) error {
	rv := d.recvs[c.id]
	if rv == nil && d.taken[c.id] { // the end of a taken-over stream
		delete(d.taken, c.id)
		return nil
	}
	if rv == nil {
		return fmt.Errorf("netvm: SC from rank %d for unknown receive %d", p.rank, c.id)
	}
	if rv.tail { // the sender's first part; the tail it writes for us follows
		rv.tail = false
		return nil
	}
	delete(d.recvs, c.id)
	if rv.sid != 0 { // an offered stream: the sender completes when told
		d.post(p, outMsg{ctl: ctl{typ: ctlPulled, id: rv.sid, n: 1}})
	}
	rv.req.Complete(recv.Status(rv.req, rv.src, rv.tag, rv.size, rv.n))
	return nil
}

// writeData moves a send's first n bytes to the receiver: one remote write
// into its buffer at addr and then sc, or (addr 0) a stream of chunks ending
// in sc. The send completes once sc is in the ring.
func (d *Device) writeData(p *peer, r *adi.Request, addr uint64, n int, sc ctl) error {
	rid := sc.id
	switch {
	case n == 0:
	case p.seg == d.seg: // send to self: copy straight into the receive buffer
		rv := d.recvs[rid]
		if rv == nil {
			return fmt.Errorf("netvm: RTR to self for unknown receive %d", rid)
		}
		off := 0
		_ = r.Buf.Pieces(0, n, func(b []byte) error {
			rv.req.Buf.CopyIn(off, b)
			off += len(b)
			return nil
		})
	case addr != 0:
		var pieces [][]byte
		_ = r.Buf.Pieces(0, n, func(b []byte) error { pieces = append(pieces, b); return nil })
		if err := p.link.remoteWrite(uintptr(addr), pieces); err != nil {
			r.Complete(adi.Status{Err: adi.Errorf(adi.ErrOther, "send", "remote write to rank %d: %v", p.rank, err)})
			return nil
		}
		d.cnt.remoteWrites++
	default:
		d.post(p, outMsg{ctl: ctl{id: rid}, data: r.Buf, runs: regularRuns(r.Buf), stream: true, total: n, fin: sc, req: r, finish: true, done: n})
		return nil
	}
	d.cnt.bytesOut += int64(n)
	d.post(p, outMsg{ctl: sc, req: r, finish: true, done: n})
	return nil
}
