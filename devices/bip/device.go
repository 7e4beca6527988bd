package bip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/recv"
	"github.com/adimpi/adimpi/adi/devkit/wire"
	"github.com/adimpi/adimpi/adi/match"
)

func init() { adi.Register("bip", func() adi.Device { return new(Device) }) }

// The capabilities the device offers besides adi.Device.
var (
	_ adi.Device          = (*Device)(nil)
	_ adi.OptionHelper    = (*Device)(nil)
	_ adi.CrossHost       = (*Device)(nil)
	_ adi.ShortSender     = (*Device)(nil)
	_ adi.LockedCompleter = (*Device)(nil)
)

// MPI-BIP message types, carried as the BIP short message's tag.
const (
	msgEager  uint32 = iota + 1 // an MPI message small enough for one short message (payload follows the header)
	msgReq                      // long protocol 1/3: a message waits to be matched (size, signature, send id)
	msgAck                      // long protocol 2/3: matched; the BIP long receive with tag aux is posted for n bytes
	msgCredit                   // explicit credit return (uncounted: it uses the queue's reserved slots)
)

// Header of every MPI-BIP short message.
const (
	hCtx     wire.U32 = 0  // context id
	hTag     wire.I32 = 4  // MPI tag
	hSig     wire.U32 = 8  // type signature code
	hID      wire.U32 = 12 // REQ: send id; ACK: the send id it answers
	hSize    wire.U64 = 16 // EAGER/REQ: message size; ACK: bytes to send
	hCredits wire.U32 = 24 // cumulative count of the receiver's counted messages consumed (piggybacked credits)
	hAux     wire.U32 = 28 // ACK: BIP tag of the posted long receive
	hFlags   wire.U32 = 32 // ACK: ackDiscard
	hdrSize           = 40

	ackDiscard = 1 // the receiver refused the message (type signature mismatch)

	// reserved queue slots per sender, for explicit credit messages
	reserved = 2
)

type hdr struct {
	ctx, sig, id, aux, flags uint32
	tag                      int32
	size                     uint64
}

// outMsg is an MPI-BIP message waiting for credit or queue space.
type outMsg struct {
	typ  uint32
	h    hdr
	data adi.Buffer   // eager payload
	req  *adi.Request // an eager send, completed once its message is in the queue
}

type pstate struct {
	*cursors       // used, granted, consumed, reported: the peer's (bip.go), shared with C code (fastpath.go)
	peer     *peer // the endpoint's link to it
	backlog  []*outMsg
	waitSlot []*lrecv // matched long receives waiting for a BIP long-receive slot
	waitSend []*lsend // acknowledged sends waiting for a BIP long-send slot
}

// lsend is a send in the long protocol.
type lsend struct {
	req  *adi.Request
	peer int
	tag  uint32 // ACK: BIP tag of the receive
}

// lrecv is a receive matched to a REQ.
type lrecv struct {
	req       *adi.Request
	src, tag  int
	size, n   int
	sendID    uint32
	bipPosted bool
}

// Device is MPI over BIP (MPI-BIP). Create it through the adi registry
// (mpirun -device bip).
type Device struct {
	ep     *Endpoint
	size   int
	eng    match.Engine
	eager  int // largest MPI payload sent eagerly
	credit uint32
	pc     []*pstate
	sends  map[uint32]*lsend // REQ sent, waiting for ACK
	nextID uint32
	err    error // a protocol error found inside a callback
	lost   error // a peer on another host became unreachable: Progress reports it once

	// Completions held back while frames wait in the network endpoint: a
	// request completes only once every frame queued before its completion
	// is with the kernel, so that a process that stops calling Progress
	// (MPI_Finalize's PMI barrier, say) leaves nothing its peers wait for
	// behind it, as a message written into shared memory does not.
	held []heldCompletion

	spare []*outMsg // backlog entries already put, for reuse (send)

	// Unexpected eager messages already received, with their copy of the
	// data, for reuse (keepEager, deliver).
	unexpFree []*match.Message

	cnt struct {
		eager, long, creditWaits, creditMsgs, ackWaits int64
	}
}

