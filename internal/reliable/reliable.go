// Package reliable carries a device's frames (a head and a body, as
// internal/wire defines them) between ranks over a link of Ethernet frames
// that may drop, reorder and duplicate them: the AF_XDP socket of the XDP
// wire. It gives what TCP gives the TCP wire: per peer, every message
// arrives once, whole and in order, or the peer is reported lost.
//
// A message is cut into fragments, one per Ethernet frame. Each peer pair
// numbers its data frames; the receiver delivers them in sequence order,
// keeps frames that arrive early in a reorder window, and drops duplicates.
// Every frame carries a cumulative acknowledgement (the next number the
// sender of the frame expects) and a selective one (a bitmap of the early
// frames it holds), so acknowledgements ride on the traffic going the other
// way; a receiver with nothing to send acknowledges on its own once its
// Poll runs dry or every ackEvery frames. The sender keeps each
// unacknowledged frame and sends it again when the selective
// acknowledgement shows a hole behind a later frame (fast retransmission)
// or when no acknowledgement came within the retransmission timeout, which
// doubles with each timeout and is reset by progress. Flow control is by
// credits: the receiver grants as many frames beyond its cumulative
// acknowledgement as its reorder window holds, and the sender never has
// more outstanding; what does not fit waits in a queue.
//
// Every frame carries a tag under a key from the job's secret, over its
// header (SipHash-2-4) or, with Config.TagPayload, the whole frame (GMAC),
// and names its job; frames of other jobs, forged frames and frames
// for other ranks are dropped and counted. A message's first fragment
// carries its head, so a large body can be reassembled straight into memory
// the device chooses (Placer), the posted receive buffer.
package reliable

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"
)

// Link is the datagram path frames travel: an AF_XDP socket, or an
// in-memory pipe in tests.
type Link interface {
	// Send transmits frame, copied before Send returns; false means the
	// link has no room now (try again later).
	Send(frame []byte) bool
	// Flush pushes out what Send queued.
	Flush() error
	// Receive calls got with received frames, each in one or more pieces
	// (a jumbo frame as the pieces the AF_XDP socket got it in, so that
	// its payload is copied once, into the message), valid only during the
	// call; it stops after about budget pieces and reports how many there
	// were. The first piece of a frame holds at least its header.
	Receive(budget int, got func(pieces [][]byte)) int
}

// Handler receives what the transport delivers, from inside Poll.
type Handler interface {
	Frame(peer int, head, body []byte)
	Sent(tok any)
	Lost(peer int, err error)
}

// Placer chooses where a large message body goes (see wire.Placer).
type Placer interface {
	Place(peer int, head []byte, n int) []byte
}

// Config is what a Transport needs.
type Config struct {
	Rank    int
	Size    int    // ranks in the job
	Job     uint64 // the job id every frame carries
	Secret  []byte // the job's secret
	MAC     net.HardwareAddr
	Resolve func(peer int) (net.HardwareAddr, error) // a peer's MAC, asked once
	Handler Handler
	Link    Link
	// MTU is the largest frame, Ethernet header included (default 1514).
	MTU int
	// PlaceMin is the smallest body for which the Placer is asked.
	PlaceMin int
	// MinRTO is the retransmission timeout before doubling (default 5 ms);
	// DeadAfter is how long outstanding frames may go unacknowledged
	// before the peer is lost (default 10 s).
	MinRTO, DeadAfter time.Duration
	// KeepIdle is how long a peer to which nothing is outstanding may be
	// silent before it is probed, and the interval of the probes (default
	// 1 s); a peer silent for DeadAfter is lost. Without it a cut link
	// between ranks that had nothing in flight at the moment went
	// unnoticed while each waited for the other (the TCP wire's
	// keepalives do this job there). Default: 1 s, at most DeadAfter/4.
	KeepIdle time.Duration
	// RecvWindow is the most frames this rank lets a peer have
	// outstanding to it (the credits it grants): what its receive ring
	// holds. Default and most: Window. A peer is granted as many before
	// its first acknowledgement as this rank grants it, assuming the same
	// of it.
	RecvWindow int
	// TagPayload extends each frame's tag over its payload. Without it
	// the tag covers the header (the job, the ranks, the sequence numbers,
	// the acknowledgements): no frame from elsewhere is believed, as on
	// the TCP wire, whose handshake authenticates the connection and not
	// each byte; with it a payload changed on the way is caught too, at
	// the cost of hashing every byte (GHASH, a few GB/s).
	TagPayload bool
}

