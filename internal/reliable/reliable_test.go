package reliable

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"
)

// pipe is one direction of an in-memory link that drops, duplicates and
// reorders frames with the given probabilities, and now and then has no
// room, as a full TX ring would.
type pipe struct {
	q                  [][]byte
	loss, dup, reorder float64
	full               float64
	rng                *rand.Rand
	cut                bool
	// piece, when set, is the size of the pieces a frame is received in
	// (as an AF_XDP socket receives a jumbo frame in UMEM frames).
	piece int
}

// end is one side of a pipe pair: it sends into out and receives from in.
type end struct{ in, out *pipe }

func (e *end) Send(f []byte) bool {
	p := e.out
	if len(p.q) > 1024 || p.rng.Float64() < p.full {
		return false
	}
	if p.cut || p.rng.Float64() < p.loss {
		return true
	}
	c := append([]byte(nil), f...)
	copies := 1
	if p.rng.Float64() < p.dup {
		copies = 2
	}
	for range copies {
		at := len(p.q)
		if at > 0 && p.rng.Float64() < p.reorder {
			at -= 1 + p.rng.IntN(min(at, 4))
		}
		p.q = append(p.q, nil)
		copy(p.q[at+1:], p.q[at:])
		p.q[at] = c
	}
	return true
}

func (e *end) Flush() error { return nil }

func (e *end) Receive(budget int, got func([][]byte)) int {
	n := 0
	for n < budget && len(e.in.q) > 0 {
		f := e.in.q[0]
		e.in.q = e.in.q[1:]
		var pieces [][]byte
		for k := e.in.piece; k > 0 && len(f) > k; f = f[k:] {
			pieces = append(pieces, f[:k])
		}
		got(append(pieces, f))
		n += len(pieces) + 1
	}
	return n
}

// sink records what a transport delivers and checks it as it comes: the
// messages of each sender arrive numbered 0, 1, 2, ... with their bodies
// intact.
type sink struct {
	t      *testing.T
	next   map[int]int
	sent   int
	lost   error
	place  bool
	placed []byte
}

func (s *sink) Frame(peer int, head, body []byte) {
	i := int(binary.LittleEndian.Uint64(head))
	if i != s.next[peer] {
		s.t.Fatalf("from rank %d: message %d arrived, want %d", peer, i, s.next[peer])
	}
	if want := content(peer, i); !bytes.Equal(body, want) || !bytes.Equal(head[8:], want[:min(len(want), len(head)-8)]) {
		s.t.Fatalf("from rank %d: message %d (%d bytes) arrived with wrong content", peer, i, len(body))
	}
	s.next[peer]++
}

func (s *sink) Sent(tok any) { s.sent++ }

func (s *sink) Lost(peer int, err error) { s.lost = err }

// placer is a sink that also places large bodies in memory of its own.
type placer struct{ *sink }

func (p placer) Place(peer int, head []byte, n int) []byte {
	p.placed = make([]byte, n)
	return p.placed
}

// content is the body of message i from rank: a size that varies from
// empty to many frames, and bytes that depend on both.
func content(rank, i int) []byte {
	sizes := []int{0, 1, 8, 1000, 1438, 1439, 3000, 9000, 40 << 10, 100 << 10}
	b := make([]byte, sizes[i%len(sizes)])
	for k := range b {
		b[k] = byte(rank*31 + i*7 + k*13)
	}
	return b
}

var testSecret = []byte("0123456789abcdef0123456789abcdef")

func mac(i int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, byte(i)} }

// pair makes two transports, ranks 0 and 1, joined by lossy pipes.
func pair(t *testing.T, loss, dup, reorder float64, seed uint64) (a, b *Transport, sa, sb *sink, ab, ba *pipe) {
	return pairWith(t, loss, dup, reorder, seed, nil)
}