// mpiMaxLong is the MPI device's maxlong when -device-opt does not set it:
// a receiver may then post the long receives of the next messages, and
// acknowledge them, while the data of the current one flows, so that a
// stream of rendezvous messages does not wait for the receiver to run
// between every two of them (DMPI's pipelining; BIP's API keeps BIP's 1).
const mpiMaxLong = 4

// mpiQueue is the MPI device's queue when -device-opt does not set it: a
// window of 64 eager messages (osu_mbw_mr's, and a typical halo or
// pipeline depth) then fits the credits (queue − 2), and a sender streams
// it without waiting for the receiver's credit messages half way; BIP's
// API keeps its 32.
const mpiQueue = 64 + reserved

// deviceOptions are the BIP options of the MPI device: opts over
// DefaultOptions, with mpiMaxLong and mpiQueue unless opts set maxlong
// and queue.
func deviceOptions(opts map[string]string) (Options, error) {
	o, err := ParseOptions(opts)
	if _, set := opts["maxlong"]; err == nil && !set {
		o.MaxLong = mpiMaxLong
	}
	if _, set := opts["queue"]; err == nil && !set {
		o.Queue = mpiQueue
	}
	return o, err
}

// Init wires up the BIP endpoint.
func (d *Device) Init(cfg adi.Config) error {
	o, err := deviceOptions(cfg.Options)
	if err != nil {
		return err
	}
	if d.ep, err = newEndpoint(cfg.Rank, cfg.Size, cfg.KVS, o, cfg.Hosts); err != nil {
		return err
	}
	d.size = cfg.Size
	d.eager = o.Short - hdrSize
	d.credit = uint32(o.Queue - reserved)
	d.pc = make([]*pstate, cfg.Size)
	for i := range d.pc {
		d.pc[i] = &pstate{cursors: d.ep.peers[i].cursors, peer: d.ep.peers[i]}
	}
	d.sends = map[uint32]*lsend{}
	d.ep.OnPeerGone = d.peerGone
	d.ep.takeNet = d.takeNet
	return nil
}

// takeNet takes an eager message from a peer on another host as its frame
// arrives (Endpoint.takeNet), as drain takes one from the queue: the
// network's handler delivers it to its receive in the poll that read it,
// with no write into the queue and no second look at the queues. The
// other messages (the long protocol's, explicit credits) go through the
// queue as before, and the eager messages behind them with them.
func (d *Device) takeNet(src int, typ uint32, b []byte) bool {
	if typ != msgEager {
		return false
	}
	if !d.eagerIn(src, d.pc[src], b) {
		d.handle(src, typ, b)
	}
	return true
}

// OptionHelp describes the device's options, one line each (adi.OptionHelper).
func (d *Device) OptionHelp() string { return OptionTable.Help() }

// CrossHost reports that the device reaches ranks on other hosts: BIP's
// short queue, credits and long rendezvous travel as frames (net.go).
func (d *Device) CrossHost() bool { return true }

type heldCompletion struct {
	r  *adi.Request
	st adi.Status
}

// complete completes r with st, or holds the completion back while frames
// wait in the network endpoint.
func (d *Device) complete(r *adi.Request, st adi.Status) {
	if d.ep.net != nil && d.ep.net.pending > 0 {
		d.held = append(d.held, heldCompletion{r, st})
		return
	}
	r.Complete(st)
}

// release completes the held requests once no frame waits in the endpoint.
func (d *Device) release() bool {
	if len(d.held) == 0 || d.ep.net.pending > 0 {
		return false
	}
	for i, h := range d.held {
		if !h.r.Done() {
			h.r.Complete(h.st)
		}
		d.held[i] = heldCompletion{}
	}
	d.held = d.held[:0]
	return true
}

// Finalize releases the endpoint.
func (d *Device) Finalize() error { return d.ep.Close() }

func (d *Device) newID() uint32 {
	d.nextID++
	if d.nextID == 0 {
		d.nextID = 1
	}
	return d.nextID
}

