package netvm

import (
	"encoding/binary"
	"fmt"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/recv"
	"github.com/adimpi/adimpi/adi/match"
)

// matched is the default protocol (eager > 0): every message is announced
// by its sender, small ones as EAGER with the payload in the eager ring,
// large ones as RTS, and matched at the receiver by package adi/match; a
// matched RTS is answered by CTS (rndv.go) and the data moves by one of the
// rendezvous paths.
type matched struct {
	d   *Device
	eng match.Engine
	// inlineIn counts the eager messages that eagerIn wrote from their
	// slot straight into a posted receive (inline_receives): every small
	// message's path, empty ones included.
	inlineIn int64
}

// send starts a send: eager when small (and not synchronous), else RTS.
func (m *matched) send(p *peer, r *adi.Request) error {
	d := m.d
	n := r.Buf.Size()
	if n <= d.eager && r.Mode != adi.ModeSync {
		d.cnt.eagerMsgs++
		d.post(p, outMsg{ctl: ctl{typ: ctlEager, ctx: r.Context, tag: int32(r.Tag), id: r.Buf.Type.Signature(), n: uint64(n)},
			data: r.Buf, req: r, finish: true, done: n})
		return nil
	}
	d.cnt.rndvMsgs++
	id := d.newID()
	d.sends[id] = &outSend{req: r, peer: p}
	d.post(p, outMsg{ctl: ctl{typ: ctlRTS, ctx: r.Context, tag: int32(r.Tag), id: id, addr: uint64(r.Buf.Type.Signature()), n: uint64(n)}, req: r})
	return nil
}

// sendShort puts an eager message into p's rings at once, if they have room
// and nothing waits in the backlog before it.
func (m *matched) sendShort(ctx uint32, p *peer, tag int, sig uint32, data []byte) bool {
	d := m.d
	if len(data) > d.eager || len(p.backlog) != 0 {
		return false
	}
	if len(data) <= inlineMax && p.net == nil {
		if !p.link.putSmall(ctx, int32(tag), sig, data) {
			d.cnt.ringFull++
			return false
		}
		d.cnt.eagerMsgs++
		d.cnt.bytesOut += int64(len(data))
		return true
	}
	msg := outMsg{ctl: ctl{typ: ctlEager, ctx: ctx, tag: int32(tag), id: sig, n: uint64(len(data))}, data: adi.Bytes(data)}
	if !d.put(p, &msg) {
		return false
	}
	d.cnt.eagerMsgs++
	return true
}

// recv posts a receive: it takes a waiting message or joins the posted queue.
func (m *matched) recv(r *adi.Request) {
	if msg := m.eng.Post(r); msg != nil {
		m.deliver(r, msg)
	}
}

// deliver hands a matched message to receive r.
func (m *matched) deliver(r *adi.Request, msg *match.Message) {
	if m.d.mismatch(r, msg.Env, msg.Size, msg.Sig, msg.Handle) {
		return
	}
	if msg.Handle == nil { // eager: the payload was copied on arrival
		n := min(msg.Size, r.Buf.Size())
		r.Buf.CopyIn(0, msg.Data[:n])
		r.Complete(recv.Status(r, msg.Env.Source, msg.Env.Tag, msg.Size, n))
		return
	}
	m.d.sendCTS(r, msg.Env.Source, msg.Env.Tag, msg.Size, msg.Handle.(uint32))
}

func (m *matched) probe(ctx uint32, src, tag int) (adi.Status, bool, error) {
	st, ok := m.eng.ProbeStatus(ctx, src, tag)
	return st, ok, nil
}

func (m *matched) cancelRecv(r *adi.Request) bool { return m.eng.Withdraw(r) }

// handle handles every control message of this protocol and its
// rendezvous paths.
func (m *matched) handle(p *peer, c *ctl) error {
	d := m.d
	switch c.typ {
	case ctlEager:
		m.eagerIn(p, c)
	case ctlRTS:
		m.rtsIn(p, c)
	case ctlCTS:
		return d.ctsIn(p, c)
	case ctlPull:
		d.pullTail(p, c)
	case ctlPullIov:
		d.pullTailIov(p, c)
	case ctlOffer:
		d.offered(p, c)
	case ctlPulled:
		return d.pulled(p, c)
	case ctlIov:
		return d.scatter(p, c)
	case ctlData:
		return d.dataIn(p, c)
	case ctlSC:
		return d.scIn(p, c)
	default:
		return fmt.Errorf("netvm: control message of unknown type %d from rank %d", c.typ, p.rank)
	}
	return nil
}