// pairWith is pair with the transports' Config changed by set.
func pairWith(t *testing.T, loss, dup, reorder float64, seed uint64, set func(*Config)) (a, b *Transport, sa, sb *sink, ab, ba *pipe) {
	rng := rand.New(rand.NewPCG(seed, 1))
	ab = &pipe{loss: loss, dup: dup, reorder: reorder, full: 0.01, rng: rng}
	ba = &pipe{loss: loss, dup: dup, reorder: reorder, full: 0.01, rng: rng}
	sa = &sink{t: t, next: map[int]int{}}
	sb = &sink{t: t, next: map[int]int{}}
	mk := func(rank int, h Handler, l Link) *Transport {
		cfg := Config{Rank: rank, Size: 2, Job: 42, Secret: testSecret, MAC: mac(rank),
			Resolve: func(p int) (net.HardwareAddr, error) { return mac(p), nil },
			Handler: h, Link: l, MinRTO: time.Millisecond, DeadAfter: 15 * time.Second}
		if set != nil {
			set(&cfg)
		}
		tr, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	a = mk(0, sa, &end{in: ba, out: ab})
	b = mk(1, placer{sb}, &end{in: ab, out: ba})
	return
}

// exchange has both transports send n messages to each other, polling
// both until everything is delivered and acknowledged.
func exchange(t *testing.T, a, b *Transport, sa, sb *sink, n int) {
	exchangeTick(t, a, b, sa, sb, n, false)
}

// exchangeTick is exchange where, with tick, every third turn of rank 1
// is a Tick instead of a Poll, as when its device does not poll.
func exchangeTick(t *testing.T, a, b *Transport, sa, sb *sink, n int, tick bool) {
	deadline := time.Now().Add(20 * time.Second)
	sentA, sentB := 0, 0
	var toks []int
	turns := 0
	for sb.next[0] < n || sa.next[1] < n || a.Pending() > 0 || b.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: rank 1 has %d of %d, rank 0 has %d of %d; pending %d, %d\n%s",
				sb.next[0], n, sa.next[1], n, a.Pending(), b.Pending(), state(a, b))
		}
		for _, s := range []struct {
			tr   *Transport
			me   int
			sent *int
		}{{a, 0, &sentA}, {b, 1, &sentB}} {
			if *s.sent < n && s.tr.Pending() < 3*Window {
				i := *s.sent
				body := content(s.me, i)
				head := binary.LittleEndian.AppendUint64(nil, uint64(i))
				head = append(head, body[:min(len(body), 20)]...)
				var tok any
				if i%2 == 0 {
					tok = i
					toks = append(toks, i)
				}
				if _, err := s.tr.Send(1-s.me, head, body, tok); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				if tok == nil {
					clear(body) // a nil-tok send must have copied it
				}
				*s.sent++
			}
		}
		a.Poll()
		turns++
		if tick && turns%3 == 0 {
			b.Tick()
		} else {
			b.Poll()
		}
		if sa.lost != nil || sb.lost != nil {
			t.Fatalf("lost a peer: %v / %v\n%s", sa.lost, sb.lost, state(a, b))
		}
	}
}

func TestInOrderOverLossyLink(t *testing.T) {
	for _, c := range []struct {
		name               string
		loss, dup, reorder float64
	}{
		{"clean", 0, 0, 0},
		{"loss1", 0.01, 0, 0},
		{"loss5", 0.05, 0, 0},
		{"reorder", 0, 0, 0.2},
		{"dup", 0, 0.05, 0},
		{"all", 0.05, 0.05, 0.2},
		{"tick", 0.05, 0.05, 0.2},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b, sa, sb, _, _ := pair(t, c.loss, c.dup, c.reorder, 7)
			exchangeTick(t, a, b, sa, sb, 300, c.name == "tick")
			ca, cb := a.Counters(), b.Counters()
			if c.loss > 0 && ca.Retransmits+cb.Retransmits == 0 {
				t.Errorf("%v loss and no retransmission", c.loss)
			}
			if c.dup > 0 && ca.Duplicates+cb.Duplicates == 0 {
				t.Errorf("duplicated frames and none counted")
			}
			if cb.Placed == 0 {
				t.Errorf("no large body was placed in the Placer's memory")
			}
			t.Logf("rank 0: %+v", ca)
		})
	}
}

// TestJumboInPieces sends jumbo frames that arrive in pieces, as an AF_XDP
// socket receives them in UMEM frames: of the kernel's size (the payload
// copied from the pieces straight into the message), and of a size that
// splits the header and head (the frame then taken whole), with the tag
// over the header and over the whole frame, over a lossy, reordering,
// duplicating link. Every message arrives once, whole and in order.
func TestJumboInPieces(t *testing.T) {
	for _, c := range []struct {
		piece int
		whole bool
	}{{3840, false}, {3840, true}, {700, false}, {100, false}} {
		t.Run(fmt.Sprintf("piece=%d,TagPayload=%v", c.piece, c.whole), func(t *testing.T) {
			a, b, sa, sb, ab, ba := pairWith(t, 0.02, 0.02, 0.1, 3, func(cfg *Config) {
				cfg.MTU, cfg.TagPayload = 9014, c.whole
			})
			ab.piece, ba.piece = c.piece, c.piece
			exchange(t, a, b, sa, sb, 300)
			if cb := b.Counters(); cb.Placed == 0 || cb.Forged != 0 {
				t.Errorf("counters %+v: want large bodies placed and nothing forged", cb)
			}
		})
	}
}

