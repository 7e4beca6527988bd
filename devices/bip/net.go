package bip

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/wire"
)

// This file is BIP between hosts. A peer on another host has no segment
// this process can map: the job's wire endpoint (internal/wire) carries
// BIP's two mechanisms as frames, and the receiving side does what the
// sender does in shared memory, as Myrinet's NIC did for BIP.
//
//   - A short message is one fShort frame. The receiver writes it into
//     its own circular queue, in the slot the sender would have written
//     (the sender's block of the receiver's segment), so that NextShort
//     and everything above it take it as any other; the MPI device,
//     which would read it back at once, takes it as it arrives instead
//     when nothing of the sender's waits in the queue (takeNet). A
//     blocking send of one goes without a request when the wire hands
//     its frame to the kernel at once (sendShortNow). The sender counts
//     the queue's slots as credits: at most Queue messages not yet
//     consumed. Every short message carries its sender's count of the
//     messages it consumed from its receiver, which returns their slots;
//     a receiver that sends nothing back returns them with an fCredit
//     once half the queue is consumed, or at the next consumption when
//     the sender found the queue full (fWant, the frame form of the
//     waitSpace word).
//   - A long receive posted for such a peer is announced by an fPost
//     frame (slot, tag, posting order, capacity), which the sender keeps
//     as its view of the receiver's slot descriptors; a long send matches
//     it as on shared memory. With remote write allowed (cma=auto) the
//     data follow as fData frames whose bodies reference the sender's
//     buffer (no copy at the sender; a non-contiguous buffer is packed
//     into two alternating staging buffers) and which the receiving side
//     writes into the posted buffer at their offset — through the
//     endpoint's Placer, when it has one, straight from the socket. With
//     cma=off the data go through two staging chunks of Options.Chunk
//     bytes per send, each reused only once the receiver has emptied it
//     into place (fFree), as the shared-memory chunks are. fDone (bytes
//     written, message size, mode) completes the receive. BIP's bound
//     (MaxLong outstanding long operations per peer) is unchanged: it is
//     the number of slots.
//
// A long send completes once the kernel has every byte of the user's
// buffer (Handler.Sent), so the buffer may be reused. A peer whose
// connection breaks (Handler.Lost), or whose frames break the protocol,
// fails what depends on it with an error that names its rank and host.

// Frame kinds, the first word of every frame head.
const (
	fShort  uint32 = iota + 1 // a short message: a = BIP tag, b = length, c = the sender's count of the receiver's short messages consumed (as fCredit's b); payload inline after the head or as the body
	fCredit                   // b = short messages of the sender consumed so far
	fWant                     // the sender found its queue full
	fPost                     // a long receive: a = slot, b = posting order, c = capacity, d = BIP tag
	fData                     // long data: a = slot, b = offset, c = mode; the body is the data
	fFree                     // a = slot: its receiver emptied the oldest staging chunk
	fDone                     // a = slot, b = bytes written, c = the message's size, d = mode
)

// Frame head: kind u32, a u32, b, c, d u64, little-endian; a short
// message's payload may follow it in the head.
const (
	netHead   = 32
	inlineMax = wire.MaxHead - netHead
)

const (
	// netChunk is the data of one fData frame with remote write: small
	// enough for the endpoint's input buffer, large enough that the
	// per-frame cost is small next to the copy.
	netChunk = 128 << 10
	// netWindow is how many fData frames referencing one send's buffer
	// may wait for the kernel at once.
	netWindow = 4
	// drainWait bounds Close's wait for frames still queued to peers.
	drainWait = 5 * time.Second
)