// Counters reports live objects and traffic. rendezvous_sends and
// rendezvous_receives count this process's long-protocol operations at
// every stage (REQ out, acknowledged, waiting for BIP's bound, streaming).
// With peers on other hosts, wire_* are the network endpoint's totals
// (frames and body bytes each way, frames that waited for their socket,
// bodies read straight into a receive buffer) and the completions held
// until queued frames leave.
func (d *Device) Counters() map[string]int64 {
	backlog, waitSlot, waitSend := 0, 0, 0
	for _, p := range d.pc {
		backlog += len(p.backlog)
		waitSlot += len(p.waitSlot)
		waitSend += len(p.waitSend)
	}
	s := d.ep.Stats
	c := map[string]int64{
		"posted_receives":     int64(d.eng.Posted()),
		"unexpected_messages": int64(d.eng.Unexpected()),
		"rendezvous_sends":    int64(len(d.sends) + waitSend + len(d.ep.sends)),
		"rendezvous_receives": int64(waitSlot + len(d.ep.recvs)),
		"backlog":             int64(backlog),
		"waiting_bip_bound":   int64(waitSlot + waitSend),
		"eager_messages":      d.cnt.eager,
		"long_messages":       d.cnt.long,
		"credit_waits":        d.cnt.creditWaits,
		"credit_messages":     d.cnt.creditMsgs,
		"bip_bound_waits":     d.cnt.ackWaits,
		"bip_short_sent":      s.ShortSent,
		"bip_short_received":  s.ShortRecv,
		"bip_queue_full":      s.QueueFull,
		"bip_long_sent":       s.LongSent,
		"bip_long_received":   s.LongRecv,
		"bip_remote_writes":   s.RemoteWrites,
		"bip_chunks":          s.Chunks,
		"bytes_sent":          s.BytesSent,
	}
	if n := d.ep.net; n != nil && n.ep != nil {
		w := n.ep.Counters()
		c["wire_frames_out"], c["wire_frames_in"] = w.FramesOut, w.FramesIn
		c["wire_bytes_out"], c["wire_bytes_in"] = w.BytesOut, w.BytesIn
		c["wire_queued"], c["wire_placed"] = w.Queued, w.Placed
		c["wire_held_completions"] = int64(len(d.held))
		maps.Copy(c, n.ep.XDPCounters())
	}
	return c
}

// Isend: eager when the message fits a short message (and is not
// synchronous) — straight into the peer's queue (SendShort) when nothing
// waits before it, else through the backlog — else the three-message long
// protocol.
func (d *Device) Isend(r *adi.Request) error {
	// The buffer by pointer: Buffer's methods take it by value, a copy
	// through the stack on the per-message path.
	rb := &r.Buf
	n, sig := 0, uint32(0)
	if rb.Type != nil {
		n, sig = rb.Count*rb.Type.Size(), rb.Type.Signature()
	}
	eager := n <= d.eager && r.Mode != adi.ModeSync
	if eager && (rb.Type == nil || rb.Type.Contiguous()) && d.SendShort(r.Context, r.Peer, r.Tag, sig, rb.Mem[:n]) {
		r.Complete(adi.Status{Bytes: n}) // in the receiver's queue: done
		return nil
	}
	if !d.ep.Alive(r.Peer) {
		return d.ep.exited("send", r.Peer)
	}
	if eager {
		d.cnt.eager++
		d.send(r.Peer, outMsg{typ: msgEager, h: hdr{ctx: r.Context, tag: int32(r.Tag), sig: sig, size: uint64(n)}, data: r.Buf, req: r})
		return nil
	}
	d.cnt.long++
	id := d.newID()
	d.sends[id] = &lsend{req: r, peer: r.Peer}
	d.send(r.Peer, outMsg{typ: msgReq, h: hdr{ctx: r.Context, tag: int32(r.Tag), sig: sig, size: uint64(n), id: id}})
	return nil
}

// send puts m into the peer's BIP queue now if credit and space allow, else
// behind the peer's backlog (order is kept).
func (d *Device) send(dest int, m outMsg) {
	p := d.pc[dest]
	if len(p.backlog) == 0 && d.put(dest, &m) {
		return // the common case allocates nothing
	}
	var q *outMsg
	if k := len(d.spare); k > 0 {
		q, d.spare = d.spare[k-1], d.spare[:k-1]
	} else {
		q = new(outMsg)
	}
	*q = m
	p.backlog = append(p.backlog, q)
}

