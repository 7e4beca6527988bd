package mpi

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/internal/shm"
)

// winCtl is a window's control block, in a shared-memory segment of its
// owner that every rank of the owner's host maps: the owner's passive-target
// lock and its accumulate lock. Origins on the host take them with atomic
// operations, without the owner; the owner's agent takes them for origins
// on other hosts.
//
// The passive-target lock is a fair reader-writer ticket lock (after
// Mellor-Crummey and Scott's): a locker takes a ticket by adding to req and
// waits for its turn in done, so locks are granted in the order asked and a
// stream of shared lockers cannot starve an exclusive one. Shared tickets
// count in the low 48 bits of each word, exclusive ones in the high 16:
// the exclusive count may wrap (turns compare it modulo 2¹⁶, and fewer
// lockers than that wait at once), the shared count carries into it only
// after 2⁴⁸ shared locks of one window's rank.
type winCtl struct {
	mu       *uint32 // held while an accumulate is carried out on the window
	rel      *uint32 // lock releases, modulo 2³²: the word sleeping lockers wait on
	sleepers *uint32 // lockers asleep on rel (a release wakes them only if any)
	req      *uint64 // lock tickets taken
	done     *uint64 // lock tickets released
}

// exclShift is where the exclusive count starts in req and done, and
// exclTicket is one exclusive ticket.
const (
	exclShift  = 48
	exclTicket = 1 << exclShift
)

func ctlOf(s *shm.Segment) *winCtl {
	b := shm.HeaderSize
	return &winCtl{mu: s.Uint32(b), rel: s.Uint32(b + 4), sleepers: s.Uint32(b + 8),
		req: s.Uint64(b + 16), done: s.Uint64(b + 24)}
}

// ticket takes a ticket for a lock of kind (LockExclusive, LockShared).
func (c *winCtl) ticket(kind uint8) uint64 {
	if kind == LockExclusive {
		return atomic.AddUint64(c.req, exclTicket) - exclTicket
	}
	return atomic.AddUint64(c.req, 1) - 1
}

// turn reports whether the lock of kind with ticket tk is granted: an
// exclusive ticket once every ticket before it is released, a shared one
// once every exclusive ticket before it is.
func (c *winCtl) turn(kind uint8, tk uint64) bool {
	d := atomic.LoadUint64(c.done)
	if kind == LockExclusive {
		return d == tk
	}
	return d>>exclShift == tk>>exclShift
}

// release releases a lock of kind and wakes the lockers asleep on it.
func (c *winCtl) release(kind uint8) {
	if kind == LockExclusive {
		atomic.AddUint64(c.done, exclTicket)
	} else {
		atomic.AddUint64(c.done, 1)
	}
	atomic.AddUint32(c.rel, 1)
	if atomic.LoadUint32(c.sleepers) > 0 {
		_ = shm.FutexWake(c.rel, math.MaxInt32)
	}
}

// lockSpins is how many passes a locker makes, yielding the CPU, before it
// sleeps on the lock's release word; lockNap bounds each sleep, so that
// the locker's own agent is served meanwhile (the holder may need it).
const (
	lockSpins = 32
	lockNap   = time.Millisecond
)

// lockNative takes rank t's lock of kind in its control block, mapped here:
// it takes a ticket and waits for its turn, running this rank's progress
// engine (the holder may wait for this rank's agent) between short sleeps.
// A holder that dies ends the job (the launcher's doing), which ends the
// wait.
func (w *Win) lockNative(op string, t int, kind uint8) error {
	r, c := w.rt, w.ctls[t]
	tk := c.ticket(kind)
	for i := 0; !c.turn(kind, tk); i++ {
		if err := r.progress(); err != nil {
			return named(op, err)
		}
		if i < lockSpins {
			osYield()
			continue
		}
		seq := atomic.LoadUint32(c.rel)
		atomic.AddUint32(c.sleepers, 1)
		if !c.turn(kind, tk) {
			_ = shm.FutexWait(c.rel, seq, lockNap)
		}
		atomic.AddUint32(c.sleepers, ^uint32(0))
	}
	w.origin.locks[t] |= lockNative
	return nil
}

// release releases this rank's lock of kind on rank t (see winCtl).
func (w *Win) release(t int, kind uint8) { w.ctls[t].release(kind) }

// lockWaits counts the lock requests that agents of this process hold
// queued for origins on other hosts. Their turn comes when a holder on this
// host releases the lock with a store, which rings no doorbell: while any
// waits, a sleeping waiter of this process looks again after rmaNap rather
// than after its usual timeout.
var lockWaits atomic.Int32

// rmaNap bounds a waiter's sleep while an agent waits for a lock turn.
const rmaNap = 200 * time.Microsecond

// sleepBound is how long a waiter of this process may sleep on the
// device's doorbell, d unless an agent waits for a lock turn.
func sleepBound(d time.Duration) time.Duration {
	if lockWaits.Load() > 0 {
		return min(d, rmaNap)
	}
	return d
}
