package via

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/internal/shm"
	"github.com/adimpi/adimpi/internal/wire"
)

// This file is the NIC's network port: VIs connected to a NIC on another
// host, whose memory this process cannot reach. The engine that executes a
// send descriptor of such a VI carries its data to the remote NIC as frames
// over the job's wire endpoint (internal/wire); the remote engine, which
// owns the target memory, does there what a local engine does with
// process_vm_writev: it takes the VI's oldest posted receive descriptor,
// translates its segments through its own tables, writes the data into the
// registered buffers, then the descriptor's length, immediate data and
// status, and appends the CQ entry. An RDMA write's frames are written into
// the target's registered region once the target engine has checked the
// memory handle and the bounds; an RDMA read is a request frame answered
// with the data in frames. The initiator completes a send-queue descriptor
// when the target acknowledges it (acks are cumulative and ride on every
// frame of the opposite direction, or go alone when the engine turns idle)
// or reports it in error (a nak with the status), so a length or protection
// error completes both sides as on one host. A frame that needs a receive
// descriptor the application has not posted waits at the target NIC, in
// order with the VI's later frames, until PostRecv rings the engine. A lost
// connection completes every descriptor of the VIs to that NIC, posted or
// in flight, with StatusTransportError.
//
// The endpoint is driven by whoever runs the engine's pass (Poll, Send and
// the Handler calls), under the engine's lock: the engine goroutine, or an
// application thread waiting for its completions (Assist), which then
// carries the frames itself with no hand-over. An idle engine sleeps in the
// endpoint's epoll (Endpoint.Wait), which a frame ends and which this
// process's doorbell rings end too (Endpoint.Wake), so an arriving frame
// wakes the engine itself, with no goroutine in between; while the
// application assists, the engine sleeps on its futex instead.

// Frame kinds.
const (
	kData     = 1 // data of an OpSend or OpRDMAWrite descriptor at offset fhOff
	kReadReq  = 2 // an OpRDMARead: send fhTotal bytes at (fhHandle, fhAddr) back
	kReadResp = 3 // RDMA read data at offset fhOff; fhHandle is the status
	kAck      = 4 // nothing but fhAck
	kNak      = 5 // descriptor fhSeq completed with status fhHandle
)

// fLast in fhFlags marks a descriptor's last frame.
const fLast = 1

// Frame head layout (little endian: the hosts need not share a byte order).
const (
	fhKind   = 0  // u8
	fhFlags  = 1  // u8
	fhSrcVI  = 4  // u32: the sending NIC's VI
	fhDstVI  = 8  // u32: the receiving NIC's VI
	fhSeq    = 12 // u32: the descriptor's number in its send queue
	fhAck    = 16 // u32: descriptors of the receiver's send queue the sender has finished (cumulative)
	fhCtl    = 20 // u32: the descriptor's control word
	fhImm    = 24 // u32
	fhTotal  = 28 // u32: the descriptor's length
	fhOff    = 32 // u32: where this frame's body goes in it
	fhHandle = 36 // u32: RDMA memory handle; read responses and naks: status
	fhAddr   = 40 // u64: RDMA address
	fhSize   = 48
)

// Data of a descriptor travels in frames of at most netChunk bytes; pieces
// of at least netByRef bytes go by reference (no copy), smaller ones are
// packed into frames of up to netStage bytes.
const (
	netChunk = 1 << 20
	netByRef = 8 << 10
	netStage = 64 << 10
)

// fhead is a decoded frame head.
type fhead struct {
	kind, flags                         uint8
	src, dst, seq, ack, ctl, imm, total uint32
	off, handle                         uint32
	addr                                uint64
}

func (h *fhead) put(b []byte) {
	le := binary.LittleEndian
	b[fhKind], b[fhFlags], b[2], b[3] = h.kind, h.flags, 0, 0
	le.PutUint32(b[fhSrcVI:], h.src)
	le.PutUint32(b[fhDstVI:], h.dst)
	le.PutUint32(b[fhSeq:], h.seq)
	le.PutUint32(b[fhAck:], h.ack)
	le.PutUint32(b[fhCtl:], h.ctl)
	le.PutUint32(b[fhImm:], h.imm)
	le.PutUint32(b[fhTotal:], h.total)
	le.PutUint32(b[fhOff:], h.off)
	le.PutUint32(b[fhHandle:], h.handle)
	le.PutUint64(b[fhAddr:], h.addr)
}

func getFhead(b []byte) (fhead, bool) {
	if len(b) != fhSize {
		return fhead{}, false
	}
	le := binary.LittleEndian
	return fhead{kind: b[fhKind], flags: b[fhFlags], src: le.Uint32(b[fhSrcVI:]), dst: le.Uint32(b[fhDstVI:]),
		seq: le.Uint32(b[fhSeq:]), ack: le.Uint32(b[fhAck:]), ctl: le.Uint32(b[fhCtl:]), imm: le.Uint32(b[fhImm:]),
		total: le.Uint32(b[fhTotal:]), off: le.Uint32(b[fhOff:]), handle: le.Uint32(b[fhHandle:]), addr: le.Uint64(b[fhAddr:])}, true
}