// maxSpare bounds d.spare: a burst that once backlogged many messages
// keeps at most this many entries for later ones.
const maxSpare = 256

// flushBacklog puts what p's backlog holds, in order, as far as credits
// and queue space allow, and reports whether anything went. The entries
// put go to d.spare, and the rest move to the front of the backlog's
// array: a stream that keeps running out of credit allocates nothing.
func (d *Device) flushBacklog(dest int, p *pstate) bool {
	k := 0
	for k < len(p.backlog) && d.put(dest, p.backlog[k]) {
		m := p.backlog[k]
		*m = outMsg{}
		if len(d.spare) < maxSpare {
			d.spare = append(d.spare, m)
		}
		k++
	}
	if k == 0 {
		return false
	}
	n := copy(p.backlog, p.backlog[k:])
	clear(p.backlog[n:])
	p.backlog = p.backlog[:n]
	return true
}

// put writes m as one BIP short message if a credit (for counted messages)
// and queue space are there; it reports whether m is done with.
func (d *Device) put(dest int, m *outMsg) bool {
	p := d.pc[dest]
	counted := m.typ != msgCredit
	if counted && p.used-p.granted >= d.credit {
		d.cnt.creditWaits++
		return false
	}
	n := hdrSize
	if m.typ == msgEager {
		n += int(m.h.size)
	}
	credits := p.consumed
	ok, err := d.ep.TrySend(dest, m.typ, n, func(b []byte) {
		putHdr(b, &m.h, credits)
		if m.typ == msgEager && m.h.size > 0 {
			m.data.CopyOut(0, b[hdrSize:hdrSize+int(m.h.size)])
		}
	})
	if err != nil {
		if m.req != nil {
			d.complete(m.req, adi.Status{Err: adi.Errorf(adi.ErrOther, "send", "rank %d: %v", dest, err)})
		}
		return true
	}
	if !ok {
		return false
	}
	if counted {
		p.used++
	}
	p.reported = credits
	if m.req != nil {
		d.complete(m.req, adi.Status{Bytes: int(m.h.size)})
	}
	return true
}

// putHdr writes h, with the piggybacked credit count, into b.
func putHdr(b []byte, h *hdr, credits uint32) {
	hCtx.Set(b, h.ctx)
	hTag.Set(b, h.tag)
	hSig.Set(b, h.sig)
	hID.Set(b, h.id)
	hSize.Set(b, h.size)
	hCredits.Set(b, credits)
	hAux.Set(b, h.aux)
	hFlags.Set(b, h.flags)
}

// SendShort writes an eager message straight into a peer's BIP queue, with
// no request and no backlog entry, when nothing waits in the peer's
// backlog, a credit is free and the peer shares this host
// (adi.ShortSender): the path of a blocking MPI Send of a small message,
// and the first try of an eager Isend. The MPI-BIP header and the data go
// straight into the slot (putEager), an 8-byte payload in one move. To a
// peer on another host they go into the frame's head, when the wire
// takes the frame at once (sendShortNet); otherwise the send takes the
// request path, whose completion waits until the frame is with the
// kernel.
func (d *Device) SendShort(ctx uint32, peer, tag int, sig uint32, data []byte) bool {
	n := len(data)
	if n > d.eager || uint(peer) >= uint(d.size) {
		return false
	}
	p := d.pc[peer]
	if len(p.backlog) > 0 || p.used-p.granted >= d.credit {
		return false
	}
	e := d.ep
	pe := p.peer
	if !e.Alive(peer) {
		return false
	}
	if pe.net != nil {
		return d.sendShortNet(pe, p, ctx, tag, sig, data)
	}
	s := e.reserveShort(pe)
	if s == nil {
		return false
	}
	credits := p.consumed
	b := s[qHdr : qHdr+hdrSize+n]
	putEager(b, ctx, int32(tag), sig, uint64(n), credits)
	if n == 8 {
		// A word (a double, an int64) in one move rather than a call
		// of memmove.
		*(*[8]byte)(b[hdrSize:]) = *(*[8]byte)(data)
	} else {
		copy(b[hdrSize:], data)
	}
	e.publishShort(pe, s, msgEager, hdrSize+n)
	p.used++
	p.reported = credits
	d.cnt.eager++
	return true
}