// Window is the reorder window and the most frames outstanding to a peer.
const Window = 256

// ackEvery is how many frames a receiver takes before it acknowledges
// them even while more keep coming.
const ackEvery = 32

// ackDelay is how long a receiver whose link has run dry waits after the
// last frame it took before it acknowledges fewer than ackEvery on their
// own. Frames come in bursts (the kernel sends at most 32 descriptors per
// kick), and an acknowledgement after every burst cost as many frames
// through the kernel as a third of the data; the wait runs from the last
// frame, not the first owed, so that a stream whose bursts come closer
// together than this is acknowledged every ackEvery frames. The
// acknowledgements that matter come at once all the same: those of early
// or duplicate frames (the sender's loss detection) and those riding on
// data going the other way (a reply). It stays well below the sender's
// tail-loss probe (probeMin, two round trips).
const ackDelay = 50 * time.Microsecond

// MaxHead is the largest head a message may have: it travels in the first
// fragment.
const MaxHead = 1024

// Counters are a Transport's running totals.
type Counters struct {
	FramesIn, FramesOut int64 // messages
	BytesIn, BytesOut   int64 // message bodies
	Queued              int64 // messages that waited for credits or the link
	Placed              int64 // bodies reassembled in memory the Placer chose
	PacketsIn           int64 // authenticated frames received
	PacketsOut          int64 // frames handed to the link, retransmissions and acks included
	AcksOut             int64 // frames that were acknowledgements only
	Retransmits         int64 // data frames sent again
	Timeouts            int64 // retransmission timeouts
	Duplicates          int64 // data frames received twice
	Forged              int64 // frames of the job whose tag was wrong
	Stray               int64 // frames not for this rank or of another job
	KeepProbes          int64 // keepalive probes sent to silent peers
	Lent                int64 // data frames cut straight into memory the link lent (see Lender)
	Tails               int64 // short frames that ended a message of several frames (see FillSize)
}

// Transport is one rank's end of the reliable transport.
type Transport struct {
	cfg      Config
	auth     *authenticator
	placer   Placer
	lender   Lender  // the link, when it lends memory for frames
	peers    []*peer // by rank, made on first contact
	active   []*peer
	payload  int // bytes of payload a frame holds
	ackBuf   []byte
	cnt      Counters
	deadline atomic.Int64 // monotonic time (see clock) of the next timer, 0 for none (read by Wait)
	ackDue   atomic.Int64 // monotonic time of the next delayed acknowledgement, 0 for none
	now      int64        // the time of this turn (see clock)
	// stale counts the idle turns left that may date themselves with the
	// last reading of the clock instead of a fresh one (see turn); refresh,
	// set by Refresh from any goroutine, makes the next turn read it.
	stale   int
	old     bool // this turn compares with an earlier turn's reading
	refresh atomic.Bool
	// idle is set when the last turn left nothing to do but wait for
	// frames until the deadline: no acknowledgement owed at once, nothing
	// queued or unsent. A turn that then finds no frame does nothing (see
	// turn); whatever makes work outside a turn (Send) clears it.
	idle     bool
	closed   bool
	deferred bool                  // inside Tick: what the Handler would get waits in later
	later    []event               // deliveries and reports Tick kept for the next Poll
	inputFn  func(pieces [][]byte) // t.input, made once: a method value passed on allocates
	gather   []byte                // a frame in pieces that input takes whole
	segs     [][]byte
	tag      [tagLen]byte
}

// event is a Handler call that Tick deferred to the next Poll.
type event struct {
	kind       byte // 'F' Frame, 'S' Sent, 'L' Lost
	peer       int
	head, body []byte
	tok        any
	err        error
}

