package xsk

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Lending: a sender of large frames builds each one in place in the UMEM,
// in a run of contiguous send frames it keeps until it no longer needs the
// frame (a reliable transport: until the peer acknowledged it), so that
// the frame's bytes are written once on the sending side instead of into
// a buffer of the caller's and then copied into the UMEM by SendFrame. A
// run goes back to the free runs when the caller has returned it and the
// kernel has completed every transmission of it.

// lender is the socket's set of runs.
type lender struct {
	base  uint64 // UMEM offset of run 0
	size  uint64 // bytes of a run
	frame uint64 // bytes of a UMEM frame
	runs  int
	free  []int32   // runs nobody holds
	state []lentRun // by run
}

// lentRun is the state of one run.
type lentRun struct {
	pieces int  // descriptors of it the kernel has not completed
	held   bool // lent and not yet returned
}

func (l *lender) init(base uint64, run, runs int, frame uint64) {
	l.base, l.size, l.frame, l.runs = base, uint64(run)*frame, frame, runs
	l.state = make([]lentRun, runs)
	for i := runs - 1; i >= 0; i-- {
		l.free = append(l.free, int32(i))
	}
}

// completed takes back one completed descriptor of a run.
func (l *lender) completed(addr uint64) {
	r := int((addr - l.base) / l.size)
	st := &l.state[r]
	st.pieces--
	if st.pieces == 0 && !st.held {
		l.free = append(l.free, int32(r))
	}
}

// LendSize is the most bytes a lent run holds (0: the socket lends none).
func (s *Socket) LendSize() int { return int(s.lend.size) }

// Lend takes a free run of send frames: buf is its memory in the UMEM, to
// build a frame in, and id names it for SendLent, LentBusy and Return. ok
// is false when every run is lent or still in the kernel's hands.
func (s *Socket) Lend() (id int, buf []byte, ok bool) {
	l := &s.lend
	if len(l.free) == 0 {
		s.Completed(s.FreeTX)
	}
	r := l.take()
	if r < 0 {
		return 0, nil, false
	}
	at := l.base + uint64(r)*l.size
	return r, s.umem[at : at+l.size : at+l.size], true
}

// SendLent puts the first n bytes of run id on the TX ring as one frame,
// in pieces of a UMEM frame (all but the last marked XDP_PKT_CONTD). It
// reports false when the ring is short of room, or when the kernel still
// holds an earlier transmission of the run (see LentBusy): try again
// later. Kick makes the kernel send.
func (s *Socket) SendLent(id, n int) bool {
	l := &s.lend
	k := (n + int(l.frame) - 1) / int(l.frame)
	if n <= 0 || uint64(n) > l.size || (k > 1 && !s.multi) || s.LentBusy(id) || s.tx.free() < uint32(k) {
		return false
	}
	at := l.base + uint64(id)*l.size
	p := atomic.LoadUint32(s.tx.producer)
	for i := range k {
		d := s.tx.xdpDesc(p + uint32(i))
		d.Addr, d.Len, d.Options = at+uint64(i)*l.frame, uint32(min(n-i*int(l.frame), int(l.frame))), 0
		if i < k-1 {
			d.Options = unix.XDP_PKT_CONTD
		}
	}
	atomic.StoreUint32(s.tx.producer, p+uint32(k))
	s.inTX += k
	l.sent(id, k)
	return true
}

// LentBusy reports whether the kernel has not yet completed a
// transmission of run id: its memory must not change until it has.
func (s *Socket) LentBusy(id int) bool {
	if s.lend.state[id].pieces == 0 {
		return false
	}
	s.Completed(s.FreeTX)
	return s.lend.state[id].pieces != 0
}

// Return gives run id back; it is free again once the kernel has
// completed every transmission of it.
func (s *Socket) Return(id int) { s.lend.giveBack(id) }

// take takes a free run, or reports -1.
func (l *lender) take() int {
	n := len(l.free)
	if n == 0 {
		return -1
	}
	r := int(l.free[n-1])
	l.free = l.free[:n-1]
	l.state[r].held = true
	return r
}

// sent counts k descriptors of run r handed to the kernel.
func (l *lender) sent(r, k int) { l.state[r].pieces += k }

// giveBack ends the loan of run r; it is free once the kernel is done.
func (l *lender) giveBack(r int) {
	st := &l.state[r]
	if !st.held {
		return
	}
	st.held = false
	if st.pieces == 0 {
		l.free = append(l.free, int32(r))
	}
}
