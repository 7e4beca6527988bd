package netvm

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
)

// This file is the thesis' pure receiver-initiated protocol, MPIN (seed 000,
// §3.2–3.4), used when the option eager=0 is set. No data and no envelope
// moves before the receiver asks:
//
//   - A receive from a specific source writes RTR (context, tag, buffer
//     address, capacity) into the source's ring. A send matches the oldest
//     RTR from its destination with its context and tag, writes the data
//     straight into the receiver's buffer, then writes SC.
//   - A send with no matching RTR waits. RTRs from one receiver are matched in
//     ring order and waiting sends in post order; this is what the thesis'
//     sub lists achieve (only the oldest identical request scans).
//   - A receive from ANY_SOURCE takes an entry of its RFA table (one flag per
//     peer, in shared memory) and, if the entry is new, broadcasts ENA_ANY.
//     A sender records the entry in its SRFA and, when it has a matching
//     send waiting, remote-writes its flag. The receiver picks a flagged
//     sender and writes RTR_ANY to it; the sender answers with data + SC, or
//     UNA_ANY if it has nothing left to send. Entries stay for reuse by
//     later identical receives and are retired by DISABLE_ANY when the table
//     is full.
//   - Past the thesis: ANY_TAG (an RTR or RFA entry with tag -1), any number
//     of communicators (the context id travels in every RTR and ENA_ANY), and
//     cancellation of a posted receive (CANCEL / CANCEL_ACK).
//
// MPI's rule that a message goes to the earliest posted receive that matches
// it is kept by holding back any receive posted behind an unresolved
// ANY_SOURCE receive that could take the same messages, until that receive
// knows its source (the thesis' virtual lists). Probe is not possible in this
// mode: a receiver learns of a message only by receiving it.

const rfaEntries = 32

// mstate is where an MPIN receive stands.
type mstate uint8

const (
	mHeld        mstate = iota // behind an unresolved ANY_SOURCE receive; nothing sent yet
	mRTR                       // RTR (or RTR_ANY) sent, waiting for SC
	mAnyScanning               // ANY_SOURCE: scanning its RFA entry for a flagged sender
)

// mrecv is the device state of a receive in MPIN mode (in adi.Request.Dev).
type mrecv struct {
	req    *adi.Request
	any    bool
	state  mstate
	entry  int    // RFA entry (ANY_SOURCE receives), -1 until one is assigned
	rid    uint32 // id of the outstanding RTR / RTR_ANY
	src    int    // who the RTR / RTR_ANY went to
	cancel bool   // Cancel was called while an RTR was out
}

// rtrMsg is an RTR that arrived before a matching send.
type rtrMsg struct {
	ctx  uint32
	tag  int
	rid  uint32
	addr uint64
	cap  int
}

type srfaEntry struct {
	used bool
	ctx  uint32
	tag  int
	flag bool // my flag is raised in the receiver's RFA entry
}

type rfaEntry struct {
	used    bool
	ctx     uint32
	tag     int
	waiting int    // ANY_SOURCE receives attached to the entry
	lastUse uint64 // for retiring the least recently used entry
}

type mpinState struct {
	rtrs  [][]rtrMsg       // per peer: its RTRs that no send has matched yet
	pend  [][]*adi.Request // per peer: sends waiting for its RTR
	srfa  [][rfaEntries]srfaEntry
	rfa   [rfaEntries]rfaEntry
	rq    []*mrecv // receives that are held or scanning, in post order
	clock uint64
	next  int               // where the next RFA scan starts, for fairness among senders
	ids   map[uint32]*mrecv // outstanding RTR / RTR_ANY by id
}

func (d *Device) mpinInit() {
	d.mp.rtrs = make([][]rtrMsg, d.size)
	d.mp.pend = make([][]*adi.Request, d.size)
	d.mp.srfa = make([][rfaEntries]srfaEntry, d.size)
	d.mp.ids = map[uint32]*mrecv{}
}

// rfaFlag is sender p's flag in RFA entry e of the segment that holds it.
func (d *Device) rfaFlag(mem []byte, e, p int) *uint32 {
	return (*uint32)(unsafe.Pointer(&mem[d.offRFA+(e*d.size+p)*4]))
}

func tagMatches(want, tag int) bool { return want == adi.AnyTag || want == tag }

