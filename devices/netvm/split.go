package netvm

import (
	"fmt"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/devkit/recv"
	"github.com/adimpi/adimpi/internal/shm"
)

// This file is the split and pull paths of the rendezvous. A split copy
// shares one large message's copy between both processes: the sender writes
// the head into the receive buffer (process_vm_writev) while the receiver
// reads the tail from the send buffer (process_vm_readv), so that two cores
// copy at once and every byte still moves once. A pull (the pull option, or
// ctsPull) has the receiver read the whole message itself. Either side may be
// non-contiguous: layouts travel as regular runs (vmcopy.go).

// splitCopy shares the copy of a large message whose receive buffer is
// contiguous between both processes (splitSend). It reports false when the
// message does not qualify.
func (d *Device) splitCopy(p *peer, s *outSend, c *ctl) bool {
	if c.addr == 0 {
		return false
	}
	s.n = int(c.n)
	return d.splitSend(p, s, c.ctx, []vrun{{addr: c.addr, n: c.n, count: 1}})
}

// splitSend shares the copy of a large message between both processes: the
// receiver reads the tail from the sender's buffer (process_vm_readv) while
// the sender writes the head into the receiver's (process_vm_writev), so
// that two cores copy at once. remote is the receive buffer's layout for
// the s.n bytes; either side may be non-contiguous (the receiver then gets
// the sender's layout of the tail in a ctlPullIov). It still moves every
// byte once. It reports false when the message does not qualify: too small
// (under the split option, or under 2 bytes, which leave no half to pull),
// a send to self, or a sender's layout too irregular to describe in one batch.
func (d *Device) splitSend(p *peer, s *outSend, rid uint32, remote []vrun) bool {
	n := s.n
	if d.split == 0 || n < max(d.split, 2) || p.seg == d.seg || n/2 >= 1<<31 {
		return false
	}
	s.pull, s.rid, s.remote = n/2, rid, remote
	head := n - s.pull
	sid := d.newID()
	// The pull goes first, so that the receiver starts while this process writes.
	if s.req.Buf.Contiguous() {
		d.post(p, outMsg{ctl: ctl{typ: ctlPull, id: rid, ctx: sid, addr: uint64(uintptr(unsafe.Pointer(&s.req.Buf.Mem[head]))), n: uint64(s.pull)}})
	} else {
		tail := localRuns(s.req.Buf, head, s.pull, d.lruns[:0])
		d.lruns = tail
		if len(tail)*vrunBytes > len(d.scratch) {
			return false
		}
		payload := encodeRuns(nil, tail, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(s.req.Buf.Mem)))))
		d.post(p, outMsg{ctl: ctl{typ: ctlPullIov, id: rid, ctx: sid, tag: int32(s.pull), n: uint64(len(payload))}, data: adi.Bytes(payload)})
	}
	d.pulls[sid] = s
	d.lruns = localRuns(s.req.Buf, 0, head, d.lruns[:0])
	if err := vmCopy(p.pid, true, s.req.Buf.Mem, d.lruns, 0, remote, 0, uint64(head), nil); err != nil {
		delete(d.pulls, sid)
		s.req.Complete(adi.Status{Err: adi.Errorf(adi.ErrOther, "send", "remote write to rank %d: %v", p.rank, err)})
		return true
	}
	d.cnt.remoteWrites++
	d.cnt.bytesOut += int64(head)
	d.post(p, outMsg{ctl: ctl{typ: ctlSC, id: rid}})
	return true
}

// pullTail reads the tail of a split copy from the sender's buffer into the
// receive buffer and tells the sender; if the read fails, the sender writes
// the tail itself.
func (d *Device) pullTail(p *peer, c *ctl) {
	rv := d.recvs[c.id]
	ok := uint64(0)
	if rv != nil {
		n := int(c.n)
		var err error
		if rv.req.Buf.Contiguous() {
			err = shm.RemoteRead(p.pid, uintptr(c.addr), [][]byte{rv.req.Buf.Mem[rv.n-n : rv.n]})
		} else { // the sender wrote the head into this buffer's layout (scatter)
			d.lruns = localRuns(rv.req.Buf, rv.n-n, n, d.lruns[:0])
			err = vmCopy(p.pid, false, rv.req.Buf.Mem, d.lruns, 0, []vrun{{addr: c.addr, n: c.n, count: 1}}, 0, c.n, nil)
		}
		if err == nil {
			ok = 1
			d.cnt.remoteReads++
		} else {
			rv.tail = true
		}
	}
	d.post(p, outMsg{ctl: ctl{typ: ctlPulled, id: c.ctx, n: ok}})
}