// before reports whether descriptor number a comes before b (numbers wrap).
func before(a, b uint32) bool { return int32(a-b) < 0 }

// netVI is the network state of a VI connected to a NIC on another host.
type netVI struct {
	rank  int    // the peer NIC's rank on the wire
	where string // names the peer in errors ("rank 3 on host h2")

	// Engine only.
	seq      uint32   // the next send-queue descriptor's number
	inflight []*netOp // sent, not yet completed, in order
	free     []*netOp // retired records, for the next descriptors (as a NIC keeps its own)
	rxDone   uint32   // the peer's descriptors this NIC has finished
	ackSent  uint32   // the last rxDone the peer was told
	rx       netRx    // the peer's descriptor being received
	held     []heldFrame

	holding  atomic.Bool   // held frames wait for a receive descriptor (PostRecv rings)
	recvs    atomic.Uint64 // receive descriptors completed (after their status), for RecvDone's look without the lock
	lost     atomic.Pointer[lostErr]
	posted   atomic.Uint64 // send-queue descriptors posted
	executed atomic.Uint64 // of them, those the engine has put on the wire (or failed)
}

type lostErr struct{ err error }

// netOp is a send-queue descriptor whose frames have gone to the peer.
type netOp struct {
	d      *Descriptor
	seq    uint32
	op     uint32
	total  uint32
	st     uint32   // StatusDone, or the error the peer reported
	acked  bool     // the peer finished it (RDMA read: all its data is in)
	unsent int      // frames still referencing its memory in the endpoint
	local  [][]byte // RDMA read: where the data goes
}

// netRx is the receiving side of one descriptor of the peer's send queue.
type netRx struct {
	active bool
	seq    uint32
	op     uint32
	need   bool // it consumes a receive descriptor
	total  uint32
	imm    uint32
	st     uint32
	desc   *Descriptor // the consumed receive descriptor
	pieces [][]byte    // where the data goes, in order
}

type heldFrame struct {
	h    fhead
	body []byte
}

// readTok marks frames of RDMA read data: nothing waits for them to leave.
type readTok struct{}

// netPort is the NIC's endpoint.
type netPort struct {
	ep  *wire.Endpoint
	app *wire.Waiter // the application's sleep on it with one Go processor (procs.go)
}

// netHandler is the NIC as the endpoint's Handler (and Placer); its
// methods run inside Poll, on the engine.
type netHandler struct{ n *NIC }

var (
	_ wire.Handler = netHandler{}
	_ wire.Placer  = netHandler{}
)

// WireHandler is the NIC's handler for the job's wire endpoint
// (wire.Setup); give the endpoint to UseWire.
func (n *NIC) WireHandler() wire.Handler { return netHandler{n} }

// UseWire hands the NIC the endpoint through which its VIs reach NICs on
// other hosts (ConnectRemote). From then on the engine owns it: it polls
// it, sends on it, and closes it when the NIC closes.
func (n *NIC) UseWire(ep *wire.Endpoint) {
	p := &netPort{ep: ep, app: ep.NewWaiter()}
	n.port.Store(p)
	n.self.ringNIC()
}

// ConnectRemote connects vi to VI peerVI of the NIC of rank on another
// host, reached through the endpoint given to UseWire; where names that
// NIC in errors. Both sides call it (or Connect, on one host).
func (vi *VI) ConnectRemote(rank, peerVI int, where string) error {
	if vi.conn.Load() {
		return errors.New("via: ConnectRemote: the VI is already connected")
	}
	n := vi.nic
	if n.port.Load() == nil {
		return errors.New("via: ConnectRemote: the NIC has no wire endpoint (UseWire)")
	}
	if peerVI < 0 {
		return fmt.Errorf("via: ConnectRemote: VI %d does not exist", peerVI)
	}
	vi.net = &netVI{rank: rank, where: where}
	vi.peerVI = peerVI
	vi.conn.Store(true)
	n.viMu.Lock()
	act := append(append([]*VI(nil), *n.active.Load()...), vi)
	n.active.Store(&act)
	nets := append(append([]*VI(nil), *n.remote.Load()...), vi)
	n.remote.Store(&nets)
	n.viMu.Unlock()
	n.self.ringNIC() // frames that came before the connection wait for it
	return nil
}

// Lost is the error that broke a VI connected to another host, or nil.
func (vi *VI) Lost() error {
	if vi.net == nil {
		return nil
	}
	if l := vi.net.lost.Load(); l != nil {
		return l.err
	}
	return nil
}

// Unsent reports whether a VI connected to another host has send-queue
// descriptors whose frames the engine has not handed to the wire yet.
func (vi *VI) Unsent() bool {
	return vi.net != nil && vi.net.executed.Load() != vi.net.posted.Load()
}

// LostGen moves whenever a VI's connection to another host breaks.
func (n *NIC) LostGen() uint32 { return n.lostGen.Load() }