// mpinSend matches a new send with an RTR from its destination or queues it.
func (d *Device) mpinSend(r *adi.Request) error {
	q := r.Peer
	for i, t := range d.mp.rtrs[q] {
		if t.ctx == r.Context && tagMatches(t.tag, r.Tag) {
			d.mp.rtrs[q] = removeAt(d.mp.rtrs[q], i)
			return d.mpinWrite(d.peers[q], r, t.rid, t.addr, t.cap)
		}
	}
	d.mp.pend[q] = append(d.mp.pend[q], r)
	d.raiseFlags(q, r)
	return nil
}

// mpinWrite writes send r into the receive that RTR rid describes, then SC
// carrying the message's tag and full size (so the receiver sees truncation).
func (d *Device) mpinWrite(p *peer, r *adi.Request, rid uint32, addr uint64, capacity int) error {
	size := r.Buf.Size()
	n := min(size, capacity)
	return d.writeData(p, r, addr, n, ctl{typ: ctlSC, id: rid, tag: int32(r.Tag), addr: uint64(size), n: uint64(n)})
}

// takePending removes and returns the oldest send to q that matches (ctx, tag).
func (d *Device) takePending(q int, ctx uint32, tag int) *adi.Request {
	for i, s := range d.mp.pend[q] {
		if s.Context == ctx && tagMatches(tag, s.Tag) {
			d.mp.pend[q] = removeAt(d.mp.pend[q], i)
			return s
		}
	}
	return nil
}

// raiseFlags remote-writes this process's flag into every RFA entry of
// receiver q for which a send is waiting. With only set, just that (new)
// send is considered: the others were when they arrived, so a long queue of
// waiting sends is not rescanned on every send.
func (d *Device) raiseFlags(q int, only *adi.Request) {
	p := d.peers[q]
	pend := d.mp.pend[q]
	if only != nil {
		pend = []*adi.Request{only}
	}
	for e := range d.mp.srfa[q] {
		s := &d.mp.srfa[q][e]
		if !s.used || s.flag {
			continue
		}
		for _, r := range pend {
			if r.Context == s.ctx && tagMatches(s.tag, r.Tag) {
				s.flag = true
				atomic.StoreUint32(d.rfaFlag(p.seg.Mem, e, d.rank), 1)
				ring(p.doorbell, p.sleepers)
				break
			}
		}
	}
}

// mpinRecv posts a receive.
func (d *Device) mpinRecv(r *adi.Request) {
	m := &mrecv{req: r, any: r.Peer == adi.AnySource, entry: -1}
	r.Dev = m
	d.mp.rq = append(d.mp.rq, m)
	d.mpinAdvance()
}

// conflicts reports whether an unresolved ANY_SOURCE receive b could take a
// message that m could take, so m must wait behind it.
func conflicts(b, m *adi.Request) bool {
	return b.Context == m.Context && (b.Tag == adi.AnyTag || m.Tag == adi.AnyTag || b.Tag == m.Tag)
}

// mpinAdvance moves held and scanning receives forward, in post order.
func (d *Device) mpinAdvance() {
	var blockers []*adi.Request
	keep := d.mp.rq[:0]
	for _, m := range d.mp.rq {
		blocked := false
		for _, b := range blockers {
			if conflicts(b, m.req) {
				blocked = true
				break
			}
		}
		if !m.any {
			if blocked {
				keep = append(keep, m)
			} else {
				d.sendRTR(m)
			}
			continue
		}
		keep = append(keep, m)
		blockers = append(blockers, m.req)
		if !blocked && m.state != mRTR {
			d.scan(m)
		}
	}
	clear(d.mp.rq[len(keep):])
	d.mp.rq = keep
}

// sendRTR asks the source of a specific receive for its data.
func (d *Device) sendRTR(m *mrecv) {
	r := m.req
	p := d.peers[r.Peer]
	m.state, m.src, m.rid = mRTR, r.Peer, d.newID()
	d.mp.ids[m.rid] = m
	d.recvs[m.rid] = &rvRecv{req: r, src: r.Peer}
	d.post(p, outMsg{ctl: ctl{typ: ctlRTR, ctx: r.Context, tag: int32(r.Tag), id: m.rid, addr: d.bufAddr(p, r), n: uint64(r.Buf.Size())}})
}