// offerAll answers a ctsPull: it sends the receiver this send's layout in a
// ctlPullIov so that the receiver reads the whole message, or, when the
// layout does not fit one batch, streams the message through the eager ring.
func (d *Device) offerAll(p *peer, s *outSend, rid uint32) error {
	d.lruns = localRuns(s.req.Buf, 0, s.n, d.lruns[:0])
	if len(d.lruns)*vrunBytes > len(d.scratch) {
		return d.writeData(p, s.req, 0, s.n, ctl{typ: ctlSC, id: rid})
	}
	payload := encodeRuns(nil, d.lruns, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(s.req.Buf.Mem)))))
	sid := d.newID()
	s.pull, s.rid, s.all = s.n, rid, true
	d.pulls[sid] = s
	d.post(p, outMsg{ctl: ctl{typ: ctlPullIov, id: rid, ctx: sid, tag: int32(s.n), n: uint64(len(payload))}, data: adi.Bytes(payload)})
	return nil
}

// pullTailIov is pullTail for a non-contiguous sender: the ctlPullIov's
// payload lists the sender's layout of the tail (c.tag bytes).
func (d *Device) pullTailIov(p *peer, c *ctl) {
	a, b := p.payload(c)
	raw := append(append(d.scratch[:0], a...), b...)
	p.consume(c)
	rv := d.recvs[c.id]
	ok := uint64(0)
	if rv != nil {
		n := int(c.tag)
		d.runs = decodeRuns(raw, d.runs[:0])
		d.lruns = localRuns(rv.req.Buf, rv.n-n, n, d.lruns[:0])
		var err error
		if len(d.runs) == 1 {
			if d.bounce == nil && bounces(d.runs[0], uint64(len(d.sink))) {
				d.bounce = make([]byte, bounceBytes)
			}
			err = readRemote(p.pid, rv.req.Buf.Mem, d.lruns, 0, d.runs[0], 0, uint64(n), d.bounce, d.sink)
		} else {
			err = vmCopy(p.pid, false, rv.req.Buf.Mem, d.lruns, 0, d.runs, 0, uint64(n), d.sink)
		}
		if err == nil {
			d.cnt.remoteReads++
		}
		switch {
		case err == nil && rv.pull: // the whole message is in
			ok = 1
			delete(d.recvs, c.id)
			rv.req.Complete(recv.Status(rv.req, rv.src, rv.tag, rv.size, rv.n))
		case err == nil:
			ok = 1
		case rv.pull: // the sender streams the message instead
			rv.got = 0
		default:
			rv.tail = true
		}
	}
	d.post(p, outMsg{ctl: ctl{typ: ctlPulled, id: c.ctx, n: ok}})
}

// pulled completes a split send once the receiver has read its tail, or
// writes the tail itself when the receiver could not.
func (d *Device) pulled(p *peer, c *ctl) error {
	s := d.pulls[c.id]
	if s == nil {
		return fmt.Errorf("netvm: PULLED from rank %d for unknown send %d", p.rank, c.id)
	}
	delete(d.pulls, c.id)
	if s.offer { // the receiver has the whole message (and may have read it itself)
		d.stopStream(p, s)
		s.req.Complete(adi.Status{Bytes: s.n})
		return nil
	}
	if c.n == 1 {
		s.req.Complete(adi.Status{Bytes: s.n})
		return nil
	}
	if s.all { // the receiver could not read: stream the message
		return d.writeData(p, s.req, 0, s.n, ctl{typ: ctlSC, id: s.rid})
	}
	head := s.n - s.pull
	d.lruns = localRuns(s.req.Buf, head, s.pull, d.lruns[:0])
	if err := vmCopy(p.pid, true, s.req.Buf.Mem, d.lruns, 0, s.remote, uint64(head), uint64(s.pull), nil); err != nil {
		s.req.Complete(adi.Status{Err: adi.Errorf(adi.ErrOther, "send", "remote write to rank %d: %v", p.rank, err)})
		return nil
	}
	d.cnt.bytesOut += int64(s.pull)
	d.post(p, outMsg{ctl: ctl{typ: ctlSC, id: s.rid}, req: s.req, finish: true, done: s.n})
	return nil
}