// netSend sends one frame of vi; the head's ack is the VI's rxDone. It
// reports whether the body is with the kernel (false: referenced until
// Sent, or copied when tok is nil).
func (n *NIC) netSend(ep *wire.Endpoint, vi *VI, h *fhead, body []byte, tok any) (bool, error) {
	nv := vi.net
	h.src, h.dst, h.ack = uint32(vi.id), uint32(vi.peerVI), nv.rxDone
	nv.ackSent = nv.rxDone
	// The head goes in the NIC's buffer (an array on the stack escapes
	// through the endpoint's interface: an allocation per frame), or in a
	// new one if a Send of the endpoint's own calls back into netSend.
	head := &n.head
	if n.headBusy {
		head = new([fhSize]byte)
	} else {
		n.headBusy = true
		defer func() { n.headBusy = false }()
	}
	h.put(head[:])
	sent, err := ep.Send(nv.rank, head[:], body, tok)
	n.pc.framesOut++
	if err != nil {
		n.netBreak(nv.rank, err)
	}
	return sent, err
}

// executeNet carries send-queue descriptor e of vi to the remote NIC: its
// data as frames (OpSend, OpRDMAWrite) or a read request (OpRDMARead). The
// descriptor completes when the peer acknowledges it.
func (n *NIC) executeNet(vi *VI, e *sendEntry) {
	nv := vi.net
	port := n.port.Load()
	if nv.lost.Load() != nil || port == nil {
		n.complete(vi, e.d, 0, StatusDone|StatusTransportError)
		return
	}
	op := e.ctl & 0xff
	phys, err := n.self.translateSegs(e.segs, n.physBuf[:0])
	n.physBuf = phys
	var local [][]byte
	if err == nil {
		local, err = n.localPieces(e.segs, phys, n.localBuf[:0])
		n.localBuf = local
	}
	defer clear(n.localBuf)
	if err != nil {
		n.complete(vi, e.d, 0, StatusDone|StatusProtectionError)
		return
	}
	total := 0
	for _, p := range local {
		total += len(p)
	}
	o := nv.newOp()
	*o = netOp{d: e.d, seq: nv.seq, op: op, total: uint32(total), st: StatusDone, local: o.local[:0]}
	nv.seq++
	nv.inflight = append(nv.inflight, o)
	h := fhead{seq: o.seq, ctl: e.ctl, imm: e.imm, total: uint32(total), handle: uint32(e.rh), addr: e.raddr}
	if op == OpRDMARead {
		o.local = append(o.local, local...)
		h.kind, h.flags = kReadReq, fLast
		n.netSend(port.ep, vi, &h, nil, nil)
		n.pc.rdmaR++
		return
	}
	if op == OpRDMAWrite {
		n.pc.rdmaW++
	} else {
		n.pc.sends++
	}
	h.kind = kData
	n.sendData(port.ep, vi, &h, local, o)
	n.pc.bytes += int64(total)
}

// sendData sends the pieces as data frames of h's descriptor (or, with o
// nil, of an RDMA read's response), the last one marked fLast. Large
// pieces go by reference, small ones packed into the engine's stage.
func (n *NIC) sendData(ep *wire.Endpoint, vi *VI, h *fhead, pieces [][]byte, o *netOp) {
	type frame struct {
		off  int
		body []byte
		ref  bool
	}
	var pend frame
	have := false
	emit := func(f frame, last bool) {
		h.off, h.flags = uint32(f.off), 0
		if last {
			h.flags = fLast
		}
		var tok any
		if f.ref {
			tok = readTok{}
			if o != nil {
				tok = o
			}
		}
		sent, err := n.netSend(ep, vi, h, f.body, tok)
		if err == nil && !sent && f.ref && o != nil {
			o.unsent++
		}
	}
	push := func(f frame) {
		if have {
			emit(pend, false)
		}
		pend, have = f, true
	}
	if cap(n.stage) < netStage {
		n.stage = make([]byte, 0, netStage)
	}
	stage, stageOff, off := n.stage[:0], 0, 0
	flushStage := func() {
		if len(stage) > 0 {
			push(frame{off: stageOff, body: stage})
			stage = stage[len(stage):] // the next stage starts once pend has gone
		}
	}
	for _, p := range pieces {
		if len(p) >= netByRef {
			flushStage()
			for len(p) > 0 {
				k := min(len(p), netChunk)
				push(frame{off: off, body: p[:k], ref: true})
				off += k
				p = p[k:]
			}
			continue
		}
		for len(p) > 0 {
			if len(stage) == 0 {
				if have && !pend.ref {
					emit(pend, false) // pend is the stage: send (or copy) it before reuse
					have = false
				}
				stage, stageOff = n.stage[:0], off
			}
			k := min(len(p), cap(stage)-len(stage))
			stage = append(stage, p[:k]...)
			off += k
			p = p[k:]
			if len(stage) == cap(stage) {
				flushStage()
			}
		}
	}
	flushStage()
	if !have {
		pend = frame{off: 0}
	}
	emit(pend, true)
}

// netFrame handles a frame from peer (Handler.Frame).
func (n *NIC) netFrame(peer int, head, body []byte) {
	h, ok := getFhead(head)
	if !ok {
		return
	}
	n.pc.framesIn++
	// The VI is looked up before the kept frames are replayed: the
	// application may connect it at any moment (ConnectRemote), and a
	// frame found connected must not overtake the frames kept while it
	// was not, which the replay then finds connected too.
	vi := netVIIn(*n.remote.Load(), peer, &h)
	if raceHook != nil {
		raceHook(n, "frame")
	}
	if vi == nil {
		n.keepEarly(peer, head, body)
	}
	if len(n.early) > 0 {
		n.replayEarly()
	}
	if vi != nil {
		n.netHandle(vi, h, body)
	}
}

