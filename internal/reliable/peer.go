package reliable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
)

// errBye is a peer's goodbye: it closed deliberately.
var errBye = errors.New("the rank closed its end")

// peer is the state of one peer pair: what is sent and not yet
// acknowledged, what waits for credits, what has arrived early, and the
// message being reassembled.
type peer struct {
	rank int
	mac  net.HardwareAddr
	gone error // set once the peer is lost or said goodbye

	// Sending.
	una, next uint32 // oldest unacknowledged and next sequence numbers
	sendNext  uint32 // first frame not yet handed to the link
	credit    int    // frames the peer accepts beyond una
	slots     [Window]slot
	queue     []outMsg
	unsent    bool
	rto       time.Duration
	// Times are readings of clock (nanoseconds; 0: none).
	rtoAt    int64 // when the retransmission timer expires (0: stopped)
	progress int64 // last time something was acknowledged
	srtt     time.Duration
	probed   bool  // the tail-loss probe went since the last progress
	rackAt   int64 // when the latest frame the peer is known to hold was sent
	heard    int64 // when the last authenticated frame came from the peer
	keptAt   int64 // when the last keepalive probe went

	// Receiving.
	expect  uint32 // next sequence number to deliver
	stash   [Window]stashed
	stashed int
	ackOwed int   // frames delivered since the last acknowledgement sent
	owedAt  int64 // when the last of them was delivered in order, or the first came early (clock)
	ackNow  bool  // a duplicate or early frame came: acknowledge at once
	early   int   // early frames since the last frame delivered in order
	asm     reassembly

	hdr     [offKind]byte // the start of every frame to the peer (see start)
	started bool

	// The header tag's state after the fixed start of the frames to the
	// peer and of those from it (see sipPrefix).
	txTag, rxTag sipPrefix
}

// owes reports whether something to p is not yet acknowledged: frames in
// flight, frames the link has not taken yet, or messages waiting for
// credits. While it does, the retransmission timer runs.
func (p *peer) owes() bool { return p.next != p.una || len(p.queue) > 0 }

// blocked reports whether the peer's credits keep more frames from being
// cut: as many are outstanding as it grants.
func (p *peer) blocked() bool { return int(p.next-p.una) >= min(Window, p.credit) }

// slot is a data frame kept until it is acknowledged.
type slot struct {
	buf    []byte // the plain frame: header and payload (own, or lent: see lend.go)
	own    []byte // the transport's buffer of the slot
	lent   int    // 1 + the id of the link's buffer buf is, or 0
	n      int
	sent   bool  // handed to the link at least once
	sacked bool  // the peer holds it (selective acknowledgement)
	retx   bool  // sent more than once (no round-trip sample)
	sentAt int64 // clock
}

// stashed is a frame that arrived before its turn.
type stashed struct {
	buf []byte
	n   int
	seq uint32
	ok  bool
}

// outMsg is a message not yet wholly cut into frames.
type outMsg struct {
	head, body []byte
	off        int // body bytes already in frames
	started    bool
	tok        any
}

// reassembly is the message whose fragments are arriving.
type reassembly struct {
	on     bool
	head   []byte
	dst    []byte
	n      int
	placed bool
	buf    []byte // the transport's own body buffer, reused
}

// fragment cuts m into frames while the peer grants credits and reports
// whether the whole message is in frames.
func (t *Transport) fragment(p *peer, m *outMsg) bool {
	for {
		if p.blocked() {
			return false
		}
		sl := &p.slots[p.next%Window]
		t.unlend(sl) // acknowledged Window frames ago
		f := t.lendFrame(sl, m)
		if f == nil {
			if sl.own == nil {
				sl.own = make([]byte, t.cfg.MTU)
			}
			f = sl.own
		}
		var flags byte
		n, head, total := 0, 0, 0
		if !m.started {
			flags = flagFirst
			head, total = len(m.head), len(m.head)+len(m.body)
			n = copy(f[hdrLen:hdrLen+t.payload], m.head)
			m.started = true
		}
		k := copy(f[hdrLen+n:hdrLen+t.payload], m.body[m.off:])
		m.off += k
		n += k
		if m.off == len(m.body) {
			flags |= flagLast
			if flags&flagFirst == 0 && n < t.payload {
				t.cnt.Tails++
			}
		}
		putHeader(f, t.start(p), kindData, flags, p.next, n, head, total)
		*sl = slot{buf: f, own: sl.own, lent: sl.lent, n: hdrLen + n}
		p.next++
		p.unsent = true
		t.arm(p)
		if flags&flagLast != 0 {
			return true
		}
	}
}

