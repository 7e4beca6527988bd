package fm

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/match"
)

func init() { adi.Register("fm", func() adi.Device { return new(Device) }) }

// The MPI message kinds, first byte of the MPI header.
const (
	kEager   = 1 // header + the whole message
	kRTS     = 2 // header only: a message waits to be matched (sid)
	kCTS     = 3 // receiver → sender: send n bytes of send sid for receive rid
	kData    = 4 // header + data of a rendezvous, for receive rid
	kDiscard = 5 // receiver → sender: send sid was refused (type mismatch); complete it
)

// mpiHeader is the MPI header at the front of every MPI message:
//
//	[0] kind  [4:8] context  [8:12] tag  [12:16] type signature
//	[16:24] size (message bytes; CTS: bytes to send)  [24:28] sid  [28:32] rid
const mpiHeader = 32

// hMPI is the handler id of every MPI message.
const hMPI = 1

const (
	defaultRndv   = 16384
	livenessCheck = 200 * time.Millisecond
)

// Device is MPI over FM: an adi.Device (and adi.Multisender) whose every
// message is an FM stream. Create it through the adi registry ("fm").
type Device struct {
	e          *Endpoint
	rank, size int
	eng        match.Engine
	rndv       int

	outq   [][]*outMsg // per destination, in posting order
	queued int
	sends  map[uint32]*adi.Request // RTS sent, waiting for CTS
	recvs  map[uint32]*rvRecv      // CTS sent, waiting for DATA
	unexp  map[*unexpMsg]struct{}  // eager messages still arriving into a temporary buffer
	nextID uint32

	lastLive time.Time
	idle     int
	slept    atomic.Bool

	cnt struct{ eager, rndv, multi int64 }
}

// outMsg is an MPI message not yet wholly in packets.
type outMsg struct {
	hdr   [mpiHeader]byte
	dest  int
	dests []int // a multidestination message
	buf   adi.Buffer
	n     int          // data bytes after the header
	req   *adi.Request // completed (Bytes = n) once the message is out; nil for control messages
	st    *Stream
	off   int // data bytes written
	hdrOK bool
	err   error // a destination of a multidestination message died
}

// rvRecv is a receive matched to an RTS, waiting for its DATA.
type rvRecv struct {
	req            *adi.Request
	src, tag, size int
	n              int // bytes that will come
}

// unexpMsg is an eager message that arrived before its receive: its data
// goes into a temporary buffer (the second copy of the unexpected path).
type unexpMsg struct {
	src, tag, size int
	data           []byte
	done           bool
	claimed        *adi.Request // a receive took it before it was complete
	dropped        bool         // the receive that took it refused it
}

// rtsMsg is an unexpected RTS.
type rtsMsg struct{ sid uint32 }

// inState is a handler's place in an incoming MPI message (Stream.Ctx).
type inState struct {
	req            *adi.Request // where the data goes; nil: into um, or nowhere
	um             *unexpMsg
	src, tag, size int
	capacity       int // bytes written to the target; the rest is skipped
	off            int // data bytes taken
	rid            uint32
	rv             bool // a rendezvous DATA stream
}

func parseSize(opts map[string]string, key string, def int) (int, error) {
	v, ok := opts[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("fm: option %s=%q: want a byte count ≥ 0", key, v)
	}
	return n, nil
}