// raceHook, when set (by tests, before any NIC opens), runs where the
// application's ConnectRemote may race with the engine's VI lookups: in
// netFrame ("frame") and in replayEarly after a frame is kept ("replay").
var raceHook func(n *NIC, where string)

// ackEvery is how many finished descriptors a busy engine lets its peer
// wait for before it acknowledges them without waiting to be idle.
const ackEvery = 64

// earlyMax bounds the frames kept for VIs not connected yet.
const earlyMax = 1 << 12

// earlyFrame is a frame for a VI this NIC has not connected yet: its peer
// finished connecting first and sent at once.
type earlyFrame struct {
	peer       int
	head, body []byte
}

// keepEarly keeps a frame for a VI of this NIC that is not connected to
// peer yet, until ConnectRemote connects it (frames for VIs that never
// will are dropped past earlyMax).
func (n *NIC) keepEarly(peer int, head, body []byte) {
	if len(n.early) >= earlyMax {
		return
	}
	n.early = append(n.early, earlyFrame{peer, append([]byte(nil), head...), append([]byte(nil), body...)})
}

// replayEarly handles, in arrival order, the kept frames whose VI is now
// connected; a frame of a VI still unconnected keeps its place. The VIs
// are read once: a VI connected during the replay must not have its later
// frames handled before the earlier ones kept in this same loop.
func (n *NIC) replayEarly() {
	vis := *n.remote.Load()
	keep := n.early[:0]
	for _, f := range n.early {
		h, _ := getFhead(f.head)
		if vi := netVIIn(vis, f.peer, &h); vi != nil {
			n.netHandle(vi, h, f.body)
		} else {
			keep = append(keep, f)
			if raceHook != nil {
				raceHook(n, "replay")
			}
		}
	}
	clear(n.early[len(keep):])
	n.early = keep
}

// netHandle handles a frame for vi.
func (n *NIC) netHandle(vi *VI, h fhead, body []byte) {
	nv := vi.net
	if h.kind == kNak {
		for _, o := range nv.inflight {
			if o.seq == h.seq {
				o.st = StatusDone | h.handle
			}
		}
	}
	n.netAck(vi, h.ack)
	switch h.kind {
	case kData, kReadReq:
		if len(nv.held) > 0 || !n.netRecv(vi, &h, body) {
			nv.held = append(nv.held, heldFrame{h: h, body: append([]byte(nil), body...)})
			n.cnt.held.Add(1)
			nv.holding.Store(true)
			n.drainHeld(vi) // a receive descriptor posted meanwhile
		}
	case kReadResp:
		n.netReadResp(vi, &h, body)
	}
}

// netVIOf finds the VI a frame from peer is for, or nil.
func (n *NIC) netVIOf(peer int, h *fhead) *VI { return netVIIn(*n.remote.Load(), peer, h) }

// netVIIn finds the VI a frame from peer is for among vis, or nil.
func netVIIn(vis []*VI, peer int, h *fhead) *VI {
	for _, vi := range vis {
		if vi.id == int(h.dst) && vi.net.rank == peer && vi.peerVI == int(h.src) {
			return vi
		}
	}
	return nil
}

// netAck completes the descriptors of vi the peer has finished.
func (n *NIC) netAck(vi *VI, ack uint32) {
	nv := vi.net
	for _, o := range nv.inflight {
		if !before(o.seq, ack) {
			break
		}
		if o.op != OpRDMARead {
			o.acked = true
		}
	}
	n.retire(vi)
}

// retire completes, in order, the descriptors that are acknowledged and
// whose memory the endpoint no longer references.
func (n *NIC) retire(vi *VI) {
	nv := vi.net
	k := 0
	for k < len(nv.inflight) && nv.inflight[k].acked && nv.inflight[k].unsent == 0 {
		o := nv.inflight[k]
		n.complete(vi, o.d, o.total, o.st)
		clear(o.local)
		*o = netOp{local: o.local[:0]}
		nv.free = append(nv.free, o)
		k++
	}
	if k > 0 {
		// Moved down rather than resliced: the array is reused, and
		// a sender's next descriptor allocates nothing.
		m := copy(nv.inflight, nv.inflight[k:])
		clear(nv.inflight[m:])
		nv.inflight = nv.inflight[:m]
	}
}

// newOp returns a retired operation record of nv for reuse, or a new one.
// A record is retired only once the peer acknowledged its descriptor and
// the endpoint returned every frame body referencing it (retire), so no
// Sent callback names it any more.
func (nv *netVI) newOp() *netOp {
	k := len(nv.free)
	if k == 0 {
		return new(netOp)
	}
	o := nv.free[k-1]
	nv.free[k-1] = nil
	nv.free = nv.free[:k-1]
	return o
}