// sendShortNet is SendShort to a peer on another host: the MPI-BIP header
// and the data go straight into the head of the short message's frame,
// which the wire hands to the kernel at once or not at all
// (Endpoint.sendShortNow). A send that returns true has then left the
// process, as one through a request does when it completes.
func (d *Device) sendShortNet(pe *peer, p *pstate, ctx uint32, tag int, sig uint32, data []byte) bool {
	e := d.ep
	n := len(data)
	b := e.shortNetBuf(pe, hdrSize+n)
	if b == nil {
		return false
	}
	credits := p.consumed
	putEager(b, ctx, int32(tag), sig, uint64(n), credits)
	if n == 8 {
		*(*[8]byte)(b[hdrSize:]) = *(*[8]byte)(data)
	} else {
		copy(b[hdrSize:], data)
	}
	if !e.sendShortNow(pe, msgEager, hdrSize+n) {
		return false
	}
	p.used++
	p.reported = credits
	d.cnt.eager++
	return true
}

// putEager writes the MPI-BIP header of an eager message into b: putHdr
// with no send id, aux or flags, as five 8-byte stores.
func putEager(b []byte, ctx uint32, tag int32, sig uint32, size uint64, credits uint32) {
	_ = b[hdrSize-1]
	binary.LittleEndian.PutUint64(b[0:], uint64(ctx)|uint64(uint32(tag))<<32) // hCtx, hTag
	binary.LittleEndian.PutUint64(b[8:], uint64(sig))                         // hSig, hID
	binary.LittleEndian.PutUint64(b[16:], size)                               // hSize
	binary.LittleEndian.PutUint64(b[24:], uint64(credits))                    // hCredits, hAux
	binary.LittleEndian.PutUint64(b[32:], 0)                                  // hFlags, padding
}

// CompletesUnderLock declares adi.LockedCompleter: the device completes
// requests only inside the core's calls into it (Isend, Irecv, Progress),
// never from a goroutine of its own; the network endpoint's goroutines
// only queue frames that Progress reads.
func (d *Device) CompletesUnderLock() {}

// Irecv posts a receive: it takes a waiting message or joins the posted queue.
func (d *Device) Irecv(r *adi.Request) error {
	if r.Peer != adi.AnySource && !d.ep.Alive(r.Peer) {
		return d.ep.exited("receive", r.Peer)
	}
	if m := d.eng.Post(r); m != nil {
		d.deliver(r, m)
	}
	return nil
}

// deliver hands a matched message to receive r.
func (d *Device) deliver(r *adi.Request, m *match.Message) {
	if id, ok := m.Handle.(uint32); ok {
		d.matchLong(r, m.Env, m.Size, m.Sig, id)
		return
	}
	if !d.mismatch(r, m.Env, m.Size, m.Sig) {
		n := min(m.Size, r.Buf.Size())
		r.Buf.CopyIn(0, m.Data[:n])
		d.complete(r, recv.Status(r, m.Env.Source, m.Env.Tag, m.Size, n))
	}
	if cap(m.Data) <= unexpPooled && len(d.unexpFree) < maxUnexpFree {
		d.unexpFree = append(d.unexpFree, m) // delivered: nothing refers to it any more
	}
}

// Unexpected eager messages of up to unexpPooled bytes keep their record
// and their copy's memory for later ones once delivered, up to
// maxUnexpFree of them: a stream of small messages that arrive before
// their receives allocates nothing per message.
const (
	unexpPooled  = 256
	maxUnexpFree = 256
)

// keepEager keeps an eager message that no posted receive matched, with a
// copy of its data, as unexpected.
func (d *Device) keepEager(env adi.Envelope, sig uint32, data []byte) {
	var m *match.Message
	var mem []byte
	if k := len(d.unexpFree); k > 0 && len(data) <= unexpPooled {
		m, d.unexpFree = d.unexpFree[k-1], d.unexpFree[:k-1]
		mem = m.Data[:0]
	} else {
		m = new(match.Message)
		if len(data) <= unexpPooled {
			mem = make([]byte, 0, unexpPooled) // fits any message it may be reused for
		}
	}
	*m = match.Message{Env: env, Size: len(data), Data: append(mem, data...), Sig: sig}
	d.eng.AddUnexpected(m)
}