// Init opens the FM endpoint and registers the MPI handler.
func (d *Device) Init(cfg adi.Config) error {
	for k := range cfg.Options {
		switch k {
		case "packet", "slots", "rndv":
		default:
			return fmt.Errorf("fm: unknown option %q (known: packet, slots, rndv)", k)
		}
	}
	packet, err := parseSize(cfg.Options, "packet", DefaultPacket)
	if err != nil {
		return err
	}
	slots, err := parseSize(cfg.Options, "slots", DefaultSlots)
	if err != nil {
		return err
	}
	if d.rndv, err = parseSize(cfg.Options, "rndv", defaultRndv); err != nil {
		return err
	}
	d.e, err = New(Config{Rank: cfg.Rank, Size: cfg.Size, KVS: cfg.KVS, Packet: packet, Slots: slots})
	if err != nil {
		return err
	}
	d.rank, d.size = cfg.Rank, cfg.Size
	d.e.SetHandler(hMPI, d.handle)
	d.outq = make([][]*outMsg, d.size)
	d.sends = map[uint32]*adi.Request{}
	d.recvs = map[uint32]*rvRecv{}
	d.unexp = map[*unexpMsg]struct{}{}
	d.lastLive = time.Now()
	return nil
}

// Finalize releases the segments.
func (d *Device) Finalize() error { return d.e.Release() }

// Counters reports live state and traffic.
func (d *Device) Counters() map[string]int64 {
	s := d.e.Stats
	return map[string]int64{
		"posted_receives":     int64(d.eng.Posted()),
		"unexpected_messages": int64(d.eng.Unexpected()),
		"rendezvous_sends":    int64(len(d.sends)),
		"rendezvous_receives": int64(len(d.recvs)),
		"backlog":             int64(d.queued),
		"eager_messages":      d.cnt.eager,
		"rendezvous_messages": d.cnt.rndv,
		"multi_messages":      d.cnt.multi,
		"packets_sent":        s.PacketsSent,
		"packets_received":    s.PacketsReceived,
		"credits_piggybacked": s.Piggybacked,
		"credit_returns":      s.ExplicitReturns,
	}
}

func (d *Device) newID() uint32 {
	d.nextID++
	if d.nextID == 0 {
		d.nextID = 1
	}
	return d.nextID
}

func putHeader(h *[mpiHeader]byte, kind byte, ctx uint32, tag int, sig uint32, size int, sid, rid uint32) {
	h[0] = kind
	binary.LittleEndian.PutUint32(h[4:], ctx)
	binary.LittleEndian.PutUint32(h[8:], uint32(int32(tag)))
	binary.LittleEndian.PutUint32(h[12:], sig)
	binary.LittleEndian.PutUint64(h[16:], uint64(size))
	binary.LittleEndian.PutUint32(h[24:], sid)
	binary.LittleEndian.PutUint32(h[28:], rid)
}

func (d *Device) dead(op string, rank int) error {
	return adi.Errorf(adi.ErrOther, op, "rank %d (pid %d) has exited", rank, d.e.Pid(rank))
}

// Isend sends eagerly (header and data in one stream) up to the rndv
// threshold, else (and for synchronous sends) by rendezvous: RTS, CTS, DATA.
func (d *Device) Isend(r *adi.Request) error {
	if !d.e.Alive(r.Peer) {
		return d.dead("send", r.Peer)
	}
	n := r.Buf.Size()
	var m outMsg
	m.dest = r.Peer
	if n <= d.rndv && r.Mode != adi.ModeSync {
		d.cnt.eager++
		putHeader(&m.hdr, kEager, r.Context, r.Tag, r.Buf.Type.Signature(), n, 0, 0)
		m.buf, m.n, m.req = r.Buf, n, r
	} else {
		d.cnt.rndv++
		sid := d.newID()
		d.sends[sid] = r
		putHeader(&m.hdr, kRTS, r.Context, r.Tag, r.Buf.Type.Signature(), n, sid, 0)
	}
	d.post(&m)
	return nil
}

