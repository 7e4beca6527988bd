package mpi

import (
	"sync/atomic"
	"time"
)

// asyncProgress is the optional progress goroutine: it advances every
// device protocol while the program computes, so that non-blocking
// communication overlaps computation even on devices that need the host CPU
// at each protocol step (the BIP/MPI-BIP lesson of seed 003).
type asyncProgress struct {
	stop atomic.Bool
	done chan struct{}
	err  atomic.Value // the first progress error, reported by the next waiter
}

// asyncGrace is how long the progress goroutine leaves the device alone
// after the program's last wait: shorter computations gain nothing from it,
// and its wake-ups would only cost the program latency.
const asyncGrace = 50 * time.Microsecond

// asyncPark is the longest the progress goroutine stays parked while the
// program is inside MPI calls before it looks again (waitFor wakes it at
// once only after a call that came a while after the previous one).
const asyncPark = time.Millisecond

// startProgress launches the progress goroutine.
func (r *runtime) startProgress() {
	a := &asyncProgress{done: make(chan struct{})}
	r.async = a
	r.asyncOn.Store(true)
	go func() {
		defer close(a.done)
		for !a.stop.Load() {
			if r.pollers.Load() > 0 {
				// The program is waiting in an MPI call and progresses by
				// itself; stay out of its way (and off the doorbell, so
				// senders need not wake this goroutine with a syscall).
				r.parkWhilePolled()
				continue
			}
			if idle := time.Duration(int64(time.Since(epoch)) - r.lastOut.Load()); idle < asyncGrace {
				// It left an MPI call a moment ago and will likely make
				// another (a ping-pong, a loop of sends): progress is only
				// needed once it has been computing for a while.
				time.Sleep(asyncGrace - idle)
				continue
			}
			seq := r.dev.Seq()
			r.mu.Lock()
			did, err := r.dev.Progress()
			r.mu.Unlock()
			if err != nil {
				a.err.Store(err)
				r.dev.Wake()
				return
			}
			if did {
				// Requests may have completed: wake waiters asleep on the
				// doorbell, who otherwise wait for the next message.
				r.dev.Wake()
				continue
			}
			r.dev.Sleep(seq, 100*time.Millisecond)
		}
	}()
}

// stopProgress ends the progress goroutine and waits for it.
func (r *runtime) stopProgress() {
	if r.async == nil {
		return
	}
	r.async.stop.Store(true)
	r.dev.Wake()
	select {
	case r.resume <- struct{}{}:
	default:
	}
	<-r.async.done
	r.async = nil
}

// AsyncProgress reports whether the progress goroutine is running.
func AsyncProgress() bool {
	r, err := current("MPI_Async_progress")
	return err == nil && r.async != nil
}

// parkWhilePolled blocks the progress goroutine until waitFor signals
// that no goroutine waits in it any more (or asyncPark passes, or Finalize
// stops it).
func (r *runtime) parkWhilePolled() {
	t := time.NewTimer(asyncPark)
	defer t.Stop()
	select {
	case <-r.resume:
	case <-t.C:
	}
}