// netSide is an endpoint's network half.
type netSide struct {
	ep      *wire.Endpoint
	sleeper *wire.Sleeper       // wakes a doorbell sleeper for frames, with peers on this host too
	direct  *wire.DirectSleeper // with every peer on another host: waiters sleep in the wire
	h       netHandler
	head    [wire.MaxHead]byte
	pool    []*shortBuf // bodies of short messages
	pending int         // frames the endpoint queued and has not yet sent whole (to peers not lost)
	did     bool        // the last poll handled a frame or finished a queued one
	shortIn bool        // a short message was placed in a queue since TookShortNet last looked
	lost    bool        // some peer's netPeer.lost is new: Progress fails what depends on it
}

// netPeer is what an endpoint knows of a peer on another host.
type netPeer struct {
	host string

	// as its sender
	acked   uint64      // my short messages it consumed, as last heard
	wanted  bool        // an fWant is out, no fCredit since
	slots   []netSlot   // its long-receive slots for me, from its fPost frames
	sending []*LongSend // by slot: my send streaming into it

	// as its receiver
	arrived  uint64 // its short messages placed in my queue
	reported uint64 // the consumed count last sent back
	asked    bool   // it waits for slots: report at the next consumption

	pending int   // frames to it that the endpoint queued and has not yet sent whole
	placed  bool  // Place read its current fData frame into the receive buffer
	lost    error // why it is unreachable (connection broken, protocol error)
}

// netSlot is a sender's view of one of its receiver's long-receive slots.
type netSlot struct {
	posted, claimed bool
	tag             uint32
	seq, cap        uint64
}

// netSend is the network state of a long send to a peer on another host.
type netSend struct {
	chunks   bool      // through staging chunks (cma=off)
	stage    [2][]byte // staging buffers (chunks, or packed pieces of a non-contiguous buffer)
	unsent   [2]bool   // the stage is queued in the endpoint
	unfreed  [2]bool   // chunks: the receiver has not emptied the stage yet
	next     int       // the stage of the next frame
	freeNext int       // chunks: the stage the receiver empties next
	inflight int       // frames referencing the user's buffer, queued in the endpoint
	doneSent bool
}

// A queued frame's token (wire.Endpoint.Send) names its peer and what it
// references: *netPeer for a head alone, *shortBuf for a short message's
// body, *dataTok for long data or the fDone after it.
type (
	dataTok struct {
		s     *LongSend
		stage int // the staging buffer, or -1: the user's buffer (or nothing, for fDone)
	}
	shortBuf struct {
		b []byte
		p *peer
	}
)

// putHead writes a frame head into h[:netHead].
func putHead(h []byte, kind, a uint32, b, c, d uint64) {
	binary.LittleEndian.PutUint32(h[0:], kind)
	binary.LittleEndian.PutUint32(h[4:], a)
	binary.LittleEndian.PutUint64(h[8:], b)
	binary.LittleEndian.PutUint64(h[16:], c)
	binary.LittleEndian.PutUint64(h[24:], d)
}

// netFrame is a decoded frame head.
type netFrame struct {
	kind, a uint32
	b, c, d uint64
}

func getHead(h []byte) (netFrame, bool) {
	if len(h) < netHead {
		return netFrame{}, false
	}
	return netFrame{kind: binary.LittleEndian.Uint32(h[0:]), a: binary.LittleEndian.Uint32(h[4:]),
		b: binary.LittleEndian.Uint64(h[8:]), c: binary.LittleEndian.Uint64(h[16:]), d: binary.LittleEndian.Uint64(h[24:])}, true
}

// openNet opens the endpoint's network half when some rank runs on
// another host (hosts: every rank's host number), publishing its address
// before the caller's barrier. It leaves e.net nil on one host.
func (e *Endpoint) openNet(kvs adi.KVS, hosts []int) error {
	e.net = &netSide{}
	e.net.h.e = e
	ep, err := wire.Setup(wire.Job{Rank: e.rank, Size: e.size, Hosts: hosts, KVS: kvs, Prefix: "bip", Handler: &e.net.h})
	if err != nil || ep == nil {
		e.net = nil
		return err
	}
	e.net.ep = ep
	return nil
}

