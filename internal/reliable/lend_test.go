package reliable

import (
	"bytes"
	"fmt"
	"testing"
)

// lendEnd is an end of a pipe that lends buffers, as the AF_XDP socket
// lends runs of its UMEM: a buffer handed to SendLent stays the link's
// ("in the kernel") until a later Flush completes it, and the test checks
// that the transport never writes into a buffer while the link holds it,
// never uses one it has returned, and returns every one.
type lendEnd struct {
	*end
	t      *testing.T
	bufs   [][]byte
	held   []bool   // lent and not yet returned
	busy   [][]byte // a copy of what was sent, while the link holds it; nil when not
	free   []int
	sends  int // SendLent calls that sent
	holdUp int // Flushes a buffer stays busy
	age    []int
}

func newLendEnd(t *testing.T, e *end, n, size, holdUp int) *lendEnd {
	l := &lendEnd{end: e, t: t, holdUp: holdUp}
	for i := range n {
		l.bufs = append(l.bufs, make([]byte, size))
		l.held = append(l.held, false)
		l.busy = append(l.busy, nil)
		l.age = append(l.age, 0)
		l.free = append(l.free, i)
	}
	return l
}

func (l *lendEnd) Lend() (int, []byte, bool) {
	if len(l.free) == 0 {
		return 0, nil, false
	}
	id := l.free[len(l.free)-1]
	l.free = l.free[:len(l.free)-1]
	l.held[id] = true
	return id, l.bufs[id], true
}

func (l *lendEnd) SendLent(id, n int) bool {
	if !l.held[id] {
		l.t.Errorf("SendLent of buffer %d, which the transport does not hold", id)
	}
	if l.busy[id] != nil {
		l.t.Errorf("SendLent of buffer %d while the link still holds it", id)
		return false
	}
	if !l.end.Send(l.bufs[id][:n]) {
		return false
	}
	l.busy[id], l.age[id] = append([]byte(nil), l.bufs[id][:n]...), 0
	l.sends++
	return true
}

func (l *lendEnd) LentBusy(id int) bool { return l.busy[id] != nil }

func (l *lendEnd) Return(id int) {
	if !l.held[id] {
		l.t.Errorf("buffer %d returned twice", id)
		return
	}
	l.held[id] = false
	if l.busy[id] == nil {
		l.free = append(l.free, id)
	}
}

// Flush completes the transmissions that have been busy for holdUp
// flushes, checking that their bytes did not change meanwhile.
func (l *lendEnd) Flush() error {
	for id, b := range l.busy {
		if b == nil {
			continue
		}
		if l.age[id]++; l.age[id] < l.holdUp {
			continue
		}
		if !bytes.Equal(b, l.bufs[id][:len(b)]) {
			l.t.Errorf("buffer %d changed while the link held it", id)
		}
		l.busy[id] = nil
		if !l.held[id] {
			l.free = append(l.free, id)
		}
	}
	return nil
}

// outstanding is the number of buffers not free: lent, or still busy.
func (l *lendEnd) outstanding() int { return len(l.bufs) - len(l.free) }

// TestLentFrames sends large messages cut straight into buffers the link
// lends (Lender), over a lossy, duplicating, reordering link whose
// transmissions stay busy for a few flushes, with pools large and too
// small for the window, and jumbo frames received in pieces: every
// message arrives once, whole and in order; the transport never writes
// into nor resends a buffer the link still holds, never uses a returned
// one, and returns every one once all is acknowledged; frames were lent.
func TestLentFrames(t *testing.T) {
	for _, c := range []struct {
		pool, holdUp, mtu, piece int
		loss                     float64
	}{
		{64, 1, 9014, 0, 0},
		{64, 3, 9014, 3840, 0.03},
		{5, 2, 1514, 0, 0.03},
		{300, 4, 65014, 3840, 0.02},
	} {
		t.Run(fmt.Sprintf("pool=%d,hold=%d,mtu=%d,loss=%v", c.pool, c.holdUp, c.mtu, c.loss), func(t *testing.T) {
			var ends []*lendEnd
			a, b, sa, sb, ab, ba := pairLinks(t, c.loss, 0.02, 0.1, 5, func(cfg *Config) { cfg.MTU = c.mtu }, func(e *end) Link {
				l := newLendEnd(t, e, c.pool, c.mtu, c.holdUp)
				ends = append(ends, l)
				return l
			})
			ab.piece, ba.piece = c.piece, c.piece
			exchange(t, a, b, sa, sb, 300)
			for i, tr := range []*Transport{a, b} {
				cnt := tr.Counters()
				if cnt.Lent == 0 || ends[i].sends == 0 {
					t.Errorf("rank %d: no frame lent (counters %+v)", i, cnt)
				}
				if c.loss > 0 && cnt.Retransmits == 0 {
					t.Errorf("rank %d: %v loss and no retransmission", i, c.loss)
				}
				// Everything is acknowledged: the link's last flushes
				// complete what it still holds.
				for range c.holdUp {
					ends[i].Flush()
				}
				if n := ends[i].outstanding(); n != 0 {
					t.Errorf("rank %d: %d lent buffers never came back", i, n)
				}
			}
		})
	}
}

// TestLentFramesLostPeer checks that a peer given up returns the buffers
// of the frames still outstanding to it.
func TestLentFramesLostPeer(t *testing.T) {
	var ends []*lendEnd
	a, _, _, sb, ab, _ := pairLinks(t, 0, 0, 0, 9, func(cfg *Config) { cfg.MTU = 9014 }, func(e *end) Link {
		l := newLendEnd(t, e, 32, 9014, 1)
		ends = append(ends, l)
		return l
	})
	ab.cut = true
	_ = sb
	body := make([]byte, 200<<10)
	if _, err := a.Send(1, []byte("head"), body, nil); err != nil {
		t.Fatal(err)
	}
	if ends[0].outstanding() == 0 {
		t.Fatal("a large message took no lent buffer")
	}
	a.lose(a.peers[1], errBye)
	ends[0].Flush()
	if n := ends[0].outstanding(); n != 0 {
		t.Errorf("%d lent buffers still out after the peer was lost", n)
	}
}

// pairLinks is pairWith with each transport's link made by wrap from its
// end of the pipes.
func pairLinks(t *testing.T, loss, dup, reorder float64, seed uint64, set func(*Config), wrap func(*end) Link) (a, b *Transport, sa, sb *sink, ab, ba *pipe) {
	a, b, sa, sb, ab, ba = pairWith(t, loss, dup, reorder, seed, set)
	a.cfg.Link = wrap(a.cfg.Link.(*end))
	b.cfg.Link = wrap(b.cfg.Link.(*end))
	a.lender, _ = a.cfg.Link.(Lender)
	b.lender, _ = b.cfg.Link.(Lender)
	return
}