// TestStrangers feeds a transport frames of another job, frames tagged
// with another secret, frames for another rank and tampered frames: none
// is delivered, each is counted. With TagPayload a frame whose payload was
// changed is caught too.
func TestStrangers(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprintf("TagPayload=%v", whole), func(t *testing.T) {
			a, b, _, sb, ab, _ := pair(t, 0, 0, 0, 1)
			a.auth, b.auth = newAuthenticator(testSecret, whole), newAuthenticator(testSecret, whole)
			if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, 0), nil, nil); err != nil {
				t.Fatal(err)
			}
			good := append([]byte(nil), ab.q[0]...)
			ab.q = nil
			// retag changes a copy of the genuine frame and tags it with auth.
			retag := func(auth *authenticator, change func(f []byte)) []byte {
				f := append([]byte(nil), good...)
				change(f)
				auth.sign(f, len(f)-tagLen, nil)
				return f
			}
			forged := retag(newAuthenticator([]byte("another secret, another job...."), whole), func([]byte) {})
			otherJob := retag(a.auth, func(f []byte) { binary.LittleEndian.PutUint64(f[offJob:], 43) })
			otherRank := retag(a.auth, func(f []byte) { binary.LittleEndian.PutUint32(f[offTo:], 5) })
			tampered := append([]byte(nil), good...)
			tampered[offSeq]++
			ab.q = [][]byte{forged, otherJob, otherRank, tampered}
			wantForged := 2
			if whole {
				payload := append([]byte(nil), good...)
				payload[hdrLen]++
				ab.q = append(ab.q, payload)
				wantForged++
			}
			b.Poll()
			c := b.Counters()
			if sb.next[0] != 0 || c.Forged != int64(wantForged) || c.Stray != 2 || c.PacketsIn != 0 {
				t.Fatalf("delivered %d; counters %+v: want nothing delivered, %d forged, 2 stray", sb.next[0], c, wantForged)
			}
			strangers := ab.q[:0:0]
			strangers = append(strangers, forged, otherJob, otherRank, tampered)
			ab.q = [][]byte{good}
			b.Poll()
			if sb.next[0] != 1 {
				t.Fatalf("the genuine frame was not delivered after the strangers")
			}
			// Again, now that rank 1 keeps rank 0's tag prefix state: a
			// frame naming rank 0 with another prefix is not checked
			// against it.
			ab.q = strangers
			b.Poll()
			if c := b.Counters(); c.Forged != 2+int64(wantForged) || c.Stray != 4 || c.PacketsIn != 1 {
				t.Fatalf("strangers after a genuine frame: counters %+v: want %d forged, 4 stray", c, 2+wantForged)
			}
		})
	}
}

// TestTamperedSack has rank 1 hold early frames behind a hole, so that
// its acknowledgement carries a selective acknowledgement (flagSack and
// the bitmap, under the tag). A copy with a bit of the bitmap changed, and
// one with flagSack cleared (which would hide the bitmap), are counted as
// forged and change nothing at rank 0; the genuine acknowledgement marks
// the held frames and has the hole sent again.
func TestTamperedSack(t *testing.T) {
	a, b, _, sb, ab, ba := pair(t, 0, 0, 0, 1)
	ab.full, ba.full = 0, 0
	for i := range 4 { // content(0, i) of 0, 1, 8 and 1000 bytes: a frame each
		body := content(0, i)
		head := append(binary.LittleEndian.AppendUint64(nil, uint64(i)), body[:min(len(body), 20)]...)
		if _, err := a.Send(1, head, body, nil); err != nil {
			t.Fatal(err)
		}
	}
	ab.q = ab.q[1:] // frame 0 lost: 1-3 come early
	b.Poll()
	if len(ba.q) == 0 {
		t.Fatal("rank 1 sent no acknowledgement of early frames")
	}
	ack := ba.q[len(ba.q)-1]
	ba.q = nil
	if h := parse(ack); ack[offFlags]&flagSack == 0 || h.sack.zero() {
		t.Fatalf("the acknowledgement of early frames has no selective acknowledgement (flags %#x)", ack[offFlags])
	}
	p := a.peers[1]
	flipped := append([]byte(nil), ack...)
	flipped[offSack] ^= 1 << 3 // claims frame 4, never sent
	flipped[offSack] ^= 1 << 0 // and denies frame 1
	hidden := append([]byte(nil), ack...)
	hidden[offFlags] &^= flagSack
	ba.q = [][]byte{flipped, hidden}
	a.Poll()
	if c := a.Counters(); c.Forged != 2 || c.PacketsIn != 0 || c.Retransmits != 0 {
		t.Fatalf("tampered acknowledgements: counters %+v, want 2 forged, none taken in", c)
	}
	for s := range 4 {
		if p.slots[s].sacked {
			t.Fatalf("frame %d marked held by a tampered acknowledgement", s)
		}
	}
	ba.q = [][]byte{ack}
	a.Poll()
	if c := a.Counters(); c.PacketsIn != 1 || c.Forged != 2 || !p.slots[1].sacked || !p.slots[3].sacked {
		t.Fatalf("genuine acknowledgement: counters %+v, held %v %v %v", c, p.slots[1].sacked, p.slots[2].sacked, p.slots[3].sacked)
	}
	if c := a.Counters(); c.Retransmits != 1 {
		t.Fatalf("the hole behind three held frames was not sent again: counters %+v", c)
	}
	b.Poll()
	if sb.next[0] != 4 {
		t.Fatalf("%d of 4 delivered after the hole was sent again", sb.next[0])
	}
}

