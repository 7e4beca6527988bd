package mpi

import (
	"testing"
	"time"
)

// TestAdaptSpin: a waiter whose device sleeps in the wire and whose waits
// end only after their sleep halves its spin down to spinMin, so that it
// stops holding a CPU its peer may need; waits that end within their spin
// double it back to the full spin; a wait that its first poll ended
// changes nothing; a waiter whose device sleeps elsewhere keeps the fixed
// spin.
func TestAdaptSpin(t *testing.T) {
	r := &runtime{spin: time.Millisecond, poll: time.Millisecond, adapt: true}
	r.spinNow.Store(int64(r.spin))
	now := func() time.Duration { return time.Duration(r.spinNow.Load()) }
	for range 20 {
		r.adaptSpin(now(), true, true)
	}
	if now() != spinMin {
		t.Fatalf("after 20 waits that slept the spin is %v, want spinMin %v", now(), spinMin)
	}
	r.adaptSpin(now(), false, false)
	if now() != spinMin {
		t.Fatalf("a wait its first poll ended moved the spin to %v", now())
	}
	for range 20 {
		r.adaptSpin(now(), false, true)
	}
	if now() != r.spin {
		t.Fatalf("after 20 waits that ended within their spin it is %v, want the full %v", now(), r.spin)
	}

	fixed := &runtime{spin: time.Millisecond, poll: time.Millisecond}
	fixed.spinNow.Store(int64(fixed.spin))
	fixed.adaptSpin(fixed.spin, true, true)
	if got := time.Duration(fixed.spinNow.Load()); got != fixed.spin {
		t.Fatalf("a waiter whose device does not sleep in the wire adapted its spin to %v; want the fixed %v", got, fixed.spin)
	}
}