// bufAddr is where a sender may remote-write into r's buffer, or 0 when the
// data must come in chunks (no permission, non-contiguous, self, empty).
func (d *Device) bufAddr(p *peer, r *adi.Request) uint64 {
	if r.Buf.Size() > 0 && p.remoteOK && r.Buf.Contiguous() && p.seg != d.seg {
		return uint64(uintptr(unsafe.Pointer(&r.Buf.Mem[0])))
	}
	return 0
}

// scan looks for a flagged sender in an ANY_SOURCE receive's RFA entry and
// sends it RTR_ANY.
func (d *Device) scan(m *mrecv) {
	if m.entry < 0 {
		if m.entry = d.rfaEntry(m.req.Context, m.req.Tag); m.entry < 0 {
			return // table full of busy entries; try again on the next pass
		}
		d.mp.rfa[m.entry].waiting++
	}
	m.state = mAnyScanning
	for k := 0; k < d.size; k++ {
		q := (d.mp.next + k) % d.size
		f := d.rfaFlag(d.seg.Mem, m.entry, q)
		if atomic.LoadUint32(f) == 0 {
			continue
		}
		atomic.StoreUint32(f, 0)
		d.mp.next = q + 1
		p := d.peers[q]
		m.state, m.src, m.rid = mRTR, q, d.newID()
		d.mp.ids[m.rid] = m
		d.recvs[m.rid] = &rvRecv{req: m.req, src: q}
		d.post(p, outMsg{ctl: ctl{typ: ctlRTRAny, ctx: m.rid, id: uint32(m.entry), addr: d.bufAddr(p, m.req), n: uint64(m.req.Buf.Size())}})
		return
	}
}

// rfaEntry finds or makes the RFA entry for (ctx, tag); -1 if every entry is busy.
func (d *Device) rfaEntry(ctx uint32, tag int) int {
	d.mp.clock++
	free, lru := -1, -1
	for i := range d.mp.rfa {
		e := &d.mp.rfa[i]
		switch {
		case e.used && e.ctx == ctx && e.tag == tag:
			e.lastUse = d.mp.clock
			return i
		case !e.used && free < 0:
			free = i
		case e.used && e.waiting == 0 && (lru < 0 || e.lastUse < d.mp.rfa[lru].lastUse):
			lru = i
		}
	}
	i := free
	if i < 0 {
		if i = lru; i < 0 {
			return -1
		}
		for _, p := range d.peers {
			d.post(p, outMsg{ctl: ctl{typ: ctlDisableAny, id: uint32(i)}})
		}
	}
	d.mp.rfa[i] = rfaEntry{used: true, ctx: ctx, tag: tag, lastUse: d.mp.clock}
	for q := 0; q < d.size; q++ {
		atomic.StoreUint32(d.rfaFlag(d.seg.Mem, i, q), 0)
	}
	for _, p := range d.peers {
		d.post(p, outMsg{ctl: ctl{typ: ctlEnaAny, ctx: ctx, tag: int32(tag), id: uint32(i)}})
	}
	return i
}

// mpinCancel withdraws a receive: at once if nothing was sent for it, else
// through CANCEL (specific source) or by waiting for UNA_ANY (ANY_SOURCE).
func (d *Device) mpinCancel(r *adi.Request) bool {
	m, ok := r.Dev.(*mrecv)
	if !ok {
		return false
	}
	if m.state != mRTR {
		d.dropReceive(m)
		r.Complete(adi.Status{Cancelled: true, Source: r.Peer, Tag: r.Tag})
		d.mpinAdvance()
		return true
	}
	if !m.cancel {
		m.cancel = true
		if !m.any {
			d.post(d.peers[m.src], outMsg{ctl: ctl{typ: ctlCancel, id: m.rid}})
		}
	}
	return true
}

// dropReceive takes m out of the held/scanning queue and its RFA entry.
func (d *Device) dropReceive(m *mrecv) {
	for i, x := range d.mp.rq {
		if x == m {
			d.mp.rq = append(d.mp.rq[:i], d.mp.rq[i+1:]...)
			break
		}
	}
	if m.any && m.entry >= 0 {
		d.mp.rfa[m.entry].waiting--
		m.entry = -1
	}
}