// openNetLate is openNet for hosts learnt from the peers' records: the
// address is published behind one more barrier, when some rank runs on
// another host.
func (e *Endpoint) openNetLate(kvs adi.KVS, hosts []int) error {
	if !wire.Remote(hosts, e.rank) {
		return nil
	}
	if err := e.openNet(kvs, hosts); err != nil {
		return err
	}
	return kvs.Barrier()
}

// exited is the error of an operation (op) started towards rank once it is
// known to be gone.
func (e *Endpoint) exited(op string, rank int) error {
	if p := e.peers[rank]; p.net != nil {
		return adi.Errorf(adi.ErrOther, op, "rank %d on host %s is unreachable", rank, p.net.host)
	}
	return e.live.Exited(op, rank)
}

// startNet starts the goroutine that wakes a sleeping waiter for the
// network, once the peers are known; when every other rank runs on another
// host, the waiter sleeps in the wire itself and the goroutine watches the
// doorbell, which only this process rings then (wire.DirectSleeper).
func (e *Endpoint) startNet() {
	if e.net == nil {
		return
	}
	for _, p := range e.peers {
		if !p.self && p.net == nil {
			e.net.sleeper = e.net.ep.NewSleeper(e.Wake)
			return
		}
	}
	e.net.direct = e.net.ep.NewDirectSleeper(e.seg.Uint32(offDoorbell), e.seg.Uint32(offSleepers))
}

// closeNet gives queued frames up to drainWait to leave, then closes the
// endpoint (announcing the close to the peers).
func (e *Endpoint) closeNet() error {
	n := e.net
	if n == nil || n.ep == nil {
		return nil
	}
	deadline := time.Now().Add(drainWait)
	for n.pending > 0 && time.Now().Before(deadline) {
		n.ep.Poll()
		n.ep.Wait(time.Millisecond)
	}
	if n.sleeper != nil {
		n.sleeper.Stop()
	}
	if n.direct != nil {
		n.direct.Stop()
	}
	err := n.ep.Close()
	n.ep = nil
	return err
}

// send hands a frame to the endpoint; a failure makes p unreachable.
func (e *Endpoint) send(p *peer, head, body []byte, tok any) (bool, error) {
	now, err := e.net.ep.Send(p.rank, head, body, tok)
	if err != nil {
		e.netLost(p, err)
		return false, adi.Errorf(adi.ErrOther, "bip send", "rank %d on host %s is unreachable: %v", p.rank, p.net.host, err)
	}
	if !now {
		e.net.pending++
		p.net.pending++
	}
	return now, nil
}

// sendHead sends a frame without body.
func (e *Endpoint) sendHead(p *peer, kind, a uint32, b, c, d uint64) error {
	h := e.net.head[:netHead]
	putHead(h, kind, a, b, c, d)
	_, err := e.send(p, h, nil, p.net)
	return err
}

// netLost records that p is unreachable; the next Progress fails what
// depends on it.
func (e *Endpoint) netLost(p *peer, err error) {
	if p.net.lost == nil {
		p.net.lost = err
		e.net.lost = true
		// Frames still queued to it will never leave.
		e.net.pending -= p.net.pending
		p.net.pending = 0
	}
}

// trySendNet is TrySend to a peer on another host.
func (e *Endpoint) trySendNet(p *peer, tag uint32, n int, fill func([]byte)) (bool, error) {
	rp := p.net
	if p.tail-rp.acked >= uint64(e.opt.Queue) {
		if !rp.wanted {
			rp.wanted = true
			if err := e.sendHead(p, fWant, 0, 0, 0, 0); err != nil {
				return false, err
			}
		}
		e.Stats.QueueFull++
		return false, nil
	}
	h := e.net.head[:netHead]
	putHead(h, fShort, tag, uint64(n), p.head, 0)
	var body []byte
	var bp *shortBuf
	var tok any = rp
	if n <= inlineMax {
		h = e.net.head[:netHead+n]
		if n > 0 && fill != nil {
			fill(h[netHead:])
		}
	} else {
		bp = e.net.getBuf(e.opt.Short)
		bp.p = p
		body = bp.b[:n]
		if fill != nil {
			fill(body)
		}
		tok = bp
	}
	now, err := e.send(p, h, body, tok)
	if err != nil {
		return false, err
	}
	if now && bp != nil {
		e.net.pool = append(e.net.pool, bp)
	}
	p.tail++
	e.Stats.ShortSent++
	e.Stats.BytesSent += int64(n)
	e.creditRode(p)
	return true, nil
}