// start is the start of every frame to p (see frameStart), made once its
// MAC address is known.
func (t *Transport) start(p *peer) *[offKind]byte {
	if !p.started {
		p.hdr = frameStart(p.mac, t.cfg.MAC, t.cfg.Job, p.rank, t.cfg.Rank)
		p.started = true
	}
	return &p.hdr
}

func (p *peer) sackBits() sackMap {
	var m sackMap
	if p.stashed == 0 {
		return m
	}
	for i := range Window - 1 {
		s := p.expect + 1 + uint32(i)
		if st := &p.stash[s%Window]; st.ok && st.seq == s {
			m.set(i)
		}
	}
	return m
}

// emit stamps the frame f (header and payload, with room for the tag
// after them) with what this rank has received from p, so that every
// frame, a retransmission too, carries the latest acknowledgements, tags
// it and hands it to the link; false means the link has no room.
func (t *Transport) emit(p *peer, f []byte) bool {
	t.restamp(p, f)
	return t.cfg.Link.Send(f[:len(f)+tagLen])
}

// restamp is emit's stamping and tagging of f, in place: the cumulative
// acknowledgement, the credits and, when early frames are held, the
// selective acknowledgement with flagSack (without it the frame's
// selective acknowledgement is empty, and its bytes are neither written
// nor read).
func (t *Transport) restamp(p *peer, f []byte) {
	le := binary.LittleEndian
	le.PutUint32(f[offAck:], p.expect)
	le.PutUint16(f[offWindow:], uint16(t.cfg.RecvWindow))
	f[offFlags] &^= flagSack
	if p.stashed > 0 {
		if sack := p.sackBits(); !sack.zero() {
			f[offFlags] |= flagSack
			sack.put(f)
		}
	}
	t.auth.sign(f[:len(f)+tagLen], len(f), &p.txTag)
}

// emitSlot emits the data frame of slot sl, from a lent buffer in place.
func (t *Transport) emitSlot(p *peer, sl *slot) bool {
	if sl.lent != 0 {
		return t.emitLent(p, sl)
	}
	return t.emit(p, sl.buf[:sl.n])
}

// transmit hands the frames not yet sent to the link, in order, until it
// is full.
func (t *Transport) transmit(p *peer) {
	for ; p.sendNext != p.next; p.sendNext++ {
		sl := &p.slots[p.sendNext%Window]
		if !t.emitSlot(p, sl) {
			p.unsent = true
			return
		}
		t.cnt.PacketsOut++
		sl.sent, sl.sentAt = true, t.now
		p.ackOwed, p.ackNow = 0, false
	}
	p.unsent = false
}

// arm starts the retransmission timer, and the count towards DeadAfter,
// when something becomes due to p and nothing was: from a frame's cutting
// into a slot (or a message's queueing), not its first transmission, so
// that frames the link never takes (a TX ring the kernel no longer
// drains) or that no credits let out lose the peer in time too.
func (t *Transport) arm(p *peer) {
	if p.rtoAt == 0 {
		p.rtoAt = t.now + at(p.rto)
		p.progress = t.now
	}
}

// resend hands a kept frame to the link again.
func (t *Transport) resend(p *peer, sl *slot) {
	if t.emitSlot(p, sl) {
		t.cnt.PacketsOut++
		t.cnt.Retransmits++
		sl.sentAt, sl.retx = t.now, true
	}
}

// pump moves queued messages into frames as credits allow, reports the
// messages wholly taken as sent, and transmits.
func (t *Transport) pump(p *peer) {
	for len(p.queue) > 0 && t.fragment(p, &p.queue[0]) {
		tok := p.queue[0].tok
		p.queue[0] = outMsg{}
		p.queue = p.queue[1:]
		if tok != nil {
			t.sent(tok)
		}
	}
	if len(p.queue) == 0 {
		p.queue = nil
	}
	t.transmit(p)
}

// sendAck sends an acknowledgement on its own.
func (t *Transport) sendAck(p *peer) {
	if p.mac == nil || !t.control(p, kindAck, 0) {
		return
	}
	t.cnt.AcksOut++
	p.ackOwed, p.ackNow = 0, false
}