// mpinHandle handles the MPIN control messages.
func (d *Device) mpinHandle(p *peer, c *ctl) error {
	q := p.rank
	switch c.typ {
	case ctlRTR:
		if s := d.takePending(q, c.ctx, int(c.tag)); s != nil {
			return d.mpinWrite(p, s, c.id, c.addr, int(c.n))
		}
		d.mp.rtrs[q] = append(d.mp.rtrs[q], rtrMsg{ctx: c.ctx, tag: int(c.tag), rid: c.id, addr: c.addr, cap: int(c.n)})
	case ctlSC:
		m := d.mp.ids[c.id]
		if m == nil {
			return fmt.Errorf("netvm: SC from rank %d for unknown receive %d", q, c.id)
		}
		delete(d.mp.ids, c.id)
		delete(d.recvs, c.id)
		size, n := int(c.addr), int(c.n)
		if m.any {
			d.dropReceive(m)
		}
		m.req.Complete(recvStatus(m.req, q, int(c.tag), size, n))
		if m.any {
			d.mpinAdvance()
		}
	case ctlEnaAny:
		d.mp.srfa[q][c.id] = srfaEntry{used: true, ctx: c.ctx, tag: int(c.tag)}
		d.raiseFlags(q, nil)
	case ctlDisableAny:
		d.mp.srfa[q][c.id] = srfaEntry{}
	case ctlRTRAny:
		e := &d.mp.srfa[q][c.id]
		e.flag = false
		var s *adi.Request
		if e.used {
			s = d.takePending(q, e.ctx, e.tag)
		}
		if s == nil {
			d.post(p, outMsg{ctl: ctl{typ: ctlUnaAny, ctx: c.ctx}})
			return nil
		}
		if err := d.mpinWrite(p, s, c.ctx, c.addr, int(c.n)); err != nil {
			return err
		}
		d.raiseFlags(q, nil)
	case ctlUnaAny:
		m := d.mp.ids[c.ctx]
		if m == nil {
			return fmt.Errorf("netvm: UNA_ANY from rank %d for unknown receive %d", q, c.ctx)
		}
		delete(d.mp.ids, c.ctx)
		delete(d.recvs, c.ctx)
		m.state = mAnyScanning
		if m.cancel {
			d.dropReceive(m)
			m.req.Complete(adi.Status{Cancelled: true, Source: adi.AnySource, Tag: m.req.Tag})
		}
		d.mpinAdvance()
	case ctlCancel:
		ok := uint64(0)
		for i, t := range d.mp.rtrs[q] {
			if t.rid == c.id {
				d.mp.rtrs[q] = removeAt(d.mp.rtrs[q], i)
				ok = 1
				break
			}
		}
		d.post(p, outMsg{ctl: ctl{typ: ctlCancelAck, id: c.id, n: ok}})
	case ctlCancelAck:
		m := d.mp.ids[c.id]
		if m == nil || c.n == 0 {
			return nil // the SC came first: the receive completed normally
		}
		delete(d.mp.ids, c.id)
		delete(d.recvs, c.id)
		m.req.Complete(adi.Status{Cancelled: true, Source: m.req.Peer, Tag: m.req.Tag})
	default:
		return fmt.Errorf("netvm: control message of type %d from rank %d in MPIN mode", c.typ, q)
	}
	return nil
}

// mpinPeerGone fails the MPIN state that waits on a dead peer.
func (d *Device) mpinPeerGone(q int, fail func(*adi.Request)) {
	for _, r := range d.mp.pend[q] {
		fail(r)
	}
	d.mp.pend[q], d.mp.rtrs[q] = nil, nil
	for id, m := range d.mp.ids {
		if m.src == q {
			delete(d.mp.ids, id)
			delete(d.recvs, id)
			if m.any {
				d.dropReceive(m)
			}
			fail(m.req)
		}
	}
	for _, m := range append([]*mrecv(nil), d.mp.rq...) {
		if m.req.Peer == q {
			d.dropReceive(m)
			fail(m.req)
		}
	}
}

// removeAt removes element i, keeping order. Matching takes the oldest
// entry almost always, so the front is removed by re-slicing, not copying.
func removeAt[T any](s []T, i int) []T {
	if i == 0 {
		var zero T
		s[0] = zero
		return s[1:]
	}
	return append(s[:i], s[i+1:]...)
}