// creditRode notes that a short message to p carried this endpoint's
// count of p's messages consumed (c of fShort): p has its queue slots back
// as an fCredit would give them, so that traffic both ways (a ping-pong)
// returns slots with no frame of their own.
func (e *Endpoint) creditRode(p *peer) {
	if rp := p.net; p.head != rp.reported {
		rp.reported, rp.asked = p.head, false
	}
}

// shortNetBuf returns where a short message of n bytes to p, a peer on
// another host, is written for sendShortNow (the head of its frame, past
// BIP's), or nil when the message does not fit in the head, p's queue has
// no slot for it or frames to p wait in the endpoint (the message would
// overtake them, or wait behind them).
func (e *Endpoint) shortNetBuf(p *peer, n int) []byte {
	if rp := p.net; n > inlineMax || rp.pending > 0 || rp.lost != nil || p.tail-rp.acked >= uint64(e.opt.Queue) {
		return nil
	}
	return e.net.head[netHead : netHead+n]
}

// sendShortNow sends the short message of n bytes with tag that the
// caller wrote where shortNetBuf said, if the wire hands it to the kernel
// at once (wire.Endpoint.SendNow), and reports whether it went.
func (e *Endpoint) sendShortNow(p *peer, tag uint32, n int) bool {
	h := e.net.head[:netHead+n]
	putHead(h, fShort, tag, uint64(n), p.head, 0)
	now, err := e.net.ep.SendNow(p.rank, h, nil)
	if err != nil {
		e.netLost(p, err) // the request path reports it
		return false
	}
	if !now {
		return false
	}
	p.tail++
	e.Stats.ShortSent++
	e.Stats.BytesSent += int64(n)
	e.creditRode(p)
	return true
}

func (n *netSide) getBuf(size int) *shortBuf {
	if k := len(n.pool); k > 0 {
		bp := n.pool[k-1]
		n.pool = n.pool[:k-1]
		return bp
	}
	return &shortBuf{b: make([]byte, size)}
}

// consumedNet returns queue slots to p once half the queue is consumed, or
// at once when p waits for them.
func (e *Endpoint) consumedNet(p *peer) {
	rp := p.net
	if rp.asked || p.head-rp.reported >= uint64(e.opt.Queue/2) {
		e.creditNet(p)
	}
}

func (e *Endpoint) creditNet(p *peer) {
	p.net.reported, p.net.asked = p.head, false
	_ = e.sendHead(p, fCredit, 0, p.head, 0, 0) // a failure makes p unreachable
}

// postLongNet announces long receive r to its sender on another host.
func (e *Endpoint) postLongNet(r *LongRecv) error {
	p := r.peer
	p.postSeq++
	return e.sendHead(p, fPost, uint32(r.slot), p.postSeq, uint64(r.cap), uint64(r.tag))
}

