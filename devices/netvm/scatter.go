package netvm

import (
	"fmt"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// This file is the scatter path (the scatter option): a non-contiguous
// receive buffer of large enough blocks sends its layout, as regular runs in
// ctlIov batches through the eager ring, and the sender writes the blocks in
// place with one process_vm_writev per 1024 of them, sharing the copy with
// the receiver when the layout fits one batch (splitSend).

// putLayout writes the next batches of a non-contiguous receive buffer's
// layout (runs of equal pieces, see vrun) into p's eager ring, as ring
// space allows; it reports true once the whole layout is out.
func (d *Device) putLayout(p *peer, m *outMsg) bool {
	mem := m.data.Mem
	base := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	maxRuns := len(d.scratch) / vrunBytes
	for m.total > 0 {
		at := m.layout.Pos()
		runs, covered := d.runs[:0], 0
		for covered < m.total && covered < 1<<30 {
			start := m.layout.Pos()
			piece, ok := m.layout.Next(mem, min(m.total, 1<<30)-covered)
			if !ok {
				break
			}
			runs = addPiece(runs, uint64(uintptr(unsafe.Pointer(&piece[0])))-base, uint64(len(piece)))
			if len(runs) > maxRuns {
				runs = runs[:maxRuns]
				_ = m.layout.Seek(start)
				break
			}
			covered += len(piece)
		}
		d.runs = runs
		batch := encodeRuns(d.scratch[:0], runs, base)
		c := &outMsg{ctl: ctl{typ: ctlIov, ctx: m.ctx, id: m.id, tag: int32(covered), n: uint64(len(batch))}, data: adi.Bytes(batch)}
		if !d.put(p, c) {
			_ = m.layout.Seek(at)
			return false
		}
		m.total -= covered
	}
	return true
}

// scatter writes the next part of a send straight into the receive buffer
// pieces that a ctlIov batch lists (one process_vm_writev per 1024 pieces);
// after the last batch it sends SC. A layout that arrives in one batch may
// have its copy shared with the receiver (splitSend).
func (d *Device) scatter(p *peer, c *ctl) error {
	s := d.scatters[c.id]
	if s == nil {
		return fmt.Errorf("netvm: layout from rank %d for unknown send %d", p.rank, c.id)
	}
	a, b := p.payload(c)
	raw := append(append(d.scratch[:0], a...), b...)
	p.consume(c)
	covered := int(c.tag)
	if s.off == 0 && covered == s.n {
		remote := decodeRuns(raw, nil)
		if d.splitSend(p, s, c.ctx, remote) {
			delete(d.scatters, c.id)
			return nil
		}
		d.runs = remote
	} else {
		d.runs = decodeRuns(raw, d.runs[:0])
	}
	d.lruns = localRuns(s.req.Buf, s.off, covered, d.lruns[:0])
	if err := vmCopy(p.pid, true, s.req.Buf.Mem, d.lruns, 0, d.runs, 0, uint64(covered), nil); err != nil {
		delete(d.scatters, c.id)
		s.req.Complete(adi.Status{Err: adi.Errorf(adi.ErrOther, "send", "remote write to rank %d: %v", p.rank, err)})
		return nil
	}
	d.cnt.remoteWrites++
	d.cnt.bytesOut += int64(covered)
	s.off += covered
	if s.off == s.n {
		delete(d.scatters, c.id)
		d.post(p, outMsg{ctl: ctl{typ: ctlSC, id: c.ctx}, req: s.req, finish: true, done: s.n})
	}
	return nil
}

// bigBlocks reports whether a segment's first block holds at least min
// bytes, and rewinds the segment.
func bigBlocks(seg *datatype.Segment, mem []byte, min int) bool {
	piece, ok := seg.Next(mem, min)
	_ = seg.Seek(0)
	return ok && len(piece) >= min
}