// netSent is Handler.Sent: a frame body referencing a descriptor's memory
// is with the kernel.
func (n *NIC) netSent(tok any) {
	o, ok := tok.(*netOp)
	if !ok {
		return
	}
	o.unsent--
	for _, vi := range *n.remote.Load() {
		if len(vi.net.inflight) > 0 && vi.net.inflight[0] == o {
			n.retire(vi)
		}
	}
}

// netRecv handles a data frame or read request of vi's peer; it reports
// false when the frame needs a receive descriptor that is not posted.
func (n *NIC) netRecv(vi *VI, h *fhead, body []byte) bool {
	nv := vi.net
	if h.kind == kReadReq {
		n.serveRead(vi, h)
		nv.rxDone = h.seq + 1
		return true
	}
	if !n.rxBegin(vi, h) {
		return false
	}
	rx := &nv.rx
	if rx.st == StatusDone && len(body) > 0 {
		writeAt(rx.pieces, int(h.off), body)
	}
	if h.flags&fLast != 0 {
		n.rxEnd(vi)
	}
	return true
}

// rxBegin sets up the reception of h's descriptor at its first frame: the
// receive descriptor it consumes, the memory its data goes to, and the
// errors it completes with. It reports false when a receive descriptor is
// needed and none is posted.
func (n *NIC) rxBegin(vi *VI, h *fhead) bool {
	rx := &vi.net.rx
	if rx.active {
		return true
	}
	op := h.ctl & 0xff
	need := op == OpSend || (op == OpRDMAWrite && h.ctl&FlagImmediate != 0)
	*rx = netRx{seq: h.seq, op: op, need: need, total: h.total, imm: h.imm, st: StatusDone, pieces: rx.pieces[:0]}
	if need && !n.takeRecv(vi, rx) {
		return false
	}
	rx.active = true
	switch op {
	case OpRDMAWrite:
		rx.pieces = rx.pieces[:0]
		segs := []DataSegment{{Addr: h.addr, Len: h.total, Handle: MemHandle(h.handle)}}
		phys, err := n.self.nicTranslate(MemHandle(h.handle), h.addr, uint64(h.total), n.physBuf[:0])
		n.physBuf = phys
		if err == nil {
			rx.pieces, err = n.localPieces(segs, phys, rx.pieces)
		}
		if err != nil {
			rx.st |= StatusProtectionError
		}
	case OpSend:
		room := 0
		for _, p := range rx.pieces {
			room += len(p)
		}
		if rx.st == StatusDone && int(h.total) > room {
			rx.st |= StatusLengthError
		}
	default:
		rx.st |= StatusProtectionError
	}
	return true
}

// takeRecv consumes vi's oldest posted receive descriptor for rx: its
// segments from the NIC's descriptor cache (the receive-queue slot) or by
// DMA from host memory, translated through this NIC's tables.
func (n *NIC) takeRecv(vi *VI, rx *netRx) bool {
	off := n.self.viOff(vi.id)
	// The VI's lock orders this after PostRecv's writes (the queue words
	// are in the segment, which Go's race detector does not see).
	vi.mu.Lock()
	head := atomic.LoadUint64(n.self.u64(off))
	if head == atomic.LoadUint64(n.self.u64(off+8)) {
		vi.mu.Unlock()
		return false
	}
	slot := uint32(head % uint64(n.lay.rqLen))
	s := off + viHdrSize + slot*slotSize
	// Taken off the slot here, under the lock this look already holds
	// (the completion needs no second one): no post reuses the slot
	// before this descriptor completes and the application takes it back.
	rx.desc = vi.rqDesc[slot]
	vi.rqDesc[slot] = nil
	vi.mu.Unlock()
	var segs []DataSegment
	if *n.self.u32(s + 12) != 0 {
		segs = make([]DataSegment, *n.self.u32(s + 8))
		for k := range segs {
			segs[k] = *(*DataSegment)(unsafe.Pointer(&n.seg.Mem[s+slotSeg0+uint32(k)*16]))
		}
	} else {
		_, fetched, err := fetch(n.self.pid, atomic.LoadUint64(n.self.u64(s)), n.o.AT)
		n.cnt.fetches.Add(1)
		if err != nil {
			rx.st |= StatusProtectionError
			return true
		}
		segs = fetched
	}
	// Only the memory the message fills is translated, as a NIC
	// translates the pages it writes: an 8-byte message into a 16 KiB
	// buffer looks up one page, not five. A shorter buffer is translated
	// whole, and rxBegin finds the length error.
	segs = trimDS(segs, uint64(rx.total))
	phys, err := n.translateRecv(vi, slot, segs, n.physBuf[:0])
	n.physBuf = phys
	if err == nil {
		rx.pieces, err = n.localPieces(segs, phys, rx.pieces[:0])
	}
	if err != nil {
		rx.st |= StatusProtectionError
	}
	return true
}