// mismatch completes r with ErrType when the message's type signature
// differs from the receive's (both known), writing nothing into it.
func (d *Device) mismatch(r *adi.Request, env adi.Envelope, size int, sig uint32) bool {
	st, bad := recv.Mismatch(r, env, size, sig)
	if bad {
		d.complete(r, st)
	}
	return bad
}

// matchLong handles a receive matched to a REQ: post the BIP long receive
// (when BIP's bound allows) and acknowledge.
func (d *Device) matchLong(r *adi.Request, env adi.Envelope, size int, sig, sendID uint32) {
	if d.mismatch(r, env, size, sig) {
		d.send(env.Source, outMsg{typ: msgAck, h: hdr{id: sendID, flags: ackDiscard}})
		return
	}
	n := min(size, r.Buf.Size())
	if n == 0 {
		d.send(env.Source, outMsg{typ: msgAck, h: hdr{id: sendID}})
		d.complete(r, recv.Status(r, env.Source, env.Tag, size, 0))
		return
	}
	p := d.pc[env.Source]
	p.waitSlot = append(p.waitSlot, &lrecv{req: r, src: env.Source, tag: env.Tag, size: size, n: n, sendID: sendID})
	d.postLongs(env.Source)
}

// postLongs posts BIP long receives for matched receives from src while
// BIP's bound allows, acknowledging each.
func (d *Device) postLongs(src int) {
	p := d.pc[src]
	for len(p.waitSlot) > 0 {
		lr := p.waitSlot[0]
		tag := d.newID()
		_, err := d.ep.PostLongN(src, tag, lr.req.Buf, lr.n, func(n, _ int, err error) {
			if err != nil {
				d.complete(lr.req, adi.Status{Source: lr.src, Tag: lr.tag, Err: err})
			} else {
				d.complete(lr.req, recv.Status(lr.req, lr.src, lr.tag, lr.size, lr.n))
			}
			d.postLongs(src)
		})
		if errors.Is(err, ErrBusy) {
			d.cnt.ackWaits++
			return
		}
		p.waitSlot[0] = nil
		p.waitSlot = p.waitSlot[1:]
		if err != nil {
			d.complete(lr.req, adi.Status{Source: lr.src, Tag: lr.tag, Err: err})
			continue
		}
		d.send(src, outMsg{typ: msgAck, h: hdr{id: lr.sendID, aux: tag, size: uint64(lr.n)}})
	}
}

// startLongs starts BIP long sends for acknowledged sends to dest while
// BIP's bound allows.
func (d *Device) startLongs(dest int) {
	p := d.pc[dest]
	for len(p.waitSend) > 0 {
		s := p.waitSend[0]
		_, err := d.ep.StartLong(dest, s.tag, s.req.Buf, func(n int, err error) {
			if err != nil {
				d.complete(s.req, adi.Status{Err: err})
			} else {
				d.complete(s.req, adi.Status{Bytes: n})
			}
			d.startLongs(dest)
		})
		if errors.Is(err, ErrBusy) {
			d.cnt.ackWaits++
			return
		}
		p.waitSend[0] = nil
		p.waitSend = p.waitSend[1:]
		if err != nil {
			d.complete(s.req, adi.Status{Err: err})
		}
	}
}

// Iprobe looks for a matching message that has arrived.
func (d *Device) Iprobe(ctx uint32, src, tag int) (adi.Status, bool, error) {
	st, ok := d.eng.ProbeStatus(ctx, src, tag)
	return st, ok, nil
}

// CancelRecv withdraws r if no message has matched it.
func (d *Device) CancelRecv(r *adi.Request) bool {
	return d.eng.Withdraw(r)
}