// TestPeerLost cuts the link: the sender reports the peer lost after
// DeadAfter, once, and later sends fail with the reason.
func TestPeerLost(t *testing.T) {
	a, _, sa, _, ab, _ := pair(t, 0, 0, 0, 1)
	a.cfg.DeadAfter = 300 * time.Millisecond
	ab.cut = true
	if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, 0), content(0, 0), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sa.lost == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no Lost 10 s after the link was cut (DeadAfter 300 ms); counters %+v", a.Counters())
		}
		a.Poll()
		if d := a.Deadline(); !d.IsZero() {
			time.Sleep(time.Until(d))
		}
	}
	if _, err := a.Send(1, make([]byte, 8), nil, nil); err == nil {
		t.Fatalf("a send to a lost peer succeeded")
	}
	if a.Counters().Timeouts == 0 {
		t.Errorf("lost without a retransmission timeout: %+v", a.Counters())
	}
}

// TestGoodbye checks that a peer that closes is not reported lost.
func TestGoodbye(t *testing.T) {
	a, b, sa, sb, _, _ := pair(t, 0, 0, 0, 1)
	exchange(t, a, b, sa, sb, 3)
	b.Close()
	a.Poll()
	if sa.lost != nil {
		t.Fatalf("a goodbye was taken for a failure: %v", sa.lost)
	}
	if _, err := a.Send(1, make([]byte, 8), nil, nil); err == nil {
		t.Fatalf("a send to a peer that said goodbye succeeded")
	}
}

// TestTickRetransmits: a rank whose only message was lost and whose device
// then stops polling (blocked outside MPI, as in a PMI barrier) still gets
// it through, because Tick retransmits; and the peer's acknowledgement,
// taken in by Tick, ends the retransmissions.
func TestTickRetransmits(t *testing.T) {
	a, b, _, sb, ab, _ := pair(t, 0, 0, 0, 1)
	ab.cut = true
	if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, 0), content(0, 0), nil); err != nil {
		t.Fatal(err)
	}
	ab.cut = false
	deadline := time.Now().Add(5 * time.Second)
	for sb.next[0] == 0 || a.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the lost frame was not retransmitted by Tick within 5 s: delivered %d, pending %d, counters %+v", sb.next[0], a.Pending(), a.Counters())
		}
		a.Tick()
		b.Poll()
	}
	if a.Counters().Retransmits == 0 {
		t.Fatalf("delivered without a retransmission: %+v", a.Counters())
	}
}

// state describes both ends of a pair, for a failure message.
func state(a, b *Transport) string {
	var sb strings.Builder
	for _, tr := range []*Transport{a, b} {
		for _, p := range tr.active {
			sl := &p.slots[p.una%Window]
			fmt.Fprintf(&sb, "rank %d -> %d: una %d next %d sendNext %d queue %d unsent %v credit %d rto %v srtt %v probed %v gone %v; una slot sent %v sacked %v retx %v age %v; recv expect %d stashed %d owed %d now %v\n",
				tr.cfg.Rank, p.rank, p.una, p.next, p.sendNext, len(p.queue), p.unsent, p.credit, p.rto, p.srtt, p.probed, p.gone,
				sl.sent, sl.sacked, sl.retx, time.Duration(clock()-sl.sentAt), p.expect, p.stashed, p.ackOwed, p.ackNow)
		}
		fmt.Fprintf(&sb, "rank %d counters %+v\n", tr.cfg.Rank, tr.Counters())
	}
	return sb.String()
}

// TestRecvWindow checks that a sender never has more frames outstanding
// than its receiver grants (RecvWindow: what the receiver's ring holds; a
// larger burst would be dropped by the kernel and sent again), and that
// the message still arrives whole as the grants come.
func TestRecvWindow(t *testing.T) {
	a, b, _, sb, ab, ba := pair(t, 0, 0, 0, 1)
	ab.full, ba.full = 0, 0
	a.cfg.RecvWindow, b.cfg.RecvWindow = 16, 16
	for i := range 10 { // the last of 100 KiB, 72 frames
		if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, uint64(i)), content(0, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	most := 0
	for deadline := time.Now().Add(10 * time.Second); sb.next[0] < 10 || a.Pending() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("not delivered in 10 s: %s", state(a, b))
		}
		most = max(most, len(ab.q))
		b.Poll()
		a.Poll()
	}
	if most > 16 {
		t.Fatalf("the sender had %d frames on the way to a receiver that granted 16", most)
	}
}