// IsendMulti sends r.Buf to every rank in dests in one multidestination
// stream: each packet is written into every destination's region once all
// of them have a credit. Every destination sees an ordinary eager message
// (r.Context, this rank, r.Tag), whatever its size: there is no rendezvous
// for a multidestination message, a late receiver buffers it.
func (d *Device) IsendMulti(r *adi.Request, dests []int) error {
	for _, q := range dests {
		if q < 0 || q >= d.size || q == d.rank {
			return adi.Errorf(adi.ErrRank, "send", "multidestination send to rank %d (world size %d, self %d)", q, d.size, d.rank)
		}
		if !d.e.Alive(q) {
			return d.dead("send", q)
		}
	}
	if len(dests) == 0 {
		r.Complete(adi.Status{Bytes: r.Buf.Size()})
		return nil
	}
	if len(dests) == 1 {
		r.Peer = dests[0]
		return d.Isend(r)
	}
	d.cnt.multi++
	n := r.Buf.Size()
	m := &outMsg{dests: append([]int(nil), dests...), buf: r.Buf, n: n, req: r}
	putHeader(&m.hdr, kEager, r.Context, r.Tag, r.Buf.Type.Signature(), n, 0, 0)
	for _, q := range dests {
		d.outq[q] = append(d.outq[q], m)
	}
	d.queued++
	d.flush()
	return nil
}

// post sends m now if nothing waits before it and credits allow, else
// queues it (a copy) behind its destination's queue.
func (d *Device) post(m *outMsg) {
	if len(d.outq[m.dest]) == 0 && d.push(m) {
		return
	}
	q := new(outMsg)
	*q = *m
	d.outq[m.dest] = append(d.outq[m.dest], q)
	d.queued++
}

// push writes as much of m as credits allow and reports whether all of it
// is out. Data goes one SendPiece per contiguous block of the buffer.
func (d *Device) push(m *outMsg) bool {
	e := d.e
	if m.st == nil {
		var err error
		if m.dests != nil {
			m.st, err = e.BeginMessageMulti(m.dests, mpiHeader+m.n, hMPI)
		} else {
			m.st, err = e.BeginMessage(m.dest, mpiHeader+m.n, hMPI)
		}
		if err != nil {
			d.failMsg(m, adi.Errorf(adi.ErrOther, "send", "%v", err))
			return true
		}
		m.st.batch = true
	}
	defer e.ringPending() // one doorbell per push, not per packet
	room := e.Room(m.st)
	if !m.hdrOK {
		if room < mpiHeader {
			return false
		}
		_ = e.SendPiece(m.st, m.hdr[:])
		room -= mpiHeader
		m.hdrOK = true
	}
	if k := min(room, m.n-m.off); k > 0 {
		st := m.st
		if m.buf.Contiguous() {
			_ = e.SendPiece(st, m.buf.Mem[m.off:m.off+k])
		} else {
			_ = m.buf.Pieces(m.off, k, func(p []byte) error { return e.SendPiece(st, p) })
		}
		m.off += k
	}
	if m.off < m.n {
		return false
	}
	_ = e.EndMessage(m.st)
	m.st = nil
	if m.req != nil {
		m.req.Complete(adi.Status{Bytes: m.n, Err: m.err})
	}
	return true
}

func (d *Device) failMsg(m *outMsg, err error) {
	if m.req != nil && !m.req.Done() {
		m.req.Complete(adi.Status{Err: err})
	}
}

// flush pushes the queued messages, in order per destination. A
// multidestination message moves only once it heads every one of its
// destinations' queues.
func (d *Device) flush() bool {
	did := false
	for q := range d.outq {
		for len(d.outq[q]) > 0 {
			m := d.outq[q][0]
			if m.dests != nil {
				head := true
				for _, x := range m.dests {
					if d.outq[x][0] != m {
						head = false
						break
					}
				}
				if !head || !d.push(m) {
					break
				}
				for _, x := range m.dests {
					d.pop(x)
				}
				d.queued--
				did = true
				continue
			}
			if !d.push(m) {
				break
			}
			d.pop(q)
			d.queued--
			did = true
		}
	}
	return did
}

func (d *Device) pop(q int) {
	d.outq[q][0] = nil
	d.outq[q] = d.outq[q][1:]
	if len(d.outq[q]) == 0 {
		d.outq[q] = nil
	}
}