// control sends a frame without payload (an acknowledgement, a
// keepalive probe, a goodbye).
func (t *Transport) control(p *peer, kind, flags byte) bool {
	f := t.ackBuf
	putHeader(f, t.start(p), kind, flags, 0, 0, 0, 0)
	if !t.emit(p, f[:hdrLen]) {
		return false
	}
	t.cnt.PacketsOut++
	return true
}

// input handles one frame from the link, in the pieces it came in.
func (t *Transport) input(pieces [][]byte) {
	if t.old { // the turn reused an idle turn's reading: date the frame now
		t.read()
	}
	le := binary.LittleEndian
	f, size := pieces[0], len(pieces[0])
	for _, pc := range pieces[1:] {
		size += len(pc)
	}
	if len(pieces) > 1 && (t.auth.whole || !t.inPlace(f)) {
		// The tag covers the payload, or the piece does not hold what the
		// frame's message needs together: take the frame whole.
		t.gather = t.gather[:0]
		for _, pc := range pieces {
			t.gather = append(t.gather, pc...)
		}
		f, pieces = t.gather, nil
	}
	if len(pieces) == 1 {
		pieces = nil // one piece: f is the frame
	}
	if size < hdrLen+tagLen || len(f) < hdrLen || binary.BigEndian.Uint16(f[offType:]) != EtherType || le.Uint64(f[offJob:]) != t.cfg.Job {
		t.cnt.Stray++
		return
	}
	n := hdrLen + int(le.Uint16(f[offLen:])) + tagLen
	// The tag's prefix state of the peer the frame names (its tag is not
	// checked yet: the state only saves work, see sipPrefix).
	var pre *sipPrefix
	if from := le.Uint32(f[offFrom:]); from < uint32(len(t.peers)) && t.peers[from] != nil {
		pre = &t.peers[from].rxTag
	}
	if n > size || !t.verify(f, pieces, n, pre) {
		t.cnt.Forged++
		return
	}
	h := parse(f)
	if h.to != t.cfg.Rank || h.from < 0 || h.from >= t.cfg.Size || h.from == t.cfg.Rank {
		t.cnt.Stray++
		return
	}
	t.cnt.PacketsIn++
	p := t.peer(h.from)
	if p.gone != nil {
		return
	}
	if p.mac == nil {
		p.mac = append(net.HardwareAddr(nil), f[offSrc:offSrc+6]...)
	}
	p.heard = t.now
	if h.kind == kindBye {
		t.lose(p, errBye)
		return
	}
	t.acked(p, &h)
	if h.kind == kindAck && h.flags&flagProbe != 0 {
		p.ackNow = true // a keepalive probe: answer it
	}
	if h.kind == kindData {
		t.data(p, &h, f[:hdrLen], t.payloadOf(f, pieces, h.plen))
	}
}

// inPlace reports whether a frame in pieces, whose first piece is f, can
// be taken in where it lies: the first piece holds the header and, for a
// message's first fragment, the message's head; a fragment that is a
// whole message is taken whole (it is delivered from one buffer).
func (t *Transport) inPlace(f []byte) bool {
	if len(f) < hdrLen {
		return false
	}
	fl := f[offFlags]
	if fl&flagFirst == 0 {
		return true
	}
	return fl&flagLast == 0 && len(f) >= hdrLen+int(binary.LittleEndian.Uint16(f[offHead:]))
}

// verify checks the tag of the frame of n bytes (tag included) whose first
// piece is f; pieces, when not nil, are all its pieces (two or more). pre
// is the prefix state of the peer the frame names, or nil.
func (t *Transport) verify(f []byte, pieces [][]byte, n int, pre *sipPrefix) bool {
	if pieces == nil {
		return t.auth.verify(f[:n], pre)
	}
	// The tag covers the header only (else the frame was taken whole).
	copyOut(t.tag[:], pieces, n-tagLen)
	return t.auth.verifyHeader(f[:hdrLen], t.tag[:], pre)
}

// payloadOf is the payload of plen bytes of a frame, as slices of the
// frame's pieces (or of f, when pieces is nil).
func (t *Transport) payloadOf(f []byte, pieces [][]byte, plen int) [][]byte {
	t.segs = t.segs[:0]
	if pieces == nil {
		return append(t.segs, f[hdrLen:hdrLen+plen])
	}
	off := hdrLen
	for _, pc := range pieces {
		if plen == 0 {
			break
		}
		if off >= len(pc) {
			off -= len(pc)
			continue
		}
		k := min(len(pc)-off, plen)
		t.segs = append(t.segs, pc[off:off+k])
		plen -= k
		off = 0
	}
	return t.segs
}