// translateRecv translates the segments of the receive descriptor in
// slot of vi's receive queue. A one-page translation is kept in the
// slot's register (rxXlate), as a NIC keeps the translation of each
// posted receive buffer beside the queue: the device reposts its
// buffers in order, each into the slot it left, and the next message
// into the slot finds its page there without the translation cache,
// whose last-translation registers the rotating buffers always miss.
func (n *NIC) translateRecv(vi *VI, slot uint32, segs []DataSegment, out []shm.RemoteSeg) ([]shm.RemoteSeg, error) {
	if n.o.AT == AT1 || len(segs) != 1 || segs[0].Len == 0 {
		return n.self.translateSegs(segs, out)
	}
	if vi.rxXlate == nil {
		vi.rxXlate = make([]lastXlate, n.lay.rqLen)
	}
	s, r := segs[0], &vi.rxXlate[slot]
	addr, size := s.Addr, uint64(s.Len)
	vpn := addr >> 12
	onePage := (addr+size-1)>>12 == vpn
	gen := n.xlateGen.Load() // before the translation: a deregistration after it is not missed
	if onePage && r.h == s.Handle && r.h != 0 && r.vpn == vpn && addr >= r.base && addr+size <= r.base+r.length && r.gen == gen {
		n.self.countHits(1)
		return append(out, shm.RemoteSeg{Addr: r.frame + addr&(pageSize-1), Len: size}), nil
	}
	out, err := n.self.translateSegs(segs, out)
	if err != nil || !onePage || len(out) != 1 {
		return out, err
	}
	if reg := n.region(s.Handle); reg != nil {
		*r = lastXlate{h: s.Handle, vpn: vpn, frame: out[0].Addr - addr&(pageSize-1), base: reg.base, length: uint64(len(reg.mem)), gen: gen}
	}
	return out, nil
}

// trimDS cuts a scatter list (a copy the caller owns) to its first size
// bytes; a list that holds fewer stays whole.
func trimDS(segs []DataSegment, size uint64) []DataSegment {
	for i := range segs {
		if uint64(segs[i].Len) >= size {
			segs[i].Len = uint32(size)
			return segs[:i+1]
		}
		size -= uint64(segs[i].Len)
	}
	return segs
}

// rxEnd completes the descriptor being received: the consumed receive
// descriptor (length, immediate data, then status; the receive queue's head
// and CQ entry), and tells the peer (a nak at once for an error; success
// rides on the next frame or the idle ack).
func (n *NIC) rxEnd(vi *VI) {
	nv := vi.net
	rx := &nv.rx
	if rx.need {
		if rx.st == StatusDone && rx.desc != nil {
			rx.desc.Length = rx.total
			rx.desc.Imm = rx.imm
		}
		n.recvConsumed(vi, rx.desc, rx.st)
	}
	nv.rxDone = rx.seq + 1
	if rx.st != StatusDone {
		n.cnt.naks.Add(1)
		if p := n.port.Load(); p != nil {
			n.netSend(p.ep, vi, &fhead{kind: kNak, seq: rx.seq, handle: rx.st &^ StatusDone}, nil, nil)
		}
	}
	clear(rx.pieces)
	*rx = netRx{pieces: rx.pieces[:0]}
}

// recvConsumed advances vi's receive queue past its head descriptor d,
// which the caller took off its slot (and the count RecvDone looks at),
// then writes d's status and (CQ1) appends the receive CQ's entry. The queue moves first: once the status
// is visible (CQ2 polls it) the application may repost d, into the slot
// the head leaves.
func (n *NIC) recvConsumed(vi *VI, d *Descriptor, st uint32) {
	off := n.self.viOff(vi.id)
	h := atomic.LoadUint64(n.self.u64(off))
	atomic.StoreUint64(n.self.u64(off), h+1)
	// Counted before the status is stored: a waiter that sees the status
	// (CQ2, or Done on the descriptor) and then calls RecvDone must find
	// the count moved, or RecvDone's look without the lock returns nil
	// for a completed descriptor (TestNetRepostRace, 1 run in 10-20).
	vi.net.recvs.Add(1)
	if d != nil {
		atomic.StoreUint32(&d.Status, st)
	}
	n.recvsDone++
	if cq := atomic.LoadUint32(n.self.u32(off + 20)); cq != 0 && n.o.CQ == CQ1 {
		n.self.cqAppend(cq, vi.id, true)
	}
	n.ring(n.self)
}

// writeAt copies body into the pieces at byte offset off (nothing past
// their end; nothing at all when body already is that memory).
func writeAt(pieces [][]byte, off int, body []byte) {
	for _, p := range pieces {
		if len(body) == 0 {
			return
		}
		if off >= len(p) {
			off -= len(p)
			continue
		}
		dst := p[off:]
		if &dst[0] != &body[0] {
			copy(dst, body)
		}
		body = body[min(len(body), len(dst)):]
		off = 0
	}
}

// place is Placer.Place: a large data frame's body goes straight into the
// registered memory it is for, when that memory is one contiguous piece.
func (n *NIC) place(peer int, head []byte, size int) []byte {
	h, ok := getFhead(head)
	if !ok || h.kind != kData {
		return nil
	}
	vi := n.netVIOf(peer, &h)
	// With frames kept from before a connection the frame is not placed:
	// Frame replays them first (rxBegin here would take a receive
	// descriptor ahead of them).
	if vi == nil || len(n.early) > 0 || len(vi.net.held) > 0 || !n.rxBegin(vi, &h) || vi.net.rx.st != StatusDone {
		return nil
	}
	off := int(h.off)
	for _, p := range vi.net.rx.pieces {
		if off >= len(p) {
			off -= len(p)
			continue
		}
		if len(p)-off >= size {
			return p[off : off+size]
		}
		return nil
	}
	return nil
}