// Irecv posts a receive: it takes a waiting message or joins the posted queue.
func (d *Device) Irecv(r *adi.Request) error {
	if m := d.eng.Post(r); m != nil {
		d.deliver(r, m)
		return nil
	}
	if r.Peer != adi.AnySource && !d.e.Alive(r.Peer) {
		d.eng.Cancel(r)
		return d.dead("receive", r.Peer)
	}
	return nil
}

// deliver hands a matched unexpected message to receive r.
func (d *Device) deliver(r *adi.Request, m *match.Message) {
	switch h := m.Handle.(type) {
	case *rtsMsg:
		if d.mismatch(r, m.Env, m.Size, m.Sig, h.sid) {
			return
		}
		d.sendCTS(r, m.Env.Source, m.Env.Tag, m.Size, h.sid)
	case *unexpMsg:
		if d.mismatch(r, m.Env, m.Size, m.Sig, 0) {
			h.dropped = true
			return
		}
		if h.done {
			d.finishUnexp(r, h)
			return
		}
		if !d.e.Alive(h.src) {
			delete(d.unexp, h)
			r.Complete(adi.Status{Err: d.dead("receive", h.src)})
			return
		}
		h.claimed = r
	}
}

func (d *Device) finishUnexp(r *adi.Request, h *unexpMsg) {
	n := min(h.size, r.Buf.Size())
	r.Buf.CopyIn(0, h.data[:n])
	r.Complete(recvStatus(r, h.src, h.tag, h.size, n))
}

func recvStatus(r *adi.Request, src, tag, size, n int) adi.Status {
	st := adi.Status{Source: src, Tag: tag, Bytes: n}
	if size > n {
		st.Err = adi.Errorf(adi.ErrTruncate, "receive", "message of %d bytes from rank %d (tag %d) does not fit the %d-byte receive buffer", size, src, tag, r.Buf.Size())
	}
	return st
}

// sendCTS answers a matched RTS: the sender may now send min(size,
// capacity) bytes for receive rid.
func (d *Device) sendCTS(r *adi.Request, src, tag, size int, sid uint32) {
	rid := d.newID()
	n := min(size, r.Buf.Size())
	d.recvs[rid] = &rvRecv{req: r, src: src, tag: tag, size: size, n: n}
	m := outMsg{dest: src}
	putHeader(&m.hdr, kCTS, 0, 0, 0, n, sid, rid)
	d.enqueue(&m)
}

// enqueue queues a control message; handlers use it (they never send from
// inside Extract), and Progress pushes it.
func (d *Device) enqueue(m *outMsg) {
	q := new(outMsg)
	*q = *m
	d.outq[m.dest] = append(d.outq[m.dest], q)
	d.queued++
}

// mismatch checks a matched message's type signature against the
// receive's; on a mismatch the receive completes with ErrType, nothing is
// written, and a rendezvous sender (sid ≠ 0) is released.
func (d *Device) mismatch(r *adi.Request, env adi.Envelope, size int, sig uint32, sid uint32) bool {
	want := r.Buf.Type.Signature()
	if sig == 0 || want == 0 || sig == want || size == 0 {
		return false
	}
	if sid != 0 {
		m := outMsg{dest: env.Source}
		putHeader(&m.hdr, kDiscard, 0, 0, 0, 0, sid, 0)
		d.enqueue(&m)
	}
	r.Complete(adi.Status{Source: env.Source, Tag: env.Tag, Err: adi.Errorf(adi.ErrType, "receive",
		"type signature mismatch: a message of %d bytes from rank %d (tag %d) was sent as a different basic type than the receive's %s", size, env.Source, env.Tag, r.Buf.Type)})
	return true
}

