package mpi

import (
	"encoding/binary"

	"github.com/adimpi/adimpi/adi"
)

// Counts that differ between ranks, in the reductions' message algorithms
// (Reduce, Allreduce, Scan, Exscan). Their messages are partial results
// that a rank combines with its own, so a wrong size seen by one rank
// spoils the results of ranks that never receive from the culprit. Every
// message therefore ends with a trailer: the smallest and largest byte
// counts of the ranks whose data it carries (a span). The algorithms work
// in scratch buffers with room for it, so it costs 16 bytes a message and
// no copy. A receive buffer holds this rank's count plus a trailer; a
// shorter message's trailer is at its end, and a longer one is truncated
// (its sender's count is larger than this rank's). Every rank merges what
// it receives and, at the end, fails when its span is not its own count:
// ErrTruncate when a peer passes more, ErrCount when one passes fewer.
// Since every rank's data reach every rank whose result they enter, the
// counts do too, and no rank returns a result spoilt by another's count.

const trailerLen = 16

// countSpan is the range of byte counts a rank has heard of, and its own.
type countSpan struct{ lo, hi, own int }

func ownSpan(m int) countSpan { return countSpan{m, m, m} }

func (s *countSpan) merge(t countSpan) {
	s.lo, s.hi = min(s.lo, t.lo), max(s.hi, t.hi)
}

// put writes s as the trailer at b's start (b holds trailerLen bytes).
func (s countSpan) put(b []byte) {
	binary.LittleEndian.PutUint64(b, uint64(s.lo))
	binary.LittleEndian.PutUint64(b[8:], uint64(s.hi))
}

// take merges into s the trailer of a message that q received into b.
func (s *countSpan) take(q *adi.Request, b []byte) {
	got := q.Status.Bytes
	switch {
	case truncated(q):
		s.hi = max(s.hi, s.own+1) // the sender's count is larger; its trailer is lost
	case got < trailerLen:
		s.lo = 0 // no trailer: not one of these algorithms' messages
	default:
		t := countSpan{lo: int(binary.LittleEndian.Uint64(b[got-trailerLen:])), hi: int(binary.LittleEndian.Uint64(b[got-8:]))}
		if t.lo < 0 || t.hi < t.lo {
			t = countSpan{lo: 0, hi: s.own + 1}
		}
		s.merge(t)
	}
}

// err is the error of a rank whose span is s.
func (s countSpan) err(op string) error {
	m := s.own
	switch {
	case s.hi > m:
		return errorf(ErrTruncate, op, "a rank passes more than this rank's %d bytes: every rank must pass the same count", m)
	case s.lo < m:
		return errorf(ErrCount, op, "a rank passes %d bytes, fewer than this rank's %d: every rank must pass the same count", s.lo, m)
	}
	return nil
}

// exchangeTrailed sends m bytes of sb plus s as trailer to dst (dst < 0: no
// send) and receives from src into rb (len(rb) bytes of data plus a
// trailer; src < 0: no receive), merging the trailer it gets into s.
// Both buffers have trailerLen spare bytes.
func (e *coll) exchangeTrailed(dst int, sb []byte, m int, src int, rb []byte, s *countSpan) error {
	var rq, sq *adi.Request
	var err error
	if src >= 0 {
		if rq, err = e.postTag(false, src, e.tag, rb[:len(rb)+trailerLen]); err != nil {
			return err
		}
	}
	if dst >= 0 {
		s.put(sb[m : m+trailerLen])
		if sq, err = e.postTag(true, dst, e.tag, sb[:m+trailerLen]); err != nil {
			_ = e.complete(rq)
			return err
		}
	}
	if err := e.complete(rq, sq); err != nil {
		return err
	}
	if rq != nil {
		s.take(rq, rb[:len(rb)+trailerLen])
	}
	return nil
}

// trailed returns scratch space for m bytes and a trailer, as a slice of
// length m.
func trailed(m int) []byte { return scratch(m + trailerLen)[:m] }

// allreduceTrailed is recursive doubling (after MPICH: ranks beyond the
// largest power of two first fold into a partner) with a trailer on every
// message. With data, it reduces buf in place (es is the element size);
// otherwise it sends trailers only, which agrees the counts before an
// algorithm whose messages have none (Rabenseifner's, in allreduce): its
// messages are those of the data form with empty payloads, so that ranks
// that chose different forms from different counts still exchange the same
// messages with the same peers, and all see the mismatch.
func (e *coll) allreduceTrailed(buf []byte, red reducer, es int, data bool) (countSpan, error) {
	n, m := e.size, len(buf)
	pof2 := pof2Below(n)
	s := ownSpan(m)
	room := m // receive buffers' data bytes
	if !data {
		// A peer that takes the data form passes fewer bytes than m,
		// and than allreduceShort or pof2 elements (allreduce).
		room = min(m, max(allreduceShort, pof2*es))
	}
	pm := 0 // payload sent
	var acc []byte
	if data {
		pm = m
		acc = trailed(m)
		copy(acc, buf)
	} else {
		acc = trailed(0)
	}
	tmp := trailed(room)
	defer func() { release(acc[:cap(acc)], tmp[:cap(tmp)]) }()
	rem := n - pof2
	newrank := e.rank - rem
	if e.rank < 2*rem {
		if e.rank%2 == 0 {
			if err := e.exchangeTrailed(e.rank+1, acc, pm, nonePeer, nil, &s); err != nil {
				return s, err
			}
			newrank = -1
		} else {
			if err := e.exchangeTrailed(nonePeer, nil, 0, e.rank-1, tmp, &s); err != nil {
				return s, err
			}
			if data {
				red.apply(tmp, acc)
			}
			newrank = e.rank / 2
		}
	}
	phys := func(nr int) int {
		if nr < rem {
			return nr*2 + 1
		}
		return nr + rem
	}
	if newrank >= 0 {
		for mask := 1; mask < pof2; mask <<= 1 {
			newdst := newrank ^ mask
			if err := e.exchangeTrailed(phys(newdst), acc, pm, phys(newdst), tmp, &s); err != nil {
				return s, err
			}
			if !data {
				continue
			}
			if newdst < newrank {
				red.apply(tmp, acc)
			} else {
				red.apply(acc, tmp)
				acc, tmp = tmp, acc
			}
		}
	}
	if e.rank < 2*rem {
		if e.rank%2 == 1 {
			if err := e.exchangeTrailed(e.rank-1, acc, pm, nonePeer, nil, &s); err != nil {
				return s, err
			}
		} else {
			if err := e.exchangeTrailed(nonePeer, nil, 0, e.rank+1, tmp, &s); err != nil {
				return s, err
			}
			acc, tmp = tmp, acc
		}
	}
	if data {
		copy(buf, acc)
	}
	return s, nil
}