// New makes a transport.
func New(cfg Config) (*Transport, error) {
	if len(cfg.Secret) < 16 {
		return nil, errors.New("reliable: the job secret is too short")
	}
	if cfg.Handler == nil || cfg.Link == nil || cfg.Resolve == nil || len(cfg.MAC) != 6 {
		return nil, errors.New("reliable: New needs a Handler, a Link, a Resolve function and a MAC address")
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1514
	}
	if cfg.MTU < hdrLen+tagLen+MaxHead {
		return nil, fmt.Errorf("reliable: an MTU of %d bytes is too small", cfg.MTU)
	}
	if cfg.MinRTO == 0 {
		cfg.MinRTO = 5 * time.Millisecond
	}
	if cfg.DeadAfter == 0 {
		cfg.DeadAfter = 10 * time.Second
	}
	if cfg.KeepIdle == 0 {
		cfg.KeepIdle = min(time.Second, cfg.DeadAfter/4)
	}
	if cfg.RecvWindow <= 0 || cfg.RecvWindow > Window {
		cfg.RecvWindow = Window
	}
	if cfg.PlaceMin == 0 {
		cfg.PlaceMin = 32 << 10
	}
	t := &Transport{cfg: cfg, auth: newAuthenticator(cfg.Secret, cfg.TagPayload), peers: make([]*peer, cfg.Size),
		payload: cfg.MTU - hdrLen - tagLen, ackBuf: make([]byte, hdrLen+tagLen)}
	t.placer, _ = cfg.Handler.(Placer)
	t.lender, _ = cfg.Link.(Lender)
	t.inputFn = t.input
	return t, nil
}

// Counters returns the running totals.
func (t *Transport) Counters() Counters { return t.cnt }

// Deadline is when the transport next needs a Poll for its timers (a
// retransmission, an acknowledgement it owes), or the zero time. It may be
// called beside Poll, by a waiter deciding how long to sleep.
func (t *Transport) Deadline() time.Time {
	if d := t.deadline.Load(); d != 0 {
		return epoch.Add(time.Duration(d))
	}
	return time.Time{}
}

// AckDue is when the transport next owes a delayed acknowledgement (part
// of Deadline), or the zero time; it may be called beside Poll. A waiter
// should not sleep past it: it is tens of microseconds away.
func (t *Transport) AckDue() time.Time {
	if d := t.ackDue.Load(); d != 0 {
		return epoch.Add(time.Duration(d))
	}
	return time.Time{}
}

// Pending is the number of messages and frames not yet acknowledged.
func (t *Transport) Pending() int {
	n := 0
	for _, p := range t.active {
		if p.gone == nil {
			n += len(p.queue) + int(p.next-p.una)
		}
	}
	return n
}

// peer returns rank's state, making it on first contact.
func (t *Transport) peer(rank int) *peer {
	p := t.peers[rank]
	if p == nil {
		p = &peer{rank: rank, rto: t.cfg.MinRTO, credit: t.cfg.RecvWindow, heard: clock()}
		t.peers[rank] = p
		t.active = append(t.active, p)
	}
	return p
}

// Send sends a message of head and body to peer. It reports true when the
// whole message has been copied into frames, so body may be reused at
// once. Otherwise the rest waits for credits: with a tok, body is
// referenced until Handler.Sent(tok); with a nil tok it is copied. Messages
// to one peer arrive in the order of the Send calls.
func (t *Transport) Send(peer int, head, body []byte, tok any) (bool, error) {
	p, err := t.sendTo(peer, head, body)
	if err != nil {
		return false, err
	}
	// The clock is read once the frames are with the kernel (settle), not
	// before: on the XDP wire the kick runs the whole path to the peer,
	// and a reading before it would delay every message by its cost.
	first, armed := p.sendNext, p.rtoAt == 0
	t.idle = false
	m := outMsg{head: head, body: body, tok: tok}
	if len(p.queue) == 0 && t.fragment(p, &m) {
		t.push(p, first, armed, len(body))
		return true, nil
	}
	// The rest waits: keep what the frames have not taken.
	m.head = append([]byte(nil), m.head...)
	if tok == nil {
		m.body = append([]byte(nil), m.body...)
	}
	p.queue = append(p.queue, m)
	t.arm(p) // no frame may have been cut (no credits): the wait has a deadline too
	t.cnt.Queued++
	t.push(p, first, armed, len(body))
	return false, nil
}

// SendNow is Send of a message that fits one frame, when it can be cut
// into its frame at once: nothing waits for credits before it and the
// peer grants a frame more. Then it does what Send does and reports true;
// otherwise it sends nothing and reports false (a caller that would
// complete its send at once, and leave nothing to be sent later, then
// takes its slower path).
func (t *Transport) SendNow(peer int, head, body []byte) (bool, error) {
	p, err := t.sendTo(peer, head, body)
	if err != nil || len(p.queue) > 0 || p.blocked() || len(head)+len(body) > t.payload {
		return false, err
	}
	first, armed := p.sendNext, p.rtoAt == 0
	t.idle = false
	m := outMsg{head: head, body: body}
	t.fragment(p, &m)
	t.push(p, first, armed, len(body))
	return true, nil
}