// handle is the MPI handler: it runs for every packet of every incoming
// MPI message. On the first packet it reads the header and decides where
// the data goes; on every packet it scatters the packet's bytes straight
// into that place with one Receive per contiguous block.
func (d *Device) handle(e *Endpoint, s *Stream) {
	st, _ := s.Ctx.(*inState)
	if st == nil {
		var h [mpiHeader]byte
		if e.Receive(s, h[:]) < mpiHeader {
			return // malformed; dropped
		}
		var local inState
		if !d.header(s, &h, &local) {
			return
		}
		st = &local
		if !s.Last() {
			p := new(inState)
			*p = local
			st = p
			s.Ctx = p
		}
	}
	if um := st.um; um != nil && (um.claimed != nil || um.dropped) {
		// A receive took the message while it was still arriving: what
		// came so far moves from the temporary buffer into the receive
		// buffer, and the rest goes there straight from the packets.
		delete(d.unexp, um)
		st.um, st.capacity = nil, 0
		if r := um.claimed; r != nil {
			um.claimed = nil
			st.req, st.capacity = r, min(st.size, r.Buf.Size())
			r.Buf.CopyIn(0, um.data[:min(st.off, st.capacity)])
		}
	}
	for s.Avail() > 0 {
		k := s.Avail()
		if st.off < st.capacity {
			k = min(k, st.capacity-st.off)
			switch {
			case st.req == nil:
				e.Receive(s, st.um.data[st.off:st.off+k])
			case st.req.Buf.Contiguous():
				e.Receive(s, st.req.Buf.Mem[st.off:st.off+k])
			default:
				_ = st.req.Buf.Pieces(st.off, k, func(p []byte) error { e.Receive(s, p); return nil })
			}
		} else {
			e.Skip(s, k)
		}
		st.off += k
	}
	if s.Last() {
		d.finishIn(st)
	}
}

// header handles an MPI header; it reports whether data follows for st.
func (d *Device) header(s *Stream, h *[mpiHeader]byte, st *inState) bool {
	kind := h[0]
	ctx := binary.LittleEndian.Uint32(h[4:])
	tag := int(int32(binary.LittleEndian.Uint32(h[8:])))
	sig := binary.LittleEndian.Uint32(h[12:])
	size := int(binary.LittleEndian.Uint64(h[16:]))
	sid := binary.LittleEndian.Uint32(h[24:])
	rid := binary.LittleEndian.Uint32(h[28:])
	src := s.Source()
	env := adi.Envelope{Context: ctx, Source: src, Tag: tag}
	switch kind {
	case kEager:
		*st = inState{src: src, tag: tag, size: size}
		if r := d.eng.Arrive(env); r != nil {
			if d.mismatch(r, env, size, sig, 0) {
				return true // skip the data
			}
			st.req, st.capacity = r, min(size, r.Buf.Size())
			return true
		}
		um := &unexpMsg{src: src, tag: tag, size: size, data: make([]byte, size)}
		d.unexp[um] = struct{}{}
		d.eng.AddUnexpected(&match.Message{Env: env, Size: size, Data: um.data, Handle: um, Sig: sig})
		st.um, st.capacity = um, size
		return true
	case kRTS:
		if r := d.eng.Arrive(env); r != nil {
			if !d.mismatch(r, env, size, sig, sid) {
				d.sendCTS(r, src, tag, size, sid)
			}
		} else {
			d.eng.AddUnexpected(&match.Message{Env: env, Size: size, Handle: &rtsMsg{sid: sid}, Sig: sig})
		}
		return false
	case kCTS, kDiscard:
		r := d.sends[sid]
		if r == nil {
			return false
		}
		delete(d.sends, sid)
		if kind == kDiscard {
			r.Complete(adi.Status{})
			return false
		}
		m := outMsg{dest: src, buf: r.Buf, n: size, req: r}
		putHeader(&m.hdr, kData, 0, 0, 0, size, 0, rid)
		d.enqueue(&m)
		return false
	case kData:
		rv := d.recvs[rid]
		if rv == nil {
			return false
		}
		*st = inState{req: rv.req, src: rv.src, tag: rv.tag, size: rv.size, capacity: rv.n, rid: rid, rv: true}
		return true
	}
	return false
}