// drainHeld handles vi's held frames in order while receive descriptors
// allow.
func (n *NIC) drainHeld(vi *VI) bool {
	nv := vi.net
	did := false
	for len(nv.held) > 0 {
		f := &nv.held[0]
		if !n.netRecv(vi, &f.h, f.body) {
			return did
		}
		nv.held[0] = heldFrame{}
		nv.held = nv.held[1:]
		did = true
	}
	nv.holding.Store(false)
	return did
}

// serveRead answers an RDMA read request: the data of the registered
// region it names, after checking the handle and the bounds, or the error.
func (n *NIC) serveRead(vi *VI, h *fhead) {
	port := n.port.Load()
	if port == nil {
		return
	}
	resp := fhead{kind: kReadResp, seq: h.seq, total: h.total}
	segs := []DataSegment{{Addr: h.addr, Len: h.total, Handle: MemHandle(h.handle)}}
	phys, err := n.self.nicTranslate(MemHandle(h.handle), h.addr, uint64(h.total), n.physBuf[:0])
	n.physBuf = phys
	var pieces [][]byte
	if err == nil {
		pieces, err = n.localPieces(segs, phys, nil)
	}
	if err != nil {
		resp.flags, resp.handle = fLast, StatusProtectionError
		n.netSend(port.ep, vi, &resp, nil, nil)
		return
	}
	n.sendData(port.ep, vi, &resp, pieces, nil)
}

// netReadResp writes RDMA read data into the initiator's scatter list and
// completes the read at its last frame.
func (n *NIC) netReadResp(vi *VI, h *fhead, body []byte) {
	for _, o := range vi.net.inflight {
		if o.seq != h.seq || o.op != OpRDMARead {
			continue
		}
		if h.handle != 0 {
			o.st = StatusDone | h.handle
		} else if len(body) > 0 {
			writeAt(o.local, int(h.off), body)
		}
		if h.flags&fLast != 0 {
			o.acked = true
			clear(o.local)
			n.retire(vi)
		}
		return
	}
}

// netBreak is Handler.Lost (or a send that failed): every VI connected to
// rank's NIC goes to the error state, and its descriptors, in flight or
// posted, complete with StatusTransportError.
func (n *NIC) netBreak(rank int, err error) {
	for _, vi := range *n.remote.Load() {
		nv := vi.net
		if nv.rank != rank || nv.lost.Load() != nil {
			continue
		}
		nv.lost.Store(&lostErr{fmt.Errorf("%s: %w", nv.where, err)})
		for _, o := range nv.inflight {
			clear(o.local)
			n.complete(vi, o.d, 0, StatusDone|StatusTransportError)
		}
		nv.inflight = nil
		nv.held = nil
		if rx := &nv.rx; rx.active && rx.need {
			// The descriptor being filled is off its slot (takeRecv).
			n.recvConsumed(vi, rx.desc, StatusDone|StatusTransportError)
		}
		nv.rx = netRx{}
		n.lostGen.Add(1)
		n.flushBroken(vi)
	}
	n.ring(n.self)
}

// flushBroken completes the receive descriptors posted on a VI whose
// connection broke with StatusTransportError.
func (n *NIC) flushBroken(vi *VI) {
	off := n.self.viOff(vi.id)
	for atomic.LoadUint64(n.self.u64(off)) != atomic.LoadUint64(n.self.u64(off+8)) {
		h := atomic.LoadUint64(n.self.u64(off))
		vi.mu.Lock()
		d := vi.rqDesc[h%uint64(len(vi.rqDesc))]
		vi.rqDesc[h%uint64(len(vi.rqDesc))] = nil
		vi.mu.Unlock()
		n.recvConsumed(vi, d, StatusDone|StatusTransportError)
	}
}

// pollNet is the engine's turn at the network: it polls the endpoint,
// handles frames that waited for receive descriptors, flushes broken VIs'
// receive queues and, when the engine has nothing else to do (idle) or
// ackEvery are owed, sends the acks that no frame carried. It reports
// whether it did anything.
func (n *NIC) pollNet(p *netPort, idle bool) bool {
	did := false
	if len(n.early) > 0 {
		n.replayEarly()
	}
	// The endpoint is polled again while a poll finds frames (a burst),
	// but not after one completed a receive descriptor: its waiter takes
	// the completion now, and another look at the rings and sockets would
	// delay it (and a ping-pong's answer) for nothing.
	recvs := n.recvsDone
	for i := 0; i < 16 && n.recvsDone == recvs; i++ {
		n.pc.netPolls++
		if !p.ep.Poll() {
			break
		}
		did = true
	}
	for _, vi := range *n.remote.Load() {
		nv := vi.net
		if nv.lost.Load() != nil {
			n.flushBroken(vi)
			continue
		}
		if nv.holding.Load() && n.drainHeld(vi) {
			did = true
		}
		if owed := nv.rxDone - nv.ackSent; owed >= ackEvery || idle && !did && owed != 0 {
			n.netSend(p.ep, vi, &fhead{kind: kAck}, nil, nil)
			did = true
		}
	}
	n.wakeAll()
	return did
}