// push hands what a send cut into frames to the link, stamps the frames
// from first on (settle) and counts the message of n bytes.
func (t *Transport) push(p *peer, first uint32, armed bool, n int) {
	t.transmit(p)
	t.flush()
	t.settle(p, first, armed)
	t.cnt.FramesOut++
	t.cnt.BytesOut += int64(n)
}

// sendTo checks a message of head and body to peer and returns the peer,
// its address known.
func (t *Transport) sendTo(peer int, head, body []byte) (*peer, error) {
	if peer < 0 || peer >= t.cfg.Size || peer == t.cfg.Rank {
		return nil, fmt.Errorf("reliable: no rank %d to send to", peer)
	}
	if len(head) > MaxHead || len(head)+len(body) > 1<<31-1 {
		return nil, fmt.Errorf("reliable: message to rank %d too large (head %d, body %d bytes)", peer, len(head), len(body))
	}
	p := t.peer(peer)
	if p.gone != nil {
		return nil, fmt.Errorf("reliable: rank %d is unreachable: %w", peer, p.gone)
	}
	if p.mac == nil {
		mac, err := t.cfg.Resolve(peer)
		if err != nil {
			return nil, fmt.Errorf("reliable: address of rank %d: %w", peer, err)
		}
		p.mac = mac
	}
	return p, nil
}

// FillSize is the body size, at most want, of a message with a head of
// head bytes that fills its frames exactly (the first carries the head):
// a device that cuts a large transfer into messages of this size sends
// full frames only, and one short frame at the transfer's end, where
// pieces of want bytes would each end in a short frame that costs the
// link as much per frame as a full one. It is want when want does not
// fill one frame.
func (t *Transport) FillSize(head, want int) int {
	k := (head + want) / t.payload
	if k == 0 {
		return want
	}
	return k*t.payload - head
}

// settle reads the clock after a Send handed its frames to the link, and
// dates what the Send did with it: the frames it sent (from first on) and,
// when the Send started the retransmission timer (armed), the timer. Until
// then they carry the time of the last turn.
func (t *Transport) settle(p *peer, first uint32, armed bool) {
	t.now = clock()
	for s := first; s != p.sendNext; s++ {
		p.slots[s%Window].sentAt = t.now
	}
	if armed && p.rtoAt != 0 {
		p.rtoAt = t.now + at(p.rto)
		p.progress = t.now
	}
}

// Poll receives and delivers frames, acknowledges, retransmits and sends
// what waits for credits, without blocking. It reports whether anything
// happened.
func (t *Transport) Poll() bool {
	busy := t.runLater()
	return t.turn() || busy
}

// Tick does Poll's work for a device that is not polling, from another
// goroutine (the caller excludes Poll and Send while it runs): it
// acknowledges, retransmits and takes frames in, so that a peer's
// messages are neither stalled nor declared lost while this rank computes
// or waits outside the device. Nothing reaches the Handler from Tick: the
// frames it takes in (copied) and the reports it makes wait for the next
// Poll, in order.
func (t *Transport) Tick() bool {
	t.deferred = true
	defer func() { t.deferred = false }()
	return t.turn()
}

// Deferred reports whether Tick kept Handler calls for the next Poll.
func (t *Transport) Deferred() bool { return len(t.later) > 0 }

// runLater makes the Handler calls Tick deferred.
func (t *Transport) runLater() bool {
	if len(t.later) == 0 {
		return false
	}
	evs := t.later
	t.later = nil
	for _, ev := range evs {
		switch ev.kind {
		case 'F':
			t.cfg.Handler.Frame(ev.peer, ev.head, ev.body)
		case 'S':
			t.cfg.Handler.Sent(ev.tok)
		case 'L':
			t.cfg.Handler.Lost(ev.peer, ev.err)
		}
	}
	return true
}

// sent and lost report to the Handler, or defer the report inside Tick.
func (t *Transport) sent(tok any) {
	if t.deferred {
		t.later = append(t.later, event{kind: 'S', tok: tok})
		return
	}
	t.cfg.Handler.Sent(tok)
}

func (t *Transport) lost(peer int, err error) {
	if t.deferred {
		t.later = append(t.later, event{kind: 'L', peer: peer, err: err})
		return
	}
	t.cfg.Handler.Lost(peer, err)
}

// epoch is where the transport's clock starts: a second before the
// package was loaded, so that no reading is 0, which stands for "no time"
// (a timer that is not running).
var epoch = time.Now().Add(-time.Second)