// finishIn completes what an incoming message was for, after its last packet.
func (d *Device) finishIn(st *inState) {
	switch {
	case st.rv:
		rv := d.recvs[st.rid]
		delete(d.recvs, st.rid)
		if rv != nil {
			rv.req.Complete(recvStatus(rv.req, rv.src, rv.tag, rv.size, rv.n))
		}
	case st.req != nil:
		if !st.req.Done() {
			st.req.Complete(recvStatus(st.req, st.src, st.tag, st.size, st.capacity))
		}
	case st.um != nil:
		um := st.um
		um.done = true
		delete(d.unexp, um)
		if um.claimed != nil {
			d.finishUnexp(um.claimed, um)
			um.claimed = nil
		}
	}
}

// Iprobe looks for a matching message that has arrived.
func (d *Device) Iprobe(ctx uint32, src, tag int) (adi.Status, bool, error) {
	if m := d.eng.Probe(ctx, src, tag); m != nil {
		return adi.Status{Source: m.Env.Source, Tag: m.Env.Tag, Bytes: m.Size}, true, nil
	}
	return adi.Status{}, false, nil
}

// CancelRecv withdraws r if no message has matched it.
func (d *Device) CancelRecv(r *adi.Request) bool {
	if d.eng.Cancel(r) {
		r.Complete(adi.Status{Cancelled: true, Source: r.Peer, Tag: r.Tag})
		return true
	}
	return false
}

// Progress extracts every arrived packet (running the MPI handler) and
// pushes queued messages as credits allow.
func (d *Device) Progress() (bool, error) {
	n, err := d.e.Extract()
	if err != nil {
		return true, err
	}
	did := n > 0
	if d.queued > 0 && d.flush() {
		did = true
	}
	if did {
		d.idle = 0
	} else if d.idle++; (d.idle%1024 == 0 || (d.slept.Load() && d.slept.Swap(false))) && time.Since(d.lastLive) > livenessCheck {
		d.checkPeers()
	}
	return did, nil
}

// checkPeers fails the requests that depend on a process that has exited.
func (d *Device) checkPeers() {
	d.lastLive = time.Now()
	for _, q := range d.e.CheckPeers() {
		gone := adi.Errorf(adi.ErrOther, "progress", "rank %d (pid %d) exited while a request depended on it", q, d.e.Pid(q))
		fail := func(r *adi.Request) {
			if r != nil && !r.Done() {
				r.Complete(adi.Status{Err: gone})
			}
		}
		for _, m := range d.outq[q] {
			if m.dests != nil && len(m.dests) > 1 {
				// A multidestination message still goes to the living
				// destinations; the send reports the loss when it completes.
				m.dests = slices.DeleteFunc(m.dests, func(x int) bool { return x == q })
				if m.st != nil {
					d.e.dropDest(m.st, q)
				}
				m.err = gone
				continue
			}
			fail(m.req)
			d.queued--
		}
		d.outq[q] = nil
		for sid, r := range d.sends {
			if r.Peer == q {
				delete(d.sends, sid)
				fail(r)
			}
		}
		for rid, rv := range d.recvs {
			if rv.src == q {
				delete(d.recvs, rid)
				fail(rv.req)
			}
		}
		for _, r := range d.eng.CancelFrom(q) {
			fail(r)
		}
		d.e.Incoming(q, func(s *Stream) {
			if st, ok := s.Ctx.(*inState); ok && st.req != nil {
				fail(st.req)
			}
		})
		for um := range d.unexp {
			if um.src == q {
				delete(d.unexp, um)
				fail(um.claimed)
			}
		}
	}
}

// Seq is the FM doorbell.
func (d *Device) Seq() uint32 { return d.e.Seq() }

// Sleep waits on the doorbell until it moves from seq or t passes.
func (d *Device) Sleep(seq uint32, t time.Duration) {
	d.e.Sleep(seq, t)
	d.slept.Store(true)
}

// Wake rings this process's own doorbell.
func (d *Device) Wake() { d.e.Wake() }