// advanceNet moves a long send to a peer on another host forward: match a
// posted receive, stream the data, send fDone, and complete once the
// kernel has all of the user's buffer. It reports whether anything
// happened.
func (e *Endpoint) advanceNet(s *LongSend) bool {
	p, rp, ns := s.peer, s.peer.net, s.net
	if s.done {
		return false
	}
	did := false
	if s.slot < 0 {
		best := -1
		for i, sl := range rp.slots {
			if sl.posted && !sl.claimed && sl.tag == s.tag && (best < 0 || sl.seq < rp.slots[best].seq) {
				best = i
			}
		}
		if best < 0 {
			return false
		}
		s.slot = best
		rp.slots[best].claimed = true
		rp.sending[best] = s
		s.n = min(s.buf.Size(), int(rp.slots[best].cap))
		did = true
	}
	mode := uint64(modeDirect)
	if ns.chunks {
		mode = uint64(modeChunks)
	}
	for s.off < s.n {
		body, stage, ok := e.nextData(s)
		if !ok {
			return did
		}
		k := len(body)
		h := e.net.head[:netHead]
		putHead(h, fData, uint32(s.slot), uint64(s.off), mode, 0)
		now, err := e.send(p, h, body, &dataTok{s: s, stage: stage})
		if err != nil {
			e.failNet(s, err)
			return true
		}
		switch {
		case stage >= 0:
			ns.unsent[stage] = !now
			ns.unfreed[stage] = ns.chunks
			ns.next ^= 1
		case !now:
			ns.inflight++
		}
		s.off += k
		did = true
	}
	if !ns.doneSent {
		// fDone is counted with the frames referencing the buffer: the
		// send completes once the receiver can complete too, whether or
		// not this process calls Progress again.
		h := e.net.head[:netHead]
		putHead(h, fDone, uint32(s.slot), uint64(s.n), uint64(s.buf.Size()), mode)
		now, err := e.send(p, h, nil, &dataTok{s: s, stage: -1})
		if err != nil {
			e.failNet(s, err)
			return true
		}
		if !now {
			ns.inflight++
		}
		ns.doneSent = true
		rp.slots[s.slot], rp.sending[s.slot] = netSlot{}, nil
		did = true
	}
	if ns.inflight > 0 {
		return did // the kernel does not have all of the user's buffer, or fDone, yet
	}
	e.Stats.LongSent++
	e.Stats.BytesSent += int64(s.n)
	e.finishSend(s, nil)
	return true
}

// nextData returns the body of send s's next fData frame and its staging
// buffer (-1: the frame references the user's buffer), or false when the
// window is full: both chunks not yet emptied by the receiver (cma=off),
// netWindow frames of the user's buffer queued, or both staging buffers
// of a non-contiguous buffer queued.
func (e *Endpoint) nextData(s *LongSend) ([]byte, int, bool) {
	ns := s.net
	stage := ns.next
	switch {
	case ns.chunks:
		if ns.unsent[stage] || ns.unfreed[stage] {
			return nil, 0, false
		}
		body := ns.stageBuf(stage, e.opt.Chunk)[:min(e.opt.Chunk, s.n-s.off)]
		s.buf.CopyOut(s.off, body)
		e.Stats.Chunks++
		return body, stage, true
	case s.buf.Contiguous():
		if ns.inflight >= netWindow {
			return nil, 0, false
		}
		e.Stats.RemoteWrites++
		return s.buf.Mem[s.off : s.off+min(e.dataChunk(s.peer), s.n-s.off)], -1, true
	default:
		if ns.unsent[stage] {
			return nil, 0, false
		}
		body := ns.stageBuf(stage, netChunk)[:min(e.dataChunk(s.peer), s.n-s.off)]
		s.buf.CopyOut(s.off, body)
		e.Stats.RemoteWrites++
		return body, stage, true
	}
}

// dataChunk is the size of long data frames to p, at most netChunk: over
// the XDP wire, a size that fills the Ethernet frames exactly (128 KiB
// took two full frames and a short third).
func (e *Endpoint) dataChunk(p *peer) int { return e.net.ep.ChunkSize(p.rank, netHead, netChunk) }

func (ns *netSend) stageBuf(i, size int) []byte {
	if ns.stage[i] == nil {
		ns.stage[i] = make([]byte, size)
	}
	return ns.stage[i]
}

