package netvm

import (
	"fmt"
	"sync/atomic"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/recv"
	field "github.com/adimpi/adimpi/adi/devkit/wire"
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

// mpin is the MPIN protocol (eager=0). It shares the device's rings and
// its rendezvous data paths (writeData, streams) with the default protocol.
type mpin struct {
	d     *Device
	rtrs  [][]rtrMsg       // per peer: its RTRs that no send has matched yet
	pend  [][]*adi.Request // per peer: sends waiting for its RTR
	srfa  [][rfaEntries]srfaEntry
	rfa   [rfaEntries]rfaEntry
	rq    []*mrecv // receives that are held or scanning, in post order
	clock uint64
	next  int               // where the next RFA scan starts, for fairness among senders
	ids   map[uint32]*mrecv // outstanding RTR / RTR_ANY by id
}

func newMpin(d *Device) *mpin {
	return &mpin{
		d:    d,
		rtrs: make([][]rtrMsg, d.size),
		pend: make([][]*adi.Request, d.size),
		srfa: make([][rfaEntries]srfaEntry, d.size),
		ids:  map[uint32]*mrecv{},
	}
}

// rfaFlag is sender p's flag in RFA entry e of the segment that holds it.
func (mp *mpin) rfaFlag(mem []byte, e, p int) *uint32 {
	d := mp.d
	return field.U32(d.offRFA + (e*d.size+p)*4).Ptr(mem)
}

func tagMatches(want, tag int) bool { return want == adi.AnyTag || want == tag }

// send matches a new send with an RTR from its destination or queues it.
func (mp *mpin) send(p *peer, r *adi.Request) error {
	mp.d.cnt.rndvMsgs++
	q := p.rank
	for i, t := range mp.rtrs[q] {
		if t.ctx == r.Context && tagMatches(t.tag, r.Tag) {
			mp.rtrs[q] = removeAt(mp.rtrs[q], i)
			return mp.write(p, r, t.rid, t.addr, t.cap)
		}
	}
	mp.pend[q] = append(mp.pend[q], r)
	mp.raiseFlags(q, r)
	return nil
}

// sendShort refuses: every send waits for its receiver's RTR.
func (mp *mpin) sendShort(uint32, *peer, int, uint32, []byte) bool { return false }

// probe is not possible: a receiver learns of a message only by receiving it.
func (mp *mpin) probe(uint32, int, int) (adi.Status, bool, error) {
	return adi.Status{}, false, adi.Errorf(adi.ErrNotSupported, "probe", "netvm with eager=0 runs the thesis' receiver-initiated protocol, where a receiver learns of a message only by receiving it")
}

// poll lets ANY_SOURCE receives look at their RFA flags.
func (mp *mpin) poll() {
	if len(mp.rq) > 0 {
		mp.advance()
	}
}

func (mp *mpin) counters(c map[string]int64) {
	c["mpin_waiting_sends"] = int64(lenAll(mp.pend))
	c["mpin_unmatched_rtrs"] = int64(lenAll(mp.rtrs))
	c["mpin_held_receives"] = int64(len(mp.rq))
	c["mpin_open_rtrs"] = int64(len(mp.ids))
}

func lenAll[T any](qs [][]T) int {
	n := 0
	for _, q := range qs {
		n += len(q)
	}
	return n
}

// write writes send r into the receive that RTR rid describes, then SC
// carrying the message's tag and full size (so the receiver sees truncation).
func (mp *mpin) write(p *peer, r *adi.Request, rid uint32, addr uint64, capacity int) error {
	d := mp.d
	size := r.Buf.Size()
	n := min(size, capacity)
	return d.writeData(p, r, addr, n, ctl{typ: ctlSC, id: rid, tag: int32(r.Tag), addr: uint64(size), n: uint64(n)})
}

// takePending removes and returns the oldest send to q that matches (ctx, tag).
func (mp *mpin) takePending(q int, ctx uint32, tag int) *adi.Request {
	for i, s := range mp.pend[q] {
		if s.Context == ctx && tagMatches(tag, s.Tag) {
			mp.pend[q] = removeAt(mp.pend[q], i)
			return s
		}
	}
	return nil
}

// raiseFlags remote-writes this process's flag into every RFA entry of
// receiver q for which a send is waiting. With only set, just that (new)
// send is considered: the others were when they arrived, so a long queue of
// waiting sends is not rescanned on every send.
func (mp *mpin) raiseFlags(q int, only *adi.Request) {
	d := mp.d
	p := d.peers[q]
	pend := mp.pend[q]
	if only != nil {
		pend = []*adi.Request{only}
	}
	for e := range mp.srfa[q] {
		s := &mp.srfa[q][e]
		if !s.used || s.flag {
			continue
		}
		for _, r := range pend {
			if r.Context == s.ctx && tagMatches(s.tag, r.Tag) {
				s.flag = true
				if p.net != nil { // on another host: the receiver raises it (ctlFlag)
					d.post(p, outMsg{ctl: ctl{typ: ctlFlag, id: uint32(e)}})
				} else {
					atomic.StoreUint32(mp.rfaFlag(p.seg.Mem, e, d.rank), 1)
					p.link.wake()
				}
				break
			}
		}
	}
}

// recv posts a receive.
func (mp *mpin) recv(r *adi.Request) {
	m := &mrecv{req: r, any: r.Peer == adi.AnySource, entry: -1}
	r.Dev = m
	mp.rq = append(mp.rq, m)
	mp.advance()
}

// conflicts reports whether an unresolved ANY_SOURCE receive b could take a
// message that m could take, so m must wait behind it.
func conflicts(b, m *adi.Request) bool {
	return b.Context == m.Context && (b.Tag == adi.AnyTag || m.Tag == adi.AnyTag || b.Tag == m.Tag)
}

// advance moves held and scanning receives forward, in post order.
func (mp *mpin) advance() {
	var blockers []*adi.Request
	keep := mp.rq[:0]
	for _, m := range mp.rq {
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
				mp.sendRTR(m)
			}
			continue
		}
		keep = append(keep, m)
		blockers = append(blockers, m.req)
		if !blocked && m.state != mRTR {
			mp.scan(m)
		}
	}
	clear(mp.rq[len(keep):])
	mp.rq = keep
}