// TestTailLoss drops the last two frames of a stream of messages, once: the
// tail-loss probe resends the last, its acknowledgement shows the other
// missing behind a frame sent later, and that is resent at once — well
// before the retransmission timeout (1 s here), which was the only repair
// of a tail loss shorter than dupThresh frames.
func TestTailLoss(t *testing.T) {
	a, b, _, sb, ab, ba := pair(t, 0, 0, 0, 1)
	ab.full, ba.full = 0, 0
	a.cfg.MinRTO = time.Second
	for i := range 9 { // the last, of 40 KiB, in many frames
		if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, uint64(i)), content(0, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	ab.q = ab.q[:len(ab.q)-2]
	start := time.Now()
	for sb.next[0] < 9 || a.Pending() > 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("not repaired in 5 s: %s", state(a, b))
		}
		b.Poll()
		a.Poll()
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("a tail loss of two frames took %v to repair (retransmission timeout 1 s)", d)
	}
	if c := a.Counters(); c.Timeouts != 0 {
		t.Fatalf("repaired by the retransmission timeout: %+v", c)
	}
}

// TestLinkTakesNothing: the link refuses every frame (a TX ring that the
// kernel no longer drains), so a message's frames are cut but never
// transmitted; or the peer grants no credits, so none is even cut. The
// peer is still reported lost after DeadAfter, and the transport keeps a
// deadline meanwhile, so that a waiter sleeping until Deadline polls in
// time.
func TestLinkTakesNothing(t *testing.T) {
	for _, c := range []string{"link-full", "link-full-queued", "no-credits"} {
		t.Run(c, func(t *testing.T) {
			a, _, sa, _, ab, _ := pair(t, 0, 0, 0, 1)
			a.cfg.DeadAfter = 300 * time.Millisecond
			n := 1
			switch c {
			case "link-full":
				ab.full = 1
			case "link-full-queued": // more than the credits: the rest waits in the queue
				ab.full = 1
				n = 4
			case "no-credits":
				a.peer(1).credit = 0
			}
			for i := range n {
				if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, uint64(i)), content(0, 9), nil); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			for sa.lost == nil {
				if time.Since(start) > 5*time.Second {
					t.Fatalf("no Lost 5 s after the link stopped taking frames (DeadAfter 300 ms)\n%s", state(a, a))
				}
				a.Poll()
				d := a.Deadline()
				if sa.lost == nil && d.IsZero() {
					t.Fatalf("frames wait for the link and the transport has no deadline: a sleeping waiter would never poll\n%s", state(a, a))
				}
				time.Sleep(min(time.Until(d), 50*time.Millisecond))
			}
			if !strings.Contains(sa.lost.Error(), "rank 1") {
				t.Errorf("the loss does not name the peer: %v", sa.lost)
			}
			if a.Pending() != 0 {
				t.Errorf("%d frames and messages still pending to a lost peer", a.Pending())
			}
		})
	}
}

// TestDelayedAck: a receiver whose link runs dry does not acknowledge a
// lone frame at once (frames come in bursts, and an acknowledgement after
// every burst costs a frame through the kernel each) but within ackDelay,
// and its Deadline says when; an early frame is acknowledged at once.
func TestDelayedAck(t *testing.T) {
	a, b, _, sb, _, ba := pair(t, 0, 0, 0, 1)
	if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, 0), content(0, 0), nil); err != nil {
		t.Fatal(err)
	}
	got := time.Now()
	b.Poll()
	if sb.next[0] != 1 {
		t.Fatalf("the frame was not delivered")
	}
	// (Deadline is a wall-clock time: allow for the clock's steps.)
	if dl := b.Deadline(); dl.IsZero() || dl.Sub(got) > ackDelay+time.Millisecond {
		t.Errorf("Deadline %v after delivery: want the acknowledgement due within %v", dl.Sub(got), ackDelay)
	}
	for b.Counters().AcksOut == 0 {
		if time.Since(got) > time.Second {
			t.Fatalf("no acknowledgement a second after the frame")
		}
		b.Poll()
	}
	if d := time.Since(got); d < ackDelay {
		t.Errorf("acknowledged %v after the frame: want no sooner than %v", d, ackDelay)
	}
	if len(ba.q) != 1 {
		t.Fatalf("%d frames on the way back, want the acknowledgement", len(ba.q))
	}
	// An early frame (its predecessor lost) is acknowledged at once, for
	// the sender's loss detection.
	for i := 1; i <= 2; i++ {
		if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, uint64(i)), content(0, 0), nil); err != nil {
			t.Fatal(err)
		}
	}
	a2b := a.cfg.Link.(*end).out
	a2b.q = a2b.q[1:] // lose message 1
	b.Poll()
	if c := b.Counters(); c.AcksOut != 2 {
		t.Errorf("%d acknowledgements after an early frame, want 2 (one at once)", c.AcksOut)
	}
}