// drain consumes src's short messages, starting with s, the slot of the
// first (peekShort), and at most a queue's worth (so that one busy sender
// cannot hold the others up), and tells src once how far it got. An eager
// message goes straight to eagerIn, with no call through a function value;
// the others to handle.
func (d *Device) drain(src int, p *pstate, s []byte) {
	e := d.ep
	for k := 0; s != nil && k < e.opt.Queue; k++ {
		posted := d.eng.Posted()
		n := int(qLen.Get(s))
		if typ, b := qTag.Get(s), s[qHdr:qHdr+n]; typ != msgEager || !d.eagerIn(src, p, b) {
			d.handle(src, typ, b)
		}
		e.takeShort(p.peer)
		if posted > 0 && d.eng.Posted() == 0 {
			// The message took the last posted receive: the caller
			// waits for nothing more, and returns at once rather than
			// look at the next slot first. That slot's line, fetched
			// for writing by a sender that streams (publishShort),
			// would cost a cross-core fetch now and another when the
			// sender writes it; the next Progress looks at it.
			break
		}
		s = e.peekShort(p.peer)
	}
	e.publishHead(p.peer, false)
}

// takeCredits reads the credits piggybacked on src's message b and counts
// b against the credits this process owes src (unless it is an explicit
// credit message, which uses the reserved slots).
func (d *Device) takeCredits(p *pstate, b []byte, counted bool) {
	if c := hCredits.Get(b); c-p.granted < 1<<31 {
		p.granted = c
	}
	if counted {
		p.consumed++
	}
}

// eagerIn takes an eager message from src (b: the MPI-BIP header and the
// data), every small message's path: the header is read in place and the
// data copied straight into the matching receive, an 8-byte payload in one
// move, or kept as an unexpected message. It reports false, having done
// nothing, for a message whose header does not describe it (handle then
// reports it).
func (d *Device) eagerIn(src int, p *pstate, b []byte) bool {
	if len(b) < hdrSize || hSize.Get(b) != uint64(len(b)-hdrSize) {
		return false
	}
	d.takeCredits(p, b, true)
	data := b[hdrSize:]
	size, tag, sig := len(data), int(hTag.Get(b)), hSig.Get(b)
	env := adi.Envelope{Context: hCtx.Get(b), Source: src, Tag: tag}
	r := d.eng.Arrive(env)
	if r == nil {
		d.keepEager(env, sig, data)
		return true
	}
	// The receive's buffer by pointer: Buffer's methods take it by value,
	// a copy through the stack on the per-message path.
	rb := &r.Buf
	if rb.Type == nil {
		d.complete(r, recv.Status(r, src, tag, size, 0))
		return true
	}
	if sig != rb.Type.Signature() && d.mismatch(r, env, size, sig) {
		return true
	}
	n := min(size, rb.Count*rb.Type.Size())
	switch {
	case n == 0:
	case !rb.Type.Contiguous():
		r.Buf.CopyIn(0, data[:n])
	case n == 8:
		*(*[8]byte)(rb.Mem) = *(*[8]byte)(data)
	default:
		copy(rb.Mem[:n], data)
	}
	if n == size && (d.ep.net == nil || d.ep.net.pending == 0) {
		// complete's common case, written out: it is too large to be
		// inlined, and this is every small message's completion.
		r.Complete(adi.Status{Source: src, Tag: tag, Bytes: n})
	} else {
		d.complete(r, recv.Status(r, src, tag, size, n))
	}
	return true
}

// handle processes one MPI-BIP message from src (b valid only during the
// call) that eagerIn did not take.
func (d *Device) handle(src int, typ uint32, b []byte) {
	if len(b) < hdrSize {
		d.fail(fmt.Errorf("bip: short message of %d bytes from rank %d: no MPI-BIP header", len(b), src))
		return
	}
	p := d.pc[src]
	d.takeCredits(p, b, typ != msgCredit)
	env := adi.Envelope{Context: hCtx.Get(b), Source: src, Tag: int(hTag.Get(b))}
	sig, size, id := hSig.Get(b), int(hSize.Get(b)), hID.Get(b)
	switch typ {
	case msgEager:
		d.fail(fmt.Errorf("bip: eager message from rank %d claims %d bytes of data in a short message of %d", src, size, len(b)))
	case msgReq:
		if r := d.eng.Arrive(env); r != nil {
			d.matchLong(r, env, size, sig, id)
		} else {
			d.eng.AddUnexpected(&match.Message{Env: env, Size: size, Handle: id, Sig: sig})
		}
	case msgAck:
		s := d.sends[id]
		if s == nil {
			d.fail(fmt.Errorf("bip: acknowledgement from rank %d for unknown send %d", src, id))
			return
		}
		delete(d.sends, id)
		switch {
		case hFlags.Get(b)&ackDiscard != 0:
			d.complete(s.req, adi.Status{})
		case size == 0:
			d.complete(s.req, adi.Status{})
		default:
			s.tag = hAux.Get(b)
			d.pc[src].waitSend = append(d.pc[src].waitSend, s)
			d.startLongs(src)
		}
	case msgCredit:
	default:
		d.fail(fmt.Errorf("bip: MPI-BIP message of unknown type %d from rank %d", typ, src))
	}
}