// sendRTR asks the source of a specific receive for its data.
func (mp *mpin) sendRTR(m *mrecv) {
	d := mp.d
	r := m.req
	p := d.peers[r.Peer]
	m.state, m.src, m.rid = mRTR, r.Peer, d.newID()
	mp.ids[m.rid] = m
	d.recvs[m.rid] = &rvRecv{req: r, src: r.Peer}
	d.post(p, outMsg{ctl: ctl{typ: ctlRTR, ctx: r.Context, tag: int32(r.Tag), id: m.rid, addr: d.bufAddr(p, r), n: uint64(r.Buf.Size())}})
}

// scan looks for a flagged sender in an ANY_SOURCE receive's RFA entry and
// sends it RTR_ANY.
func (mp *mpin) scan(m *mrecv) {
	d := mp.d
	if m.entry < 0 {
		if m.entry = mp.rfaEntry(m.req.Context, m.req.Tag); m.entry < 0 {
			return // table full of busy entries; try again on the next pass
		}
		mp.rfa[m.entry].waiting++
	}
	m.state = mAnyScanning
	for k := 0; k < d.size; k++ {
		q := (mp.next + k) % d.size
		f := mp.rfaFlag(d.seg.Mem, m.entry, q)
		if atomic.LoadUint32(f) == 0 {
			continue
		}
		atomic.StoreUint32(f, 0)
		mp.next = q + 1
		p := d.peers[q]
		m.state, m.src, m.rid = mRTR, q, d.newID()
		mp.ids[m.rid] = m
		d.recvs[m.rid] = &rvRecv{req: m.req, src: q}
		d.post(p, outMsg{ctl: ctl{typ: ctlRTRAny, ctx: m.rid, id: uint32(m.entry), addr: d.bufAddr(p, m.req), n: uint64(m.req.Buf.Size())}})
		return
	}
}

