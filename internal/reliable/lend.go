package reliable

// Bulk frames built in the link's memory. A Link that is also a Lender
// lends the transport memory of its own (the AF_XDP socket's UMEM) to cut
// the frames of a large message into: the message's bytes are then copied
// once on the sending side, into the frame the link sends, where through
// Link.Send they are copied into a frame of the transport's and again into
// the link. The transport keeps a lent frame until the peer acknowledges
// it, for retransmission, and never writes into it while the link still
// holds an earlier transmission of it. Small messages and control frames
// keep to Link.Send.

// Lender is a Link that lends memory to build frames in.
type Lender interface {
	// Lend takes a buffer of the link's, at least MTU bytes long, and an
	// id that names it; ok is false when none is free.
	Lend() (id int, buf []byte, ok bool)
	// SendLent transmits the first n bytes of buffer id; false means the
	// link has no room now or still holds an earlier transmission of it.
	SendLent(id, n int) bool
	// LentBusy reports whether the link still holds a transmission of
	// buffer id (its memory must not change).
	LentBusy(id int) bool
	// Return gives buffer id back; the transport no longer uses it.
	Return(id int)
}

// lendFrame gives slot sl a lent buffer for a fragment of m, when the
// link lends and what is left of m fills a frame (a large message's
// fragment): the frame's memory, or nil (use the slot's own buffer).
func (t *Transport) lendFrame(sl *slot, m *outMsg) []byte {
	if t.lender == nil || len(m.body)-m.off < t.payload {
		return nil
	}
	id, buf, ok := t.lender.Lend()
	if !ok {
		return nil
	}
	if len(buf) < t.cfg.MTU {
		t.lender.Return(id)
		return nil
	}
	sl.lent = id + 1
	t.cnt.Lent++
	return buf[:t.cfg.MTU]
}

// unlend returns the lent buffer of slot sl, if it has one, and puts its
// own buffer back in its place.
func (t *Transport) unlend(sl *slot) {
	if sl.lent == 0 {
		return
	}
	t.lender.Return(sl.lent - 1)
	sl.lent = 0
	sl.buf = sl.own
}

// emitLent is emit for a frame in a lent buffer: it stamps and tags the
// frame in place and hands it to the link; false when the link has no
// room or still holds the buffer's last transmission (a frame sent again
// before the link is done with it: it goes once).
func (t *Transport) emitLent(p *peer, sl *slot) bool {
	id := sl.lent - 1
	if t.lender.LentBusy(id) {
		return false
	}
	f := sl.buf[:sl.n]
	t.restamp(p, f)
	return t.lender.SendLent(id, sl.n+tagLen)
}