// failNet fails send s, whose peer became unreachable.
func (e *Endpoint) failNet(s *LongSend, err error) {
	rp := s.peer.net
	if s.slot >= 0 && rp.sending[s.slot] == s {
		rp.slots[s.slot], rp.sending[s.slot] = netSlot{}, nil
	}
	e.finishSend(s, err)
}

// pollNet reads what the network brought and fails what depends on peers
// found unreachable; it reports whether anything happened.
func (e *Endpoint) pollNet() bool {
	n := e.net
	n.did = false
	n.ep.Poll()
	if !n.lost {
		return n.did
	}
	n.lost = false
	for _, p := range e.peers {
		if p.net != nil && p.net.lost != nil && p.gone == nil {
			e.peerDied(p, adi.Errorf(adi.ErrOther, "progress", "rank %d on host %s is unreachable: %v", p.rank, p.net.host, p.net.lost))
		}
	}
	return true
}

// netHandler is the endpoint's wire.Handler (and wire.Placer), kept off
// the Endpoint's own methods. Its methods run inside pollNet.
type netHandler struct{ e *Endpoint }

var (
	_ wire.Handler = (*netHandler)(nil)
	_ wire.Placer  = (*netHandler)(nil)
)

// Sent releases what a queued frame referenced.
func (h *netHandler) Sent(tok any) {
	n := h.e.net
	n.did = true
	var rp *netPeer
	switch t := tok.(type) {
	case *netPeer:
		rp = t
	case *shortBuf:
		rp = t.p.net
		n.pool = append(n.pool, t)
	case *dataTok:
		rp = t.s.peer.net
		if t.stage < 0 {
			t.s.net.inflight--
		} else {
			t.s.net.unsent[t.stage] = false
		}
	}
	if rp != nil && rp.lost == nil {
		rp.pending--
		n.pending--
	}
}

// Lost records that peer's connection broke.
func (h *netHandler) Lost(peer int, err error) {
	if p := h.e.peers[peer]; p != nil && p.net != nil {
		h.e.netLost(p, err)
	}
}

// Place has the endpoint read an fData frame's body straight into its
// contiguous receive buffer (wire.Placer, where the endpoint has it).
func (h *netHandler) Place(peer int, head []byte, n int) []byte {
	e := h.e
	f, ok := getHead(head)
	if !ok || f.kind != fData || int(f.a) >= e.opt.MaxLong {
		return nil
	}
	r := e.peers[peer].recvSlots[f.a]
	if r == nil || !r.buf.Contiguous() || f.b+uint64(n) > uint64(r.cap) {
		return nil
	}
	e.peers[peer].net.placed = true
	return r.buf.Mem[f.b : f.b+uint64(n)]
}

// Frame handles one frame from peer.
func (h *netHandler) Frame(peer int, head, body []byte) {
	e := h.e
	p := e.peers[peer]
	if p == nil || p.net == nil || p.gone != nil {
		return
	}
	placed := p.net.placed
	p.net.placed = false
	e.net.did = true
	f, ok := getHead(head)
	if !ok {
		e.netLost(p, fmt.Errorf("a frame with a head of %d bytes", len(head)))
		return
	}
	if err := e.frame(p, f, head, body, placed); err != nil {
		e.netLost(p, err)
	}
}

