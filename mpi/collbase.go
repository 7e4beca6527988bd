package mpi

import (
	"math/bits"
	"sync"

	"github.com/adimpi/adimpi/adi"
)

// coll is the environment one collective operation runs in: the processes
// taking part (in their collective order), the context its messages use and
// the tag that keeps it apart from every other collective in flight on the
// same communicator. Algorithms work on packed, contiguous byte slices.
type coll struct {
	r     *runtime
	op    string
	ctx   uint32
	world []int // rank → world rank
	rank  int
	size  int
	tag   int
	h     *hierarchy // how the ranks lie on hosts; nil on one host (collhier.go)
	// nb is the board of this host's ranks for a blocking tiered
	// collective's host phases (Comm.nodeBoard), nil otherwise.
	nb *board

	// exact makes wait check every receive's size (waitExact); mis is the
	// first count mismatch it saw.
	exact bool
	mis   error
}

// A collective's tag is 1<<collSeqBit plus its sequence number (mod 2^23)
// shifted left by collSubBits; the low bits tell apart the messages of one
// collective that must not match each other (neighbourhood collectives on a
// Cartesian topology). Tags below 1<<collSeqBit are left to the runtime's
// own protocols on the collective context (Finalize's barrier uses small
// tags), and tags at and above 1<<collTagBits are reserved for
// CreateGroup's context agreement.
const (
	collSubBits = 6
	collSeqBit  = 29
	collTagBits = 30
)

// newColl starts a collective on communicator c: it takes c's next sequence
// number, so every rank must call collectives on c in the same order.
func (c *Comm) newColl(r *runtime, op string) *coll {
	seq := c.collSeq.Add(1)
	return &coll{r: r, op: op, ctx: c.ctx + 1, world: c.world, rank: c.rank, size: len(c.world), tag: 1<<collSeqBit | int(seq%(1<<(collSeqBit-collSubBits)))<<collSubBits, h: c.hierOf(r)}
}

func (e *coll) post(send bool, peer int, b []byte) (*adi.Request, error) {
	return e.postTag(send, peer, e.tag, b)
}

func (e *coll) postTag(send bool, peer, tag int, b []byte) (*adi.Request, error) {
	ar := &adi.Request{Context: e.ctx, Peer: e.world[peer], Tag: tag, Buf: adi.Bytes(b)}
	e.r.mu.Lock()
	var err error
	if send {
		ar.Op = adi.OpSend
		err = e.r.dev.Isend(ar)
	} else {
		ar.Op = adi.OpRecv
		err = e.r.dev.Irecv(ar)
	}
	e.r.mu.Unlock()
	if err != nil {
		return nil, named(e.op, err)
	}
	return ar, nil
}

// isend sends b to peer; once this rank has seen a count mismatch
// (e.mis), it sends a marker instead, of a size the peer takes for a
// mismatch too, so that the error reaches every rank whose result the
// mismatch spoils. The peer expects a size that its own count gives, which
// this rank does not know: the marker is one byte (two where b is one
// byte), which differs from b and from the empty block of a rank whose
// count is zero; only a peer whose block is of one or two bytes, unlike
// this rank's, can miss it.
func (e *coll) isend(peer int, b []byte) (*adi.Request, error) {
	if e.mis != nil {
		if len(b) == 1 {
			b = misMarker[:2]
		} else {
			b = misMarker[:1]
		}
	}
	return e.post(true, peer, b)
}

// misMarker is the data of isend's marker; nothing writes it.
var misMarker [2]byte

func (e *coll) irecv(peer int, b []byte) (*adi.Request, error) { return e.post(false, peer, b) }

// wait completes every request (nil entries are skipped) and returns the
// first error; with e.exact, a receive whose size differs from its buffer's
// is no error but a mismatch, recorded in e.mis (waitExact).
func (e *coll) wait(reqs ...*adi.Request) error {
	if e.exact {
		return e.waitExact(reqs...)
	}
	if err := e.complete(reqs...); err != nil {
		return err
	}
	for _, q := range reqs {
		if q != nil && q.Status.Err != nil {
			return restated(e.op, q.Status.Err, e.commRank, true)
		}
	}
	return nil
}