// rfaEntry finds or makes the RFA entry for (ctx, tag); -1 if every entry is busy.
func (mp *mpin) rfaEntry(ctx uint32, tag int) int {
	d := mp.d
	mp.clock++
	free, lru := -1, -1
	for i := range mp.rfa {
		e := &mp.rfa[i]
		switch {
		case e.used && e.ctx == ctx && e.tag == tag:
			e.lastUse = mp.clock
			return i
		case !e.used && free < 0:
			free = i
		case e.used && e.waiting == 0 && (lru < 0 || e.lastUse < mp.rfa[lru].lastUse):
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
	mp.rfa[i] = rfaEntry{used: true, ctx: ctx, tag: tag, lastUse: mp.clock}
	for q := 0; q < d.size; q++ {
		atomic.StoreUint32(mp.rfaFlag(d.seg.Mem, i, q), 0)
	}
	for _, p := range d.peers {
		d.post(p, outMsg{ctl: ctl{typ: ctlEnaAny, ctx: ctx, tag: int32(tag), id: uint32(i)}})
	}
	return i
}

// cancelRecv withdraws a receive: at once if nothing was sent for it, else
// through CANCEL (specific source) or by waiting for UNA_ANY (ANY_SOURCE).
func (mp *mpin) cancelRecv(r *adi.Request) bool {
	d := mp.d
	m, ok := r.Dev.(*mrecv)
	if !ok {
		return false
	}
	if m.state != mRTR {
		mp.dropReceive(m)
		r.Complete(adi.Status{Cancelled: true, Source: r.Peer, Tag: r.Tag})
		mp.advance()
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
func (mp *mpin) dropReceive(m *mrecv) {
	for i, x := range mp.rq {
		if x == m {
			mp.rq = append(mp.rq[:i], mp.rq[i+1:]...)
			break
		}
	}
	if m.any && m.entry >= 0 {
		mp.rfa[m.entry].waiting--
		m.entry = -1
	}
}

// handle handles the MPIN control messages and the chunks of streams.
func (mp *mpin) handle(p *peer, c *ctl) error {
	d := mp.d
	q := p.rank
	switch c.typ {
	case ctlRTR:
		if s := mp.takePending(q, c.ctx, int(c.tag)); s != nil {
			return mp.write(p, s, c.id, c.addr, int(c.n))
		}
		mp.rtrs[q] = append(mp.rtrs[q], rtrMsg{ctx: c.ctx, tag: int(c.tag), rid: c.id, addr: c.addr, cap: int(c.n)})
	case ctlSC:
		m := mp.ids[c.id]
		if m == nil {
			return fmt.Errorf("netvm: SC from rank %d for unknown receive %d", q, c.id)
		}
		delete(mp.ids, c.id)
		delete(d.recvs, c.id)
		size, n := int(c.addr), int(c.n)
		if m.any {
			mp.dropReceive(m)
		}
		m.req.Complete(recv.Status(m.req, q, int(c.tag), size, n))
		if m.any {
			mp.advance()
		}
	case ctlEnaAny:
		mp.srfa[q][c.id] = srfaEntry{used: true, ctx: c.ctx, tag: int(c.tag)}
		mp.raiseFlags(q, nil)
	case ctlDisableAny:
		mp.srfa[q][c.id] = srfaEntry{}
	case ctlFlag:
		// A sender on another host raises its flag in RFA entry c.id. A
		// flag that outlived its entry's reuse costs an RTR_ANY answered
		// by UNA_ANY, as a flag raised just before a DISABLE_ANY does.
		if c.id < rfaEntries {
			atomic.StoreUint32(mp.rfaFlag(d.seg.Mem, int(c.id), q), 1)
		}
	case ctlRTRAny:
		e := &mp.srfa[q][c.id]
		e.flag = false
		var s *adi.Request
		if e.used {
			s = mp.takePending(q, e.ctx, e.tag)
		}
		if s == nil {
			d.post(p, outMsg{ctl: ctl{typ: ctlUnaAny, ctx: c.ctx}})
			return nil
		}
		if err := mp.write(p, s, c.ctx, c.addr, int(c.n)); err != nil {
			return err
		}
		mp.raiseFlags(q, nil)
	case ctlUnaAny:
		m := mp.ids[c.ctx]
		if m == nil {
			return fmt.Errorf("netvm: UNA_ANY from rank %d for unknown receive %d", q, c.ctx)
		}
		delete(mp.ids, c.ctx)
		delete(d.recvs, c.ctx)
		m.state = mAnyScanning
		if m.cancel {
			mp.dropReceive(m)
			m.req.Complete(adi.Status{Cancelled: true, Source: adi.AnySource, Tag: m.req.Tag})
		}
		mp.advance()
	case ctlCancel:
		ok := uint64(0)
		for i, t := range mp.rtrs[q] {
			if t.rid == c.id {
				mp.rtrs[q] = removeAt(mp.rtrs[q], i)
				ok = 1
				break
			}
		}
		d.post(p, outMsg{ctl: ctl{typ: ctlCancelAck, id: c.id, n: ok}})
	case ctlCancelAck:
		m := mp.ids[c.id]
		if m == nil || c.n == 0 {
			return nil // the SC came first: the receive completed normally
		}
		delete(mp.ids, c.id)
		delete(d.recvs, c.id)
		m.req.Complete(adi.Status{Cancelled: true, Source: m.req.Peer, Tag: m.req.Tag})
	case ctlData:
		return d.dataIn(p, c)
	default:
		return fmt.Errorf("netvm: control message of type %d from rank %d in MPIN mode", c.typ, q)
	}
	return nil
}

// peerGone fails the MPIN state that waits on a dead peer.
func (mp *mpin) peerGone(p *peer, fail func(*adi.Request)) {
	d := mp.d
	q := p.rank
	for _, r := range mp.pend[q] {
		fail(r)
	}
	mp.pend[q], mp.rtrs[q] = nil, nil
	for id, m := range mp.ids {
		if m.src == q {
			delete(mp.ids, id)
			delete(d.recvs, id)
			if m.any {
				mp.dropReceive(m)
			}
			fail(m.req)
		}
	}
	for _, m := range append([]*mrecv(nil), mp.rq...) {
		if m.req.Peer == q {
			mp.dropReceive(m)
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