// frame does what frame f from p asks.
func (e *Endpoint) frame(p *peer, f netFrame, head, body []byte, placed bool) error {
	rp := p.net
	if f.kind == fPost || f.kind == fData || f.kind == fFree || f.kind == fDone {
		if int(f.a) >= e.opt.MaxLong {
			return fmt.Errorf("frame %d for long slot %d: there are %d", f.kind, f.a, e.opt.MaxLong)
		}
	}
	switch f.kind {
	case fShort:
		return e.placeShort(p, f, head, body)
	case fCredit:
		e.creditIn(p, f.b)
	case fWant:
		if p.head > rp.reported {
			e.creditNet(p)
		} else {
			rp.asked = true
		}
	case fPost:
		rp.slots[f.a] = netSlot{posted: true, tag: uint32(f.d), seq: f.b, cap: f.c}
	case fData:
		r := p.recvSlots[f.a]
		if r == nil || f.b != uint64(r.got) || f.b+uint64(len(body)) > uint64(r.cap) {
			return fmt.Errorf("long data at offset %d (%d bytes) for slot %d, which expects no such data", f.b, len(body), f.a)
		}
		if !placed {
			r.buf.CopyIn(r.got, body)
		}
		r.got += len(body)
		if f.c == uint64(modeChunks) {
			return e.sendHead(p, fFree, f.a, 0, 0, 0)
		}
	case fFree:
		if s := rp.sending[f.a]; s != nil {
			s.net.unfreed[s.net.freeNext] = false
			s.net.freeNext ^= 1
		}
	case fDone:
		r := p.recvSlots[f.a]
		if r == nil || f.b != uint64(r.got) {
			return fmt.Errorf("end of a long message of %d bytes for slot %d, which got other data", f.b, f.a)
		}
		r.n, r.size, r.direct = int(f.b), int(f.c), f.d == uint64(modeDirect)
		e.Stats.LongRecv++
		e.finishRecv(r, nil)
	default:
		return fmt.Errorf("a frame of unknown kind %d", f.kind)
	}
	return nil
}

// creditIn takes p's count of this endpoint's short messages it consumed
// (from an fCredit, or riding on an fShort): the queue slots they held
// are free again.
func (e *Endpoint) creditIn(p *peer, consumed uint64) {
	if rp := p.net; consumed > rp.acked && consumed <= p.tail {
		rp.acked, rp.wanted = consumed, false
	}
}

// placeShort writes a short message from p into p's slot of this
// endpoint's queue, as p would on shared memory, or hands it to takeNet
// when nothing of p's waits there.
func (e *Endpoint) placeShort(p *peer, f netFrame, head, body []byte) error {
	payload := body
	if len(head) > netHead {
		payload = head[netHead:]
	}
	n := int(f.b)
	if n != len(payload) || n > e.opt.Short {
		return fmt.Errorf("a short message of %d bytes that says %d (at most %d)", len(payload), n, e.opt.Short)
	}
	rp := p.net
	e.creditIn(p, f.c)
	q := uint64(e.opt.Queue)
	if rp.arrived-p.head >= q {
		return fmt.Errorf("a short message beyond its %d queue slots", q)
	}
	if e.takeNet != nil && rp.arrived == p.head && e.takeNet(p.rank, f.a, payload) {
		// Nothing of p's waited in the queue: the message was consumed
		// here, as the queue's reader would at once.
		rp.arrived++
		e.takeShort(p)
		e.consumedNet(p)
		return nil
	}
	s := p.in[e.offQueue+int(rp.arrived%q)*e.slotBytes:][:e.slotBytes]
	qLen.Set(s, uint32(n))
	qTag.Set(s, f.a)
	copy(s[qHdr:], payload)
	rp.arrived++
	qSeq.Store(s, rp.arrived)
	e.net.shortIn = true
	return nil
}

// TookShortNet reports whether the network placed a short message in this
// endpoint's queues since it was last asked: a caller that looked at its
// queues before polling the network (Progress) looks again, rather than
// find the message only at its next poll.
func (e *Endpoint) TookShortNet() bool {
	if e.net == nil || !e.net.shortIn {
		return false
	}
	e.net.shortIn = false
	return true
}

// Remote reports whether rank runs on another host, reached over the
// network.
func (e *Endpoint) Remote(rank int) bool {
	return rank >= 0 && rank < e.size && e.peers[rank].net != nil
}

// Host is the name of rank's host, for peers on other hosts ("" for peers
// on this one).
func (e *Endpoint) Host(rank int) string {
	if !e.Remote(rank) {
		return ""
	}
	return e.peers[rank].net.host
}