// copyOut copies the bytes from off of the concatenated pieces into dst.
func copyOut(dst []byte, pieces [][]byte, off int) {
	for _, pc := range pieces {
		if len(dst) == 0 {
			return
		}
		if off >= len(pc) {
			off -= len(pc)
			continue
		}
		k := copy(dst, pc[off:])
		dst = dst[k:]
		off = 0
	}
}

// acked takes in the acknowledgements and credits a frame carries, and
// retransmits the holes its selective acknowledgement shows.
func (t *Transport) acked(p *peer, h *header) {
	p.credit = h.window
	if before(p.una, h.ack) && !before(p.sendNext, h.ack) {
		last := &p.slots[(h.ack-1)%Window]
		if !last.retx && last.sent {
			rtt := time.Duration(t.now - last.sentAt)
			if p.srtt == 0 {
				p.srtt = rtt
			} else {
				p.srtt = (7*p.srtt + rtt) / 8
			}
		}
		for s := p.una; s != h.ack; s++ {
			sl := &p.slots[s%Window]
			p.rackAt = max(p.rackAt, sl.sentAt)
			sl.sent = false
			t.unlend(sl)
		}
		p.una = h.ack
		p.probed = false
		p.rto = min(max(t.cfg.MinRTO, 4*p.srtt), time.Second)
		p.progress = t.now
		p.rtoAt = 0
		if p.owes() {
			p.rtoAt = t.now + at(p.rto)
		}
	}
	if h.sack.zero() {
		return
	}
	// Mark what the peer holds, and note when the latest of it was sent.
	top := -1
	for i := range Window - 1 {
		if !h.sack.has(i) {
			continue
		}
		top = i
		if s := h.ack + 1 + uint32(i); before(s, p.sendNext) && !before(s, p.una) {
			sl := &p.slots[s%Window]
			sl.sacked = true
			p.rackAt = max(p.rackAt, sl.sentAt)
		}
	}
	// A hole is lost, and sent again at once, when a frame sent after it
	// (by more than a quarter of a round trip: less may be reordering)
	// has arrived, as RACK judges; when dupThresh frames after it are
	// held and it was sent once; or when it went a timeout's worth of
	// time ago. The first catches a resent frame lost again and a tail
	// loss that the tail-loss probe revealed, without waiting for the
	// retransmission timeout.
	held := 0
	for i := top; i >= -1; i-- {
		s := h.ack + 1 + uint32(i)
		if i >= 0 && h.sack.has(i) {
			held++
			continue
		}
		if held == 0 || before(s, p.una) || !before(s, p.sendNext) {
			continue
		}
		sl := &p.slots[s%Window]
		if sl.sacked || !sl.sent {
			continue
		}
		if p.rackAt > sl.sentAt+at(p.srtt/4) || (!sl.retx && held >= dupThresh) || t.now-sl.sentAt >= at(p.rto) {
			t.resend(p, sl)
		}
	}
}

// dupThresh is how many later frames the peer must hold before a missing
// one is taken for lost rather than overtaken.
const dupThresh = 3

// data takes a data frame in (its header hdr and its payload in pieces):
// delivers it if it is next, with the early frames that follow it, keeps
// it if early, drops it if already had.
func (t *Transport) data(p *peer, h *header, hdr []byte, payload [][]byte) {
	d := int32(h.seq - p.expect)
	switch {
	case d < 0:
		t.cnt.Duplicates++
		p.ackNow = true
	case d >= Window:
		// Beyond the credits granted: the sender will send it again.
	case d > 0:
		st := &p.stash[h.seq%Window]
		if st.ok && st.seq == h.seq {
			t.cnt.Duplicates++
		} else {
			if st.buf == nil {
				st.buf = make([]byte, t.cfg.MTU)
			}
			st.n = copy(st.buf, hdr)
			for _, pc := range payload {
				st.n += copy(st.buf[st.n:], pc)
			}
			st.seq, st.ok = h.seq, true
			p.stashed++
		}
		t.earlyAck(p, h.seq)
	default:
		// The delay runs from the last frame: while a stream keeps coming
		// it is acknowledged every ackEvery frames, not every ackDelay.
		p.owedAt = t.now
		p.expect++
		p.ackOwed++
		p.early = 0
		if !t.consume(p, h, payload) {
			return
		}
		for p.stashed > 0 && p.gone == nil {
			st := &p.stash[p.expect%Window]
			if !st.ok || st.seq != p.expect {
				break
			}
			st.ok = false
			p.stashed--
			p.expect++
			p.ackOwed++
			hh := parse(st.buf[:st.n])
			if !t.consume(p, &hh, append(t.segs[:0], st.buf[hdrLen:hdrLen+hh.plen])) {
				return
			}
		}
	}
}