// TestIdlePeerLost cuts the link while nothing is in flight either way
// (every frame acknowledged, both ranks waiting for the other): the
// keepalive probes go unanswered and each rank reports the other lost
// after DeadAfter. With the link whole the probes are answered and
// nobody is lost.
func TestIdlePeerLost(t *testing.T) {
	for _, cut := range []bool{true, false} {
		t.Run(fmt.Sprintf("cut=%v", cut), func(t *testing.T) {
			a, b, sa, sb, ab, ba := pairWith(t, 0, 0, 0, 1, func(cfg *Config) {
				cfg.DeadAfter, cfg.KeepIdle = 300*time.Millisecond, 50*time.Millisecond
			})
			exchange(t, a, b, sa, sb, 3)
			ab.cut, ba.cut = cut, cut
			start := time.Now()
			for time.Since(start) < 2*time.Second && (sa.lost == nil || sb.lost == nil) {
				a.Poll()
				b.Poll()
			}
			if !cut {
				if sa.lost != nil || sb.lost != nil {
					t.Fatalf("a whole, idle link lost a peer: %v / %v", sa.lost, sb.lost)
				}
				if a.Counters().KeepProbes == 0 {
					t.Errorf("no keepalive probe in 2 s of silence (KeepIdle 50 ms)")
				}
				return
			}
			if sa.lost == nil || sb.lost == nil {
				t.Fatalf("2 s after the link was cut with nothing in flight: lost %v / %v, want both (DeadAfter 300 ms)", sa.lost, sb.lost)
			}
			if d := time.Since(start); d < 300*time.Millisecond {
				t.Errorf("lost after %v, before DeadAfter", d)
			}
			t.Logf("rank 0: %v", sa.lost)
		})
	}
}

// sendOnSent is a Handler that, when the queued message with token tok is
// in frames, sends a message to rank to: a Send from inside a turn's loop
// over the peers.
type sendOnSent struct {
	tr   *Transport
	to   int
	sent bool
}

func (h *sendOnSent) Frame(peer int, head, body []byte) {}
func (h *sendOnSent) Lost(peer int, err error)          {}
func (h *sendOnSent) Sent(tok any) {
	if _, err := h.tr.Send(h.to, binary.LittleEndian.AppendUint64(nil, 1), content(0, 1), nil); err == nil {
		h.sent = true
	}
}

// TestIdleTurnAfterHandlerSend: a turn that finds no frame and no timer due
// does nothing, and a Send ends that state, also one made by a Handler from
// inside a turn to a peer the turn has already looked at. Rank 0 sends
// to rank 2 (delivered), then to rank 1 a message that waits for credits;
// when it goes, Handler.Sent sends to rank 2 a frame the link loses. Rank
// 0 then only polls: the tail-loss probe (hundreds of microseconds, the
// retransmission timeout being 1 s and the keepalive 1 s) must repair it.
// Then the same for a Send from an idle rank, outside a turn.
func TestIdleTurnAfterHandlerSend(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 1))
	to1, to2 := &pipe{rng: rng}, &pipe{rng: rng}
	from1, from2 := &pipe{rng: rng}, &pipe{rng: rng}
	h := &sendOnSent{to: 2}
	mk := func(rank int, hd Handler, l Link, window int) *Transport {
		tr, err := New(Config{Rank: rank, Size: 3, Job: 42, Secret: testSecret, MAC: mac(rank),
			Resolve: func(p int) (net.HardwareAddr, error) { return mac(p), nil },
			Handler: hd, Link: l, MinRTO: time.Second, DeadAfter: 15 * time.Second, RecvWindow: window})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	// Rank 0's link: frames to rank 1 and 2 go into their own pipes.
	a := mk(0, h, &fanout{outs: map[byte]*pipe{1: to1, 2: to2}, ins: []*pipe{from1, from2}}, 0)
	h.tr = a
	s1 := &sink{t: t, next: map[int]int{}}
	s2 := &sink{t: t, next: map[int]int{}}
	b := mk(1, s1, &end{in: to1, out: from1}, 1) // grants one frame at a time
	c := mk(2, s2, &end{in: to2, out: from2}, 0)
	if _, err := a.Send(2, binary.LittleEndian.AppendUint64(nil, 0), content(0, 0), nil); err != nil {
		t.Fatal(err)
	}
	for s2.next[0] < 1 || a.Pending() > 0 {
		c.Poll()
		a.Poll()
	}
	// First contact with rank 1 assumes this rank's own credits (many);
	// let it learn rank 1's single credit first.
	if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, 0), content(0, 0), nil); err != nil {
		t.Fatal(err)
	}
	for s1.next[0] < 1 || a.Pending() > 0 {
		b.Poll()
		a.Poll()
	}
	for i := 1; i <= 2; i++ { // the second waits for the first's acknowledgement
		if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, uint64(i)), content(0, i), "tok"); err != nil {
			t.Fatal(err)
		}
	}
	if h.sent {
		t.Fatal("the second message to rank 1 did not wait for credits")
	}
	start := time.Now()
	lost := false
	for s1.next[0] < 3 || s2.next[0] < 2 || a.Pending() > 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("not delivered in 5 s: rank 1 has %d, rank 2 %d of 2; %s", s1.next[0], s2.next[0], state(a, c))
		}
		b.Poll()
		a.Poll()
		if h.sent && !lost {
			to2.q, lost = nil, true // the frame the Handler sent is lost
			start = time.Now()
		}
		c.Poll()
	}
	if !lost {
		t.Fatal("the Handler never sent")
	}
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Errorf("the lost frame took %v to repair (tail-loss probe: hundreds of µs; other timers: 1 s)", d)
	}
	// Now every frame is acknowledged and rank 0's turns are idle until
	// the keepalive, a second away. A Send from outside a turn, its frame
	// lost, must end that: the probe repairs it, not the keepalive.
	for range 10 {
		a.Poll()
	}
	if _, err := a.Send(2, binary.LittleEndian.AppendUint64(nil, 2), content(0, 2), nil); err != nil {
		t.Fatal(err)
	}
	to2.q = nil
	start = time.Now()
	for s2.next[0] < 3 || a.Pending() > 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("not delivered in 5 s: %s", state(a, c))
		}
		a.Poll()
		c.Poll()
	}
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Errorf("a lost frame sent from an idle rank took %v to repair (tail-loss probe: hundreds of µs; other timers: 1 s)", d)
	}
}

