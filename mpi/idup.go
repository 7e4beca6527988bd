package mpi

import (
	"encoding/binary"

	"github.com/adimpi/adimpi/datatype"
)

// Idup starts duplicating c (MPI_Comm_idup): the result has c's group(s),
// topology and copied attributes and a new context, like Dup, but the
// context agreement runs in the background. Idup returns the new
// communicator at once together with a request; the communicator may only
// be used once the request has completed (Wait, Test, Waitall, ...): before
// that every call on it fails with ErrComm. If the request completes with
// an error, the communicator stays unusable. Idup is collective over c
// (over both groups of an intercommunicator) and is ordered like the other
// collectives on c; the attribute Copy callbacks run in the calling
// goroutine, during Idup.
//
// Unlike the blocking creation calls, several Idups may be in flight at
// once, in any order across communicators, and overlap any other call: an
// Idup takes its context pair from a range of its own (the top idupPairs
// pairs) by proposing the lowest pair free on every member, taking it where
// still free, and retrying with another pair if any member had meanwhile
// given it to a concurrent Idup.
func (c *Comm) Idup() (*Comm, *Request, error) {
	n, q, err := c.idup()
	return n, q, c.raise(err)
}

// idup is Idup without the error handler.
func (c *Comm) idup() (*Comm, *Request, error) {
	const op = "MPI_Comm_idup"
	p, err := newPlanAny(op, c)
	if err != nil {
		return nil, nil, err
	}
	n := &Comm{name: c.name + ".idup", freed: true} // unusable until complete
	n.copyAttrs(c)
	n.inheritErrhandler(c)
	p.run = func(e *coll) error {
		pair, err := idupAgree(c, e)
		if err != nil {
			return err
		}
		n.ctx, n.rank, n.world, n.owned, n.topo = uint32(2*pair), c.rank, c.world, true, c.topo
		n.local = make(map[int]int, len(c.world))
		for i, w := range c.world {
			n.local[w] = i
		}
		n.inter, n.lworld = c.inter, c.lworld
		noteComm(n)
		n.freed = false // published to the caller by the request's completion
		return nil
	}
	return n, p.start(), nil
}

// idupAgree finds a context pair in the Idup range that every process of c
// takes for this Idup.
func idupAgree(c *Comm, e *coll) (int, error) {
	and := func(buf []byte, k int) error {
		if c.inter {
			return interAnd(c, e, buf, k)
		}
		return e.sub(c.world, c.rank, k).allreduce(buf, reducer{true, builtin(opBand, datatype.Uint64)}, 8)
	}
	// Retries start their search at a point that depends on the
	// communicator and the collective, so that two Idups that keep
	// colliding on one pair part ways.
	salt := int(e.ctx)*7919 + e.tag>>collSubBits
	for round := 0; round < 1000; round++ {
		mask := e.r.ids.snapshotRange(idupLo, ctxPairs)
		k := 1 + 6*(round%8) // sub-tags k..k+5 for this round
		if err := and(mask, k); err != nil {
			return 0, err
		}
		start := 0
		if round > 0 {
			start = (salt + round*104729) % idupPairs
		}
		rel := lowestFrom(mask, start)
		if rel < 0 {
			return 0, errorf(ErrOther, e.op, "no free context id for Idup: %d Idup-made communicators are alive", idupPairs)
		}
		took := e.r.ids.tryTake(idupLo + rel)
		flag := make([]byte, 8)
		if took {
			binary.LittleEndian.PutUint64(flag, 1)
		}
		if err := and(flag, k+3); err != nil {
			if took {
				e.r.ids.release(idupLo + rel)
			}
			return 0, err
		}
		if binary.LittleEndian.Uint64(flag) == 1 {
			return idupLo + rel, nil
		}
		if took {
			e.r.ids.release(idupLo + rel)
		}
	}
	return 0, errorf(ErrOther, e.op, "no context id agreed after 1000 rounds")
}

// lowestFrom is the first set bit of mask at or after bit start, wrapping
// around; -1 if none.
func lowestFrom(mask []byte, start int) int {
	n := 8 * len(mask)
	for i := 0; i < n; i++ {
		b := (start + i) % n
		if mask[b/8]&(1<<(b%8)) != 0 {
			return b
		}
	}
	return -1
}