// earlyAck decides when a frame that came early (seq, a hole before it) is
// acknowledged: at once when it is one of the first dupThresh early frames
// since the last frame delivered in order, or when the frame before it is
// missing too (a new hole) — what the sender's loss detection needs to resend the
// holes (see acked); the rest of a run of early frames behind the same
// hole counts towards the usual acknowledgement, every ackEvery frames or
// after ackDelay. Acknowledging every early frame's turn at once sent an
// acknowledgement for every four or five data frames while a hole was
// repaired.
func (t *Transport) earlyAck(p *peer, seq uint32) {
	p.early++
	prev := seq - 1
	if st := &p.stash[prev%Window]; p.early <= dupThresh || !st.ok || st.seq != prev {
		p.ackNow = true
		return
	}
	if p.ackOwed == 0 {
		p.owedAt = t.now
	}
	p.ackOwed++
}

// consume adds an in-order data frame, its payload in pieces, to the
// message being reassembled and delivers the message when the frame
// completes it. The payload of a first fragment is in one piece up to the
// end of the head, and of a whole message in one piece (see inPlace). A
// frame that does not fit the message (which an authenticated peer never
// sends) loses the peer; consume then reports false.
func (t *Transport) consume(p *peer, h *header, payload [][]byte) bool {
	pl := payload[0]
	a := &p.asm
	if h.flags&flagFirst != 0 {
		if a.on || h.head > len(pl) || h.total < h.head {
			return t.broken(p, "a first fragment out of place")
		}
		head, rest, bodyLen := pl[:h.head], pl[h.head:], h.total-h.head
		if h.flags&flagLast != 0 {
			if len(rest) != bodyLen {
				return t.broken(p, "a single fragment of the wrong length")
			}
			t.deliver(p, head, rest)
			return p.gone == nil
		}
		a.on, a.placed, a.n = true, false, 0
		a.head = append(a.head[:0], head...)
		var dst []byte
		if bodyLen >= t.cfg.PlaceMin && t.placer != nil && !t.deferred {
			if dst = t.placer.Place(p.rank, a.head, bodyLen); dst != nil {
				if len(dst) != bodyLen {
					return t.broken(p, fmt.Sprintf("Place gave %d bytes for a body of %d", len(dst), bodyLen))
				}
				a.placed = true
			}
		}
		if dst == nil {
			if cap(a.buf) < bodyLen {
				a.buf = make([]byte, bodyLen)
			}
			dst = a.buf[:bodyLen]
		}
		a.dst = dst
		payload[0] = rest
	} else if !a.on {
		return t.broken(p, "a fragment without a first one")
	}
	for _, pc := range payload {
		if a.n+len(pc) > len(a.dst) {
			return t.broken(p, "fragments longer than their message")
		}
		a.n += copy(a.dst[a.n:], pc)
	}
	if h.flags&flagLast == 0 {
		return true
	}
	if a.n != len(a.dst) {
		return t.broken(p, "fragments shorter than their message")
	}
	a.on = false
	if a.placed {
		t.cnt.Placed++
	}
	dst := a.dst
	a.dst = nil
	t.deliver(p, a.head, dst)
	return p.gone == nil
}

func (t *Transport) deliver(p *peer, head, body []byte) {
	t.cnt.FramesIn++
	t.cnt.BytesIn += int64(len(body))
	if t.deferred {
		t.later = append(t.later, event{kind: 'F', peer: p.rank, head: append([]byte(nil), head...), body: append([]byte(nil), body...)})
		return
	}
	t.cfg.Handler.Frame(p.rank, head, body)
}

// broken loses a peer whose frames make no sense.
func (t *Transport) broken(p *peer, what string) bool {
	err := fmt.Errorf("rank %d sent %s", p.rank, what)
	t.lose(p, err)
	t.lost(p.rank, err)
	return false
}