// Assist runs one pass of the engine on the caller's thread, if the NIC
// reaches other hosts and the engine is not in a pass itself; it reports
// whether the pass did anything. An application that polls for its
// completions assists (Device.Progress, CQ.Wait): a frame that arrives is
// then handled, and a descriptor just posted is put on the wire, by the
// thread that waits for it, with no hand-over to the engine goroutine,
// whose wake-up from epoll would otherwise cost every message across
// hosts a trip through the scheduler. While the application assists, the
// idle engine sleeps on the doorbell futex only, not in the endpoint's
// epoll (which every arriving frame would end), and this process's own
// doorbell rings leave it asleep (sleepAssisted); Sleep hands the network
// back to the engine.
func (n *NIC) Assist() bool {
	if n.port.Load() == nil || !n.eng.mu.TryLock() {
		return false
	}
	defer n.eng.mu.Unlock()
	if n.port.Load() == nil {
		return false
	}
	// The time of the assist is refreshed once in a while, or at once
	// after a Sleep cleared it, as Help does: a waiter's poll that reads
	// the clock costs as much as the pass.
	if n.helps++; n.helps%64 == 0 || n.eng.lastAssist.Load() == 0 {
		n.eng.lastAssist.Store(time.Now().UnixNano())
	}
	did, _ := n.pass(false)
	return did
}

// ackDelay is how long the engine stays idle before it sends the acks no
// frame carried alone: the application's answer usually comes sooner and
// carries them, saving a frame each way.
const ackDelay = 50 * time.Microsecond

// ackDue reports whether a pass (which did descriptor work, or not) sends
// the acks owed alone: once the engine has been idle for ackDelay, or at
// once with flush (the engine is going to sleep).
func (n *NIC) ackDue(did, flush bool) bool {
	switch {
	case did:
		n.eng.idleAt = 0
		return false
	case flush:
		return true
	}
	// The clock is read when the idle stretch starts and then at every
	// ackPeek-th idle pass: an idle pass is a waiter's poll, and a clock
	// reading in every poll would double its cost.
	if n.eng.idleAt == 0 {
		n.eng.idleAt, n.eng.idlePasses = nanotime(), 0
		return false
	}
	if n.eng.idlePasses++; n.eng.idlePasses%ackPeek != 0 {
		return false
	}
	return time.Duration(nanotime()-n.eng.idleAt) >= ackDelay
}

// ackPeek is how many idle passes share one look at the clock in ackDue.
const ackPeek = 8

// assistedFor is how long after an application's last assist the idle
// engine leaves the network to it (sleeping on the futex, a timeout this
// long, instead of in epoll).
const assistedFor = time.Millisecond

// assistedMax bounds the engine's assisted sleep across hosts, which
// grows while the application keeps assisting (engine): an application
// that stops assisting without Sleep (it computes) has its network taken
// over within this, as the wire's keeper looks at an idle endpoint.
const assistedMax = 8 * time.Millisecond

// assisted reports whether an application assisted the engine lately.
func (n *NIC) assisted() bool {
	t := n.eng.lastAssist.Load()
	return t != 0 && time.Duration(time.Now().UnixNano()-t) < assistedFor
}

// closeNet sends the acks still owed and closes the endpoint (engine, at
// exit).
func (n *NIC) closeNet() {
	n.eng.mu.Lock() // no assist from here on
	defer n.eng.mu.Unlock()
	p := n.port.Load()
	if p == nil {
		return
	}
	for _, vi := range *n.remote.Load() {
		if vi.net.lost.Load() == nil && vi.net.rxDone != vi.net.ackSent {
			n.netSend(p.ep, vi, &fhead{kind: kAck}, nil, nil)
		}
	}
	// Give the frames still queued (acks, the last data) a moment to
	// leave: Close writes what the sockets take at once and no more.
	for deadline := time.Now().Add(time.Second); p.ep.Pending() > 0 && time.Now().Before(deadline); {
		if !p.ep.Poll() {
			p.ep.Wait(10 * time.Millisecond)
		}
	}
	n.portMu.Lock()
	n.port.Store(nil) // doorbell rings from now on use the futex only
	n.portMu.Unlock()
	p.ep.Close()
}

// wakeNet wakes the engine asleep in the endpoint's epoll, and reports
// false when the NIC has no endpoint (any more). The lock keeps the wake
// out of the endpoint's Close (closeNet), which frees its eventfd.
func (n *NIC) wakeNet() bool {
	n.portMu.Lock()
	defer n.portMu.Unlock()
	p := n.port.Load()
	if p == nil {
		return false
	}
	p.ep.Wake()
	return true
}

func (h netHandler) Frame(peer int, head, body []byte)            { h.n.netFrame(peer, head, body) }
func (h netHandler) Sent(tok any)                                 { h.n.netSent(tok) }
func (h netHandler) Lost(peer int, err error)                     { h.n.netBreak(peer, err) }
func (h netHandler) Place(peer int, head []byte, size int) []byte { return h.n.place(peer, head, size) }