// complete waits until every request is done and returns the first error
// other than a truncated receive: the callers look at the receives.
func (e *coll) complete(reqs ...*adi.Request) error {
	err := e.r.waitFor(func() bool {
		for _, q := range reqs {
			if q != nil && !q.Done() {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, q := range reqs {
		if q != nil && q.Status.Err != nil && !truncated(q) {
			return restated(e.op, q.Status.Err, e.commRank, true)
		}
	}
	return nil
}

func truncated(q *adi.Request) bool {
	return q.Op == adi.OpRecv && ErrorClass(q.Status.Err) == ErrTruncate
}

// waitExact is wait for the algorithms whose receives expect exactly their
// buffer's bytes: a receive that got fewer (ErrCount) or more (ErrTruncate)
// is a peer whose count differs from this rank's. It is recorded in e.mis
// rather than returned, so that the rank goes on with its part of the
// exchange (with empty messages, see isend) and nobody waits for it; the
// algorithm returns e.mis at its end.
func (e *coll) waitExact(reqs ...*adi.Request) error {
	if err := e.complete(reqs...); err != nil {
		return err
	}
	for _, q := range reqs {
		if q != nil && q.Op == adi.OpRecv && e.mis == nil {
			e.mis = e.sizeErr(q)
		}
	}
	return nil
}

// sizeErr is the mismatch a receive shows, or nil when it got exactly its
// buffer's bytes.
func (e *coll) sizeErr(q *adi.Request) error {
	want := q.Buf.Size()
	switch {
	case truncated(q):
		return errorf(ErrTruncate, e.op, "rank %d sends more than the %d bytes this rank's count expects from it: the ranks' counts differ", e.commRank(q.Status.Source), want)
	case q.Status.Bytes != want:
		return errorf(ErrCount, e.op, "rank %d sends %d bytes where this rank's count expects %d: it, or a rank before it, passes another count than this rank", e.commRank(q.Status.Source), q.Status.Bytes, want)
	}
	return nil
}

// commRank is the rank in the collective of the process of world rank w
// (for errors: a linear search; w itself if none).
func (e *coll) commRank(w int) int {
	for i, x := range e.world {
		if x == w {
			return i
		}
	}
	return w
}

func (e *coll) send(peer int, b []byte) error {
	q, err := e.isend(peer, b)
	if err != nil {
		return err
	}
	return e.wait(q)
}

func (e *coll) recv(peer int, b []byte) error {
	q, err := e.irecv(peer, b)
	if err != nil {
		return err
	}
	return e.wait(q)
}

// sendrecv exchanges without deadlock; a negative peer skips that half.
func (e *coll) sendrecv(dst int, sb []byte, src int, rb []byte) error {
	var rq, sq *adi.Request
	var err error
	if src >= 0 {
		if rq, err = e.irecv(src, rb); err != nil {
			return err
		}
	}
	if dst >= 0 {
		if sq, err = e.isend(dst, sb); err != nil {
			_ = e.wait(rq)
			return err
		}
	}
	return e.wait(rq, sq)
}

// scratchPools recycle the algorithms' temporary buffers by power-of-two
// size class: fresh memory costs page faults on every large collective.
var scratchPools [48]sync.Pool

// scratch returns n bytes of uninitialised temporary space.
func scratch(n int) []byte {
	if n <= 0 {
		return nil
	}
	c := bits.Len(uint(n - 1))
	if v, ok := scratchPools[c].Get().(*[]byte); ok {
		return (*v)[:n]
	}
	return make([]byte, n, 1<<c)
}

// release returns space from scratch for reuse; b must not be used again.
func release(bufs ...[]byte) {
	for _, b := range bufs {
		c := bits.Len(uint(cap(b) - 1))
		if cap(b) == 0 || cap(b) != 1<<c {
			continue
		}
		b = b[:0]
		scratchPools[c].Put(&b)
	}
}
