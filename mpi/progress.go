package mpi

import (
	"sync/atomic"
	"time"
)

// asyncProgress is the optional progress goroutine: it advances every
// device protocol while the program computes, so that non-blocking
// communication overlaps computation even on devices that need the host CPU
// at each protocol step (the lesson of "Asynchronous Communications in MPI
// - the BIP/Myrinet Approach").
//
// It must cost a program that keeps calling MPI (a ping-pong) next to
// nothing, so the waiters' side is two atomic adds per waitFor (r.waits)
// and a starter's one atomic load, and the goroutine decides alone, from
// r.waits and its own clock, between two states:
//
//   - parked on r.resume, with a timer: the program is inside waitFor, or
//     returned from one since the goroutine's last look; it progresses by
//     itself, and the goroutine stays off the device's lock and doorbell
//     (so senders need not wake it with a syscall);
//   - active: the program has started a non-blocking operation (kick wakes
//     the goroutine at once) or has made no wait for a whole park: it
//     computes, and the goroutine runs Progress passes, sleeping on the
//     device's doorbell when there is nothing to do, until a wait begins.
//
// A series of quick non-blocking calls (Irecv, Isend, Wait, again) would
// wake the goroutine at every start; when a kick finds the program back in
// a wait within asyncGrace, the goroutine turns kicks off (quiet) until it
// sees the program compute for a whole park.
type asyncProgress struct {
	stop   atomic.Bool
	done   chan struct{}
	err    atomic.Value // the first progress error, reported by the next waiter
	parked atomic.Bool  // waiting on r.resume: kick must wake it
	quiet  atomic.Bool  // kicks are off (a rapid series of non-blocking calls)
}

// asyncGrace: a kick followed by a wait sooner than this was part of a
// rapid series, where waking the goroutine costs more than it can gain.
const asyncGrace = 50 * time.Microsecond

// asyncPark is the first timeout of a park; every further park in a row
// (the program still calling MPI) doubles it, up to asyncParkMax. A park
// ends early on a kick. Without kicks (a program of blocking calls that
// starts to compute), the goroutine turns active within 2*asyncParkMax.
const (
	asyncPark    = time.Millisecond
	asyncParkMax = 2 * time.Millisecond
)

// startProgress launches the progress goroutine. It runs before the
// runtime is published, so r.async never changes while MPI runs.
func (r *runtime) startProgress() {
	a := &asyncProgress{done: make(chan struct{})}
	r.async = a
	r.asyncOn.Store(true)
	go r.progressLoop(a)
}

func (r *runtime) progressLoop(a *asyncProgress) {
	defer close(a.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	park := asyncPark
	last := ^uint64(0) // r.waits when the program was last seen computing; impossible at first
	var kicked int64   // when a kick woke the goroutine (nanotime); 0: the last wake was the timer's
	for !a.stop.Load() {
		w := r.waits.Load()
		if uint32(w) == 0 && w == last {
			// No wait has begun since the goroutine last looked (a whole
			// park ago, or at a kick): the program computes.
			if kicked == 0 {
				a.quiet.Store(false)
			}
			park = asyncPark
			if !r.asyncPass(a) {
				return
			}
			continue
		}
		// The program waits, or has waited since the last look: it makes
		// progress itself.
		if kicked != 0 && nanotime()-kicked < int64(asyncGrace) {
			a.quiet.Store(true) // it waited again right after a kick
		}
		last = w
		a.parked.Store(true)
		if a.stop.Load() {
			break
		}
		timer.Reset(park)
		select {
		case <-r.resume:
			kicked = nanotime()
			last = r.waits.Load() // computing from the kick on
			park = asyncPark
		case <-timer.C:
			kicked = 0
			park = min(2*park, asyncParkMax) // still in MPI: look less often
		}
		a.parked.Store(false)
		timer.Stop()
	}
}

// asyncPass is one Progress pass of the active goroutine, then a sleep on
// the doorbell if it did nothing. It reports false once the device failed.
func (r *runtime) asyncPass(a *asyncProgress) bool {
	seq := r.dev.Seq()
	r.mu.Lock()
	did, err := r.dev.Progress()
	if rmaWork.Load() {
		r.serveRMA() // RMA operations that arrived (rma_agent.go)
		did = true
	}
	r.mu.Unlock()
	if err != nil {
		a.err.Store(err)
		r.dev.Wake()
		return false
	}
	if did {
		// Requests may have completed: wake waiters asleep on the
		// doorbell, who otherwise wait for the next message.
		r.dev.Wake()
		return true
	}
	if uint32(r.waits.Load()) == 0 && !a.stop.Load() {
		r.dev.Sleep(seq, 100*time.Millisecond)
	}
	return true
}

// kick tells a parked progress goroutine that the program has started a
// non-blocking operation: it is about to compute while the operation is in
// flight.
func (r *runtime) kick() {
	if a := r.async; a != nil && a.parked.Load() && !a.quiet.Load() {
		select {
		case r.resume <- struct{}{}:
		default:
		}
	}
}

// stopProgress ends the progress goroutine and waits for it.
func (r *runtime) stopProgress() {
	a := r.async
	if a == nil || a.stop.Swap(true) {
		return
	}
	r.dev.Wake()
	select {
	case r.resume <- struct{}{}:
	default:
	}
	<-a.done
}

// AsyncProgress reports whether the progress goroutine is running.
func AsyncProgress() bool {
	r, err := current("MPI_Async_progress")
	return err == nil && r.async != nil
}

// failed is the device error the progress goroutine met, if any: a device
// may report an error (a peer's loss) only once, so a waiter that polls
// after the goroutine took it must still return it rather than wait on.
func (r *runtime) failed() error {
	if a := r.async; a != nil {
		if e, ok := a.err.Load().(error); ok {
			return e
		}
	}
	return nil
}

// progressError is the error of a failed device progress pass.
func progressError(r *runtime, err error) error {
	return errorf(ErrIntern, "progress", "device %s: %v", r.devName, err)
}