// clock is the time now in nanoseconds since epoch, from one reading of
// the monotonic clock. A waiting rank polls in a loop, and each turn reads
// the clock and compares the timers with it: with time.Time values (a
// wall and a monotonic reading, and their arithmetic) that was a third of
// an idle turn's time; an integer is one reading and plain comparisons.
func clock() int64 { return int64(time.Since(epoch)) }

// read reads the clock for this turn and the idle turns after it.
func (t *Transport) read() {
	t.now = clock()
	t.stale = idleReads - 1
	t.old = false
	if t.refresh.Load() { // a store is a locked instruction: only when set
		t.refresh.Store(false)
	}
}

// at is a duration as a span of the clock.
func at(d time.Duration) int64 { return int64(d) }

// idleReads is how often an idle turn reads the clock: one in idleReads.
// A waiting rank's turn is a look at the RX ring and a comparison of the
// clock with the next timer, and the reading was a good part of it (see
// docs/xdp.md, "Session 10, second pass"). The other idle turns compare
// with the last reading, which is never later than the time: a timer never
// fires early, and fires at most idleReads-1 idle turns late. A turn that
// finds a frame or work reads the clock before it dates anything, and so
// do the turn after Refresh (a sleep) and Tick.
const idleReads = 4

// Refresh makes the next turn read the clock: the waiter calls it after a
// sleep, after which the last reading is the sleep's age old. It may be
// called beside Poll.
func (t *Transport) Refresh() { t.refresh.Store(true) }

// turn is one pass of Poll's work.
func (t *Transport) turn() bool {
	if !t.idle || t.stale == 0 || t.deferred || t.refresh.Load() {
		t.read()
	} else {
		t.stale--
		t.old = true
	}
	n := t.cfg.Link.Receive(64, t.inputFn)
	if n == 0 && t.idle {
		// The waiting rank's turn: no frame came, and no timer is due.
		if d := t.deadline.Load(); d == 0 || t.now < d {
			t.flush()
			return false
		}
	}
	if t.old { // a timer is due by the old reading: run them with a new one
		t.read()
	}
	busy := n > 0
	idle := true
	t.idle = true // a Send from a Handler called in the loop clears it
	var next, ackNext int64
	for _, p := range t.active {
		if p.gone != nil {
			continue
		}
		if p.ackNow || p.ackOwed >= ackEvery || (p.ackOwed > 0 && n == 0 && t.now >= p.owedAt+at(ackDelay)) {
			t.sendAck(p)
			busy = true
		}
		if p.owes() && p.rtoAt != 0 && t.now > p.rtoAt {
			if t.timeout(p) {
				continue
			}
			busy = true
		}
		if len(p.queue) > 0 || p.unsent {
			t.pump(p)
		}
		due, gone := t.keepalive(p)
		if gone {
			continue
		}
		// The tail-loss probe, when nothing new can go to show a loss:
		// nothing is left to send, or the peer's credits hold it back
		// (then every frame after a hole may be held, and a resent frame
		// lost again would wait for the retransmission timeout).
		if p.next != p.una && (len(p.queue) == 0 || p.blocked()) && !p.probed && p.sendNext != p.una {
			due = t.probe(p)
		}

		if p.owes() && p.rtoAt != 0 && (due == 0 || p.rtoAt < due) {
			due = p.rtoAt
		}
		if due != 0 && (next == 0 || due < next) {
			next = due
		}
		if p.ackOwed > 0 {
			if d := p.owedAt + at(ackDelay); ackNext == 0 || d < ackNext {
				ackNext = d
			}
		}
		if p.ackNow || p.ackOwed >= ackEvery || len(p.queue) > 0 || p.unsent {
			idle = false
		}
	}
	t.idle = t.idle && idle && len(t.later) == 0
	t.flush()
	if ackNext != 0 && (next == 0 || ackNext < next) {
		next = ackNext
	}
	// An atomic store is a locked instruction here; most turns leave the
	// timers as they were.
	if t.deadline.Load() != next {
		t.deadline.Store(next)
	}
	if t.ackDue.Load() != ackNext {
		t.ackDue.Store(ackNext)
	}
	return busy
}

func (t *Transport) flush() {
	_ = t.cfg.Link.Flush()
}