// fanout is a link of rank 0 to several peers: it sends each frame into
// the pipe of its destination (the last byte of its destination MAC) and
// receives from all of its pipes.
type fanout struct {
	outs map[byte]*pipe
	ins  []*pipe
}

func (f *fanout) Send(fr []byte) bool {
	p := f.outs[fr[offDst+5]]
	p.q = append(p.q, append([]byte(nil), fr...))
	return true
}

func (f *fanout) Flush() error { return nil }

func (f *fanout) Receive(budget int, got func([][]byte)) int {
	n := 0
	for _, in := range f.ins {
		n += (&end{in: in}).Receive(budget-n, got)
	}
	return n
}

// dropSeq is a link that loses the first times transmissions of the data
// frame numbered seq.
type dropSeq struct {
	Link
	seq   uint32
	times int
}

func (d *dropSeq) Send(f []byte) bool {
	if d.times > 0 && f[offKind] == kindData && binary.LittleEndian.Uint32(f[offSeq:]) == d.seq {
		d.times--
		return true
	}
	return d.Link.Send(f)
}

// TestRelostWhileBlocked: in a stream that the receiver's credits hold
// back (more queued than it grants), a frame is lost and so is its first
// retransmission. Every frame after it is held by the receiver, nothing
// new may go, and no acknowledgement comes that could show the resent
// frame lost: before, only the retransmission timeout (at least 5 ms,
// here 1 s) repaired that, and at 1 % loss on links of MTU 65000 such
// stalls were a few percent of a 4 MiB stream's time. The tail-loss probe
// now runs while the sender is blocked by credits too, and repairs it in
// a few round trips.
func TestRelostWhileBlocked(t *testing.T) {
	a, b, _, sb, ab, ba := pair(t, 0, 0, 0, 1)
	ab.full, ba.full = 0, 0
	a.cfg.MinRTO = time.Second
	a.cfg.RecvWindow, b.cfg.RecvWindow = 16, 16
	a.cfg.Link = &dropSeq{Link: a.cfg.Link, seq: 5, times: 2}
	for i := range 10 { // 72 frames in all: most wait for credits
		if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, uint64(i)), content(0, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for sb.next[0] < 10 || a.Pending() > 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("not delivered in 5 s: %s", state(a, b))
		}
		b.Poll()
		a.Poll()
	}
	if a.cfg.Link.(*dropSeq).times != 0 {
		t.Fatal("frame 5 was not lost twice")
	}
	if c := a.Counters(); c.Timeouts != 0 {
		t.Errorf("repaired by the retransmission timeout after %v: %+v", time.Since(start), c)
	}
}

// TestEarlyRunAcks: behind one lost frame, a run of 40 frames arrives
// early, one per turn of the receiver (as frames of 64 KB do: a turn takes
// 64 UMEM frames, three or four of them). The receiver acknowledges at
// once the first dupThresh of them (what the sender needs to resend the
// hole) and a frame that opens a new hole; the rest of the run waits for
// the usual acknowledgement, every ackEvery frames or after ackDelay.
// Acknowledging every early frame's turn at once sent an acknowledgement
// for every four or five data frames while holes were repaired (at 1 %
// loss on links of MTU 65000, a fifth of all the frames the receiver took
// in). The stream is still delivered whole, in order.
func TestEarlyRunAcks(t *testing.T) {
	got := &orderSink{}
	a, b, _, _, ab, _ := pairWith(t, 0, 0, 0, 1, func(c *Config) {
		if c.Rank == 1 {
			c.Handler = got
		}
	})
	ab.full = 0
	a.cfg.Link = &dropSeq{Link: a.cfg.Link, seq: 0, times: 1}
	for i := range 42 { // one frame each
		if _, err := a.Send(1, binary.LittleEndian.AppendUint64(nil, uint64(i)), make([]byte, 100), nil); err != nil {
			t.Fatal(err)
		}
	}
	run := append([][]byte(nil), ab.q...)
	run = append(run[:20], run[21:]...) // a second hole, inside the run
	for _, f := range run {
		ab.q = append(ab.q[:0], f)
		b.Poll()
	}
	if n, most := b.Counters().AcksOut, int64(dupThresh+1+40/ackEvery); n > most || n < dupThresh {
		t.Errorf("%d acknowledgements for a run of 40 early frames behind a hole, want %d to %d", n, dupThresh, most)
	}
	start := time.Now()
	for got.n < 42 || a.Pending() > 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("not delivered in 5 s (%d of 42): %s", got.n, state(a, b))
		}
		a.Poll()
		b.Poll()
	}
	if got.bad != "" {
		t.Fatal(got.bad)
	}
}