// eagerIn matches an eager message: into a posted receive, or copied out of
// the ring to wait as an unexpected message. It reports whether the message
// took the last posted receive: the device's drain then stops before the
// sender's next slot, whose line the sender has fetched for writing
// (prefetchAhead), so that the waiter whose receive this was returns
// without a cross-core fetch on its way, and the sender's next write
// without another. It is safe: what is left in the ring waits for the next
// Progress, in order, as if it had arrived a moment later, and a drain
// stops early only by completing a receive, so that with no receive
// posted every drain empties the ring.
func (m *matched) eagerIn(p *peer, c *ctl) bool {
	d := m.d
	env := adi.Envelope{Context: c.ctx, Source: p.rank, Tag: int(c.tag)}
	size := int(c.n)
	if r := m.eng.Arrive(env); r != nil && (c.id == r.Buf.Type.Signature() || !d.mismatch(r, env, size, c.id, nil)) {
		// The receive's size from its fields by pointer: Buffer.Size takes
		// the Buffer by value, a copy through the stack whose wide stores
		// the narrow loads after it wait for.
		rb := &r.Buf
		n := 0
		if rb.Type != nil {
			n = min(size, rb.Count*rb.Type.Size())
		}
		if n == size && size <= inlineMax && p.net == nil && (n == 0 || rb.Type.Contiguous()) {
			// The whole message in the slot (inline), empty ones too:
			// straight into the receive, without the ring's staging copy
			// (payload) or the consume that has nothing to free.
			inlineInto(rb.Mem, n, c.addr)
			m.inlineIn++
			r.Complete(adi.Status{Source: p.rank, Tag: env.Tag, Bytes: n})
			return m.eng.Posted() == 0 // an inline payload holds nothing of the eager ring (consume)
		}
		a, b := p.payload(c)
		k := min(n, len(a))
		if n == 0 {
			// An empty message (or an empty receive): nothing to copy.
		} else if rb.Type.Contiguous() {
			copy(r.Buf.Mem[copy(r.Buf.Mem[:k], a):n], b)
		} else {
			r.Buf.CopyIn(0, a[:k])
			r.Buf.CopyIn(k, b[:n-k])
		}
		if n == size {
			r.Complete(adi.Status{Source: p.rank, Tag: env.Tag, Bytes: n})
		} else {
			r.Complete(recv.Status(r, p.rank, env.Tag, size, n))
		}
		p.consume(c)
		return m.eng.Posted() == 0
	} else if r == nil {
		a, b := p.payload(c)
		data := make([]byte, size)
		copy(data[copy(data, a):], b)
		m.eng.AddUnexpected(&match.Message{Env: env, Size: size, Data: data, Sig: c.id})
	}
	p.consume(c)
	return false
}

// inlineInto writes the first n bytes (at most inlineMax) of an inline
// payload, the slot's little-endian word w, into mem: a word in one store,
// nothing for an empty message, else through a staging word.
func inlineInto(mem []byte, n int, w uint64) {
	switch n {
	case 0:
	case inlineMax:
		binary.LittleEndian.PutUint64(mem[:inlineMax], w)
	default:
		var b [inlineMax]byte
		binary.LittleEndian.PutUint64(b[:], w)
		copy(mem[:n], b[:n])
	}
}

// rtsIn matches an RTS: a posted receive answers it with CTS, else it waits
// as an unexpected message.
func (m *matched) rtsIn(p *peer, c *ctl) {
	d := m.d
	env := adi.Envelope{Context: c.ctx, Source: p.rank, Tag: int(c.tag)}
	if r := m.eng.Arrive(env); r != nil {
		if !d.mismatch(r, env, int(c.n), uint32(c.addr), c.id) {
			d.sendCTS(r, p.rank, env.Tag, int(c.n), c.id)
		}
	} else {
		m.eng.AddUnexpected(&match.Message{Env: env, Size: int(c.n), Handle: c.id, Sig: uint32(c.addr)})
	}
}

// poll has nothing to do: the offered streams' takeovers are the device's.
func (m *matched) poll() {}

func (m *matched) peerGone(p *peer, fail func(*adi.Request)) {
	for _, r := range m.eng.CancelFrom(p.rank) {
		fail(r)
	}
}

func (m *matched) counters(c map[string]int64) {
	c["posted_receives"] = int64(m.eng.Posted())
	c["unexpected_messages"] = int64(m.eng.Unexpected())
	c["inline_receives"] = m.inlineIn
}

// mismatch checks a matched message's type signature code against the
// receive's. When both are known and differ, MPI's rule that the signatures
// match is broken: the receive completes with ErrType, nothing is written
// into it, and a rendezvous sender (handle = its send id) is released with a
// zero-byte CTS so that it completes too.
func (d *Device) mismatch(r *adi.Request, env adi.Envelope, size int, sig uint32, handle any) bool {
	st, bad := recv.Mismatch(r, env, size, sig)
	if !bad {
		return false
	}
	if sid, ok := handle.(uint32); ok {
		d.post(d.peers[env.Source], outMsg{ctl: ctl{typ: ctlCTS, id: sid, tag: ctsDiscard}})
	}
	r.Complete(st)
	return true
}
