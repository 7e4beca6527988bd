package netvm

import (
	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// This file is the outbox: control messages on their way to a peer's link,
// with the ones that wait for room queued in order in the peer's backlog.
// One outMsg may become many control messages: a stream (stream.go) or a
// layout (scatter.go).

// outMsg is a control message waiting for room, perhaps with a payload. A
// stream is a message's data cut into ctlData chunks as room frees, followed
// by its SC (fin).
type outMsg struct {
	ctl
	data    adi.Buffer
	off     int // payload: packed bytes [off, off+payload) of data
	stream  bool
	offer   bool              // stream: offered for takeover; stops where the receiver's tail begins (offer.go)
	claimed int               // offered stream: the end of the bytes claimed so far
	total   int               // stream: bytes left to send
	fin     ctl               // stream: the SC that follows the data
	layout  *datatype.Segment // layout stream: the receive buffer's pieces still to describe
	runs    []vrun            // data's layout when regular (regularRuns), for fast chunk copies
	finish  bool              // complete req (with Bytes = done) once the message (or stream's SC) is in the ring
	done    int               // bytes the completed send reports
	req     *adi.Request      // the send this message belongs to, for failure on a dead peer
}

// post sends m to p now if the link has room, else queues it behind p's backlog.
func (d *Device) post(p *peer, m outMsg) {
	if len(p.backlog) == 0 && d.put(p, &m) {
		return // the common case allocates nothing
	}
	q := new(outMsg)
	*q = m
	if len(p.backlog) == 0 {
		d.backlogged++
	}
	p.backlog = append(p.backlog, q)
}

// put hands m (and its payload) to p's link if there is room, and reports
// whether it did. A stream puts one chunk per call and reports true only
// when its final SC is in; a layout likewise with its batches.
func (d *Device) put(p *peer, m *outMsg) bool {
	if m.layout != nil {
		return d.putLayout(p, m)
	}
	if m.stream && !d.putChunks(p, m) {
		return false
	}
	if p.net != nil {
		if !p.net.put(m) {
			return false
		}
	} else if !p.link.put(m) {
		d.cnt.ringFull++
		return false
	}
	if hasPayload(m.typ) {
		d.cnt.bytesOut += int64(m.n)
	}
	if m.finish {
		m.req.Complete(adi.Status{Bytes: m.done})
	}
	return true
}

// flush puts what p's backlog holds, in order, as far as there is room; it
// reports whether anything went.
func (d *Device) flush(p *peer) bool {
	did := false
	for len(p.backlog) > 0 && d.put(p, p.backlog[0]) {
		p.backlog[0] = nil
		p.backlog = p.backlog[1:]
		did = true
	}
	if did && len(p.backlog) == 0 {
		d.backlogged--
	}
	return did
}

// copyOut gathers m's payload bytes from off into dst.
func (m *outMsg) copyOut(off int, dst []byte) {
	if m.runs != nil && !m.data.Contiguous() {
		copyRuns(m.data.Mem, m.runs, off, dst, false)
		return
	}
	m.data.CopyOut(off, dst)
}
