package netvm

import "fmt"

// This file is the stream path: a rendezvous message whose data cannot be
// (or, with the stream option, should not be) written straight into the
// receive buffer goes as pipelined ctlData chunks of up to Device.chunk
// bytes through the eager ring, packed by the sender and unpacked by the
// receiver, then SC. Both protocols use it; an offered stream (offer.go)
// may also be read from its end by the receiver.

// putChunks puts the next chunks of stream m as room allows; once the data
// is all out, m becomes its SC and it reports true.
func (d *Device) putChunks(p *peer, m *outMsg) bool {
	chunk := d.chunk
	if p.net != nil {
		// Over the XDP wire, chunks that fill their frames: 1 MiB
		// chunks each ended in a short frame.
		chunk = p.net.ep.ChunkSize(p.rank, headLen, netChunk)
	}
	for m.total > 0 {
		k := min(m.total, chunk)
		if m.offer {
			if k = d.claim(p, m, k); k == 0 { // the receiver has read the rest
				m.total = 0
				break
			}
		}
		c := &outMsg{ctl: ctl{typ: ctlData, id: m.id, n: uint64(k)}, data: m.data, off: m.off, runs: m.runs}
		if !d.put(p, c) {
			return false
		}
		d.cnt.chunks++
		m.off += k
		m.total -= k
	}
	m.stream = false
	m.ctl = m.fin
	return true
}

// dataIn takes a ctlData chunk into its receive.
func (d *Device) dataIn(p *peer, c *ctl) error {
	rv := d.recvs[c.id]
	if rv == nil && d.taken[c.id] { // taken over: the bytes are in already
		p.consume(c)
		return nil
	}
	if rv == nil {
		return fmt.Errorf("netvm: data from rank %d for unknown receive %d", p.rank, c.id)
	}
	a, b := p.payload(c)
	if rv.sid == 0 {
		rv.copyIn(rv.got, a)
		rv.copyIn(rv.got+len(a), b)
		rv.got += int(c.n)
		p.consume(c)
		return nil
	}
	// an offered stream: this process may have read the chunk's last bytes itself
	d.chunkIn(rv, a, b)
	p.consume(c)
	if rv.back < rv.n {
		d.offerDone(p, rv, c.id)
	}
	return nil
}

// copyIn scatters a stream chunk's bytes into the receive buffer from its
// packed byte off.
func (rv *rvRecv) copyIn(off int, src []byte) {
	if len(src) == 0 {
		return
	}
	if rv.layout() != nil && !rv.req.Buf.Contiguous() {
		copyRuns(rv.req.Buf.Mem, rv.lr, off, src, true)
		return
	}
	rv.req.Buf.CopyIn(off, src)
}

// layout is the receive buffer's layout when it is regular (regularRuns), else nil.
func (rv *rvRecv) layout() []vrun {
	if !rv.lrSet {
		rv.lrSet = true
		rv.lr = regularRuns(rv.req.Buf)
	}
	return rv.lr
}