func (d *Device) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Progress drains every short-message queue, returns credits, flushes
// backlogs and advances BIP's long operations. A peer's backlog is flushed
// right after its queue is drained, whose messages bring the credits it
// waits for, and before an explicit credit return, which the backlog's
// messages may make needless (each carries the credits piggybacked).
func (d *Device) Progress() (bool, error) {
	did := false
	e := d.ep
	for src, p := range d.pc {
		if s := e.peekShort(p.peer); s != nil {
			d.drain(src, p, s)
			did = true
		}
		if len(p.backlog) > 0 && d.flushBacklog(src, p) {
			did = true
		}
		if p.consumed-p.reported >= d.credit/2 {
			if d.put(src, &outMsg{typ: msgCredit}) {
				d.cnt.creditMsgs++
			}
		}
	}
	if e.net != nil || len(e.sends) > 0 || len(e.recvs) > 0 {
		if e.Progress() {
			did = true
		}
		if e.TookShortNet() {
			// The network put a message in a queue that the loop above
			// has passed: take it in this pass, not the next (a whole
			// poll of the network later, on every small message's path).
			for src, p := range d.pc {
				if p.peer.net == nil {
					continue
				}
				if s := e.peekShort(p.peer); s != nil {
					d.drain(src, p, s)
				}
			}
		}
	} else if e.live.Idle() && e.checkPeers() {
		// Endpoint.Progress with no long operation and no network: the
		// idle poll's liveness count, and now and then a look at the
		// peers' processes.
		e.runDone()
		did = true
	}
	if len(d.held) > 0 && d.release() {
		did = true
	}
	if d.err != nil || d.lost != nil {
		if d.err != nil {
			return true, d.err
		}
		// A peer on another host is unreachable and no request carries
		// the error: the job ends, as when a rank dies.
		err := d.lost
		d.lost = nil
		return true, err
	}
	return did, nil
}

// peerGone fails every request that waits on a dead peer. A peer on
// another host that became unreachable while no request of this process
// depended on it makes the next Progress fail instead, so that the job
// ends all the same (its process may live on, unseen by the launcher).
func (d *Device) peerGone(rank int, gone error) {
	failed := d.ep.peers[rank].failed
	fail := func(r *adi.Request) {
		if r != nil && !r.Done() {
			r.Complete(adi.Status{Err: gone})
			failed++
		}
	}
	defer func() {
		if failed == 0 && d.ep.Remote(rank) && d.lost == nil {
			d.lost = gone
		}
	}()
	p := d.pc[rank]
	for _, m := range p.backlog {
		fail(m.req)
	}
	p.backlog = nil
	for id, s := range d.sends {
		if s.peer == rank {
			delete(d.sends, id)
			fail(s.req)
		}
	}
	for _, lr := range p.waitSlot {
		fail(lr.req)
	}
	p.waitSlot = nil
	for _, s := range p.waitSend {
		fail(s.req)
	}
	p.waitSend = nil
	for _, r := range d.eng.CancelFrom(rank) {
		fail(r)
	}
}

// Seq is the endpoint's doorbell.
func (d *Device) Seq() uint32 { return d.ep.Seq() }

// Sleep waits on the doorbell (safe without the core's lock).
func (d *Device) Sleep(seq uint32, t time.Duration) { d.ep.Sleep(seq, t) }

// Wake makes every Sleep return.
func (d *Device) Wake() { d.ep.Wake() }