// orderSink is a Handler that checks that messages come numbered 0, 1, 2, ...
type orderSink struct {
	n   int
	bad string
}

func (o *orderSink) Frame(peer int, head, body []byte) {
	if i := int(binary.LittleEndian.Uint64(head)); i != o.n && o.bad == "" {
		o.bad = fmt.Sprintf("message %d arrived, want %d", i, o.n)
	}
	o.n++
}
func (o *orderSink) Sent(tok any)             {}
func (o *orderSink) Lost(peer int, err error) {}

// kickTimer is a link that notes the time of its last Flush (the kick).
type kickTimer struct {
	*end
	at int64
}

func (k *kickTimer) Flush() error { k.at = clock(); return nil }

// TestSendDatesAfterKick: Send reads the clock after the link took its
// frames (the kick), not before it, where the reading would delay the
// message, and dates the frames and the retransmission timer it starts
// with that reading, not with the time of the transport's last turn,
// which may be long past (a rank that computed since).
func TestSendDatesAfterKick(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	k := &kickTimer{end: &end{in: &pipe{rng: rng}, out: &pipe{rng: rng}}}
	a, err := New(Config{Rank: 0, Size: 2, Job: 42, Secret: testSecret, MAC: mac(0),
		Resolve: func(p int) (net.HardwareAddr, error) { return mac(p), nil },
		Handler: &sink{t: t, next: map[int]int{}}, Link: k, MinRTO: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a.now = 1 // the last turn, long ago
	if _, err := a.Send(1, []byte("head"), []byte("body"), nil); err != nil {
		t.Fatal(err)
	}
	p := a.peers[1]
	if sl := p.slots[0]; !sl.sent || sl.sentAt < k.at {
		t.Fatalf("the frame is dated %d, before the kick (%d): sent %v", sl.sentAt, k.at, sl.sent)
	}
	if p.progress < k.at || p.rtoAt != p.progress+at(a.cfg.MinRTO) {
		t.Fatalf("the retransmission timer runs from %d to %d; want from the kick (%d) on", p.progress, p.rtoAt, k.at)
	}
}

// TestSendNow: a one-frame message goes at once, as Send's would; one too
// large for a frame, or one behind a message that waits for credits, is
// not sent and SendNow reports false, so that its caller can take the path
// that waits, and the messages keep their order.
func TestSendNow(t *testing.T) {
	a, b, _, sb, ab, ba := pair(t, 0, 0, 0, 1)
	ab.full, ba.full = 0, 0
	a.cfg.RecvWindow, b.cfg.RecvWindow = 4, 4
	msg := func(i int) ([]byte, []byte) { return binary.LittleEndian.AppendUint64(nil, uint64(i)), content(0, i) }
	for i := range 4 { // 0, 1, 8 and 1000 bytes: a frame each, the 4 frames granted
		h, body := msg(i)
		if ok, err := a.SendNow(1, h, body); !ok || err != nil || len(ab.q) != i+1 {
			t.Fatalf("SendNow of message %d (%d bytes): %v, %v, %d frames on the link", i, len(body), ok, err, len(ab.q))
		}
	}
	h, body := msg(4) // 1438 bytes: two frames
	if ok, err := a.SendNow(1, h, body); ok || err != nil || len(ab.q) != 4 {
		t.Fatalf("SendNow of a message of two frames: %v, %v, %d frames on the link", ok, err, len(ab.q))
	}
	if now, err := a.Send(1, h, body, nil); now || err != nil {
		t.Fatalf("Send of message 4 with no credits left: now %v, err %v", now, err)
	}
	h, body = msg(5)
	if ok, err := a.SendNow(1, h, body); ok || err != nil || len(ab.q) != 4 {
		t.Fatalf("SendNow behind a message waiting for credits: %v, %v, %d frames on the link", ok, err, len(ab.q))
	}
	if _, err := a.Send(1, h, body, nil); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); sb.next[0] < 6 || a.Pending() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("not delivered in 10 s: %s", state(a, b))
		}
		b.Poll()
		a.Poll()
	}
}