// timeout handles an expired retransmission timer: it sends the oldest
// unacknowledged frame again (its acknowledgement then shows, selectively,
// what else is missing) and doubles the timeout, or, when nothing was
// acknowledged for DeadAfter (or the link took none of the frames due for
// that long), gives the peer up. It reports whether the peer is lost.
func (t *Transport) timeout(p *peer) bool {
	if t.now-p.progress > at(t.cfg.DeadAfter) {
		var err error
		switch {
		case p.next == p.una:
			err = fmt.Errorf("rank %d granted no credits for %v", p.rank, t.cfg.DeadAfter)
		case p.sendNext == p.una:
			err = fmt.Errorf("the link took no frame for rank %d for %v (this host's link down?)", p.rank, t.cfg.DeadAfter)
		default:
			err = fmt.Errorf("no acknowledgement from rank %d for %v (link down or host gone)", p.rank, t.cfg.DeadAfter)
		}
		t.lose(p, err)
		t.lost(p.rank, err)
		return true
	}
	if p.sendNext == p.una { // nothing in flight: what is due waits for the link or credits
		p.rtoAt = t.now + at(p.rto)
		return false
	}
	t.cnt.Timeouts++
	for s := p.una; s != p.sendNext; s++ {
		if sl := &p.slots[s%Window]; !sl.sacked && sl.sent {
			t.resend(p, sl)
			break
		}
	}
	p.rto = min(2*p.rto, time.Second)
	p.rtoAt = t.now + at(p.rto)
	return false
}

// probe sends a frame again when nothing was acknowledged for a few round
// trips and nothing new is left to send (a tail-loss probe): the last
// frame, or, when the peer holds that, the oldest it lacks. If frames
// before it were lost, its acknowledgement shows the holes and they are
// resent (see acked) without waiting for the retransmission timeout; it
// also repairs a resent frame that was lost again. It reports when it
// will be due, or 0 when it went or cannot go.
func (t *Transport) probe(p *peer) int64 {
	sl := &p.slots[(p.sendNext-1)%Window]
	if sl.sacked {
		for s := p.una; s != p.sendNext; s++ {
			if o := &p.slots[s%Window]; !o.sacked && o.sent {
				sl = o
				break
			}
		}
	}
	if !sl.sent || sl.sacked {
		return 0
	}
	wait := at(max(2*p.srtt, probeMin))
	due := max(sl.sentAt, p.progress) + wait
	if t.now < due {
		return due
	}
	p.probed = true
	t.resend(p, sl)
	return 0
}

// keepalive probes a peer to which nothing is outstanding once it has
// been silent for KeepIdle, and again every KeepIdle (an acknowledgement
// frame that asks for one at once), and loses it when it stays silent for
// DeadAfter and the last probe, sent late in that silence, went KeepIdle
// unanswered: a rank that was itself descheduled for long sends a fresh
// probe and waits KeepIdle for it before it blames the peer. While frames
// are outstanding the retransmission timer does this. It reports when it
// is next due, and whether the peer is lost.
func (t *Transport) keepalive(p *peer) (int64, bool) {
	if p.mac == nil || p.owes() {
		return 0, false
	}
	idle, dead := at(t.cfg.KeepIdle), at(t.cfg.DeadAfter)
	quiet := t.now - p.heard
	if quiet > dead && p.keptAt-p.heard >= dead-idle && t.now-p.keptAt >= idle {
		err := fmt.Errorf("no answer from rank %d for %v (link down or host gone)", p.rank, t.cfg.DeadAfter)
		t.lose(p, err)
		t.lost(p.rank, err)
		return 0, true
	}
	if quiet >= idle && t.now-p.keptAt >= idle && t.control(p, kindAck, flagProbe) {
		p.keptAt = t.now
		t.cnt.KeepProbes++
	}
	return max(p.heard, p.keptAt) + idle, false
}

// probeMin is the least wait before a tail-loss probe.
const probeMin = 200 * time.Microsecond

// lose forgets what was outstanding to a peer that is gone.
func (t *Transport) lose(p *peer, err error) {
	for s := p.una; s != p.next; s++ {
		t.unlend(&p.slots[s%Window])
	}
	p.gone = err
	p.queue = nil
	p.una, p.sendNext, p.unsent = p.next, p.next, false
}

// Close says goodbye to every peer, so that none takes the silence that
// follows for a failure. The caller has waited for Pending to reach 0.
func (t *Transport) Close() {
	if t.closed {
		return
	}
	t.closed = true
	for _, p := range t.active {
		if p.gone != nil || p.mac == nil {
			continue
		}
		for range 3 {
			t.control(p, kindBye, 0)
		}
	}
	t.flush()
}
