package mpi

import (
	"testing"
	"time"
)

// bellDevice is nullDevice with a doorbell that Wake rings.
type bellDevice struct {
	nullDevice
	bell uint32
}

func (d *bellDevice) Seq() uint32 { return d.bell }
func (d *bellDevice) Wake()       { d.bell++ }

// TestServeRMARingsDoorbell checks that a pass of the RMA agents moves the
// device's doorbell: the waiter read it before the device pass that the
// agents follow, and what they queued (a clear-to-send for a receive that
// matched a waiting rendezvous) leaves only at the next pass, so a sleep on
// the old reading would wait for the origin, which waits for that message
// (fm's WinCreate Put + Flush slept to the 100 ms bound). A pass with no
// RMA work must not ring it.
func TestServeRMARingsDoorbell(t *testing.T) {
	d := &bellDevice{}
	r := &runtime{dev: d, devName: "bell", size: 1, poll: time.Millisecond, spin: time.Millisecond}
	rmaWork.Store(false)
	seq := d.Seq()
	r.serveRMA()
	if d.Seq() != seq {
		t.Fatalf("serveRMA with no RMA work rang the doorbell (%d → %d)", seq, d.Seq())
	}
	raiseRMAWork(nil) // an agent's receive completed
	r.serveRMA()
	if d.Seq() == seq {
		t.Fatalf("serveRMA after RMA work left the doorbell at %d: a waiter that read it before the pass sleeps on what the agents queued", seq)
	}
	if rmaWork.Load() {
		t.Fatal("serveRMA left the RMA work flag raised")
	}
}

// servingDevice is a device whose every pass completes an agent's receive
// (an origin's one-sided operations keep arriving) until until; it counts
// the waiter's sleeps while it serves and after.
type servingDevice struct {
	nullDevice
	until         int64 // nanotime
	serving, idle int   // sleeps before and after until
	// stall, if set, is how long the pass after the stallAt-th stalls
	// once, as if the waiter had lost its CPU.
	stall   time.Duration
	stallAt int
	passes  int
}

func (d *servingDevice) Progress() (bool, error) {
	if d.passes++; d.stall > 0 && d.passes == d.stallAt {
		time.Sleep(d.stall)
	}
	if nanotime() < d.until {
		raiseRMAWork(nil)
		return true, nil
	}
	return false, nil
}

func (d *servingDevice) Sleep(uint32, time.Duration) {
	if nanotime() < d.until {
		d.serving++
	} else {
		d.idle++
	}
}

// TestWaitServingRenewsSpin checks that a wait whose passes serve a
// window's agent renews its spin window: a passive target in a Barrier
// (on a device board or across hosts) slept between an origin's Put +
// Flush pairs once its own wait had lasted the spin time, and each pair
// then cost a wake-up (fm's WinCreate Put 8 B + Flush: 14 µs median
// against 1 µs). The origin's operations arrive here for three spin
// times; a wait that serves them must not sleep meanwhile, and once they
// stop it must (the check would prove nothing otherwise).
func TestWaitServingRenewsSpin(t *testing.T) {
	const spin = 100 * time.Millisecond
	defer func(g time.Duration) { preemptGap = g }(preemptGap)
	preemptGap = time.Hour // this machine's load must not count as the waiter losing its CPU
	// Both wait policies: every rank with a core (poll > 0) and ranks that
	// outnumber cores (poll 0).
	for _, poll := range []time.Duration{time.Millisecond, 0} {
		d := &servingDevice{}
		r := &runtime{dev: d, devName: "serving", size: 1, poll: poll, spin: spin}
		rmaWork.Store(false)
		d.until = nanotime() + int64(3*spin)
		if err := r.waitFor(func() bool { return d.idle > 0 }); err != nil {
			t.Fatal(err)
		}
		if d.serving != 0 {
			t.Errorf("poll %v: a wait serving RMA operations for %v (spin %v) slept %d times while they arrived", poll, 3*spin, spin, d.serving)
		}
	}
}

// TestWaitServingPreempted checks that a wait whose spin lost its CPU (a
// gap of more than preemptGap between two clock readings: the machine is
// busier than the job) no longer renews its spin window when it serves,
// but sleeps between the operations: a spinning target on such a machine
// waits for its next time slice, and the origin with it (fm's WinCreate
// Put 8 B + Flush took 0.1-7 ms at load 14-23 with the target spinning,
// 25-80 µs with it sleeping between them, woken by each).
func TestWaitServingPreempted(t *testing.T) {
	const spin = 100 * time.Millisecond
	defer func(g, h time.Duration) { preemptGap, preemptHold = g, h }(preemptGap, preemptHold)
	preemptGap, preemptHold = time.Millisecond, time.Hour
	// The stall falls between two clock readings (every 64th poll after
	// freePolls), so the gap is seen by the reading after it.
	d := &servingDevice{stall: 5 * time.Millisecond, stallAt: 2*freePolls + 32}
	r := &runtime{dev: d, devName: "serving", size: 1, poll: time.Millisecond, spin: spin}
	rmaWork.Store(false)
	d.until = nanotime() + int64(3*spin)
	if err := r.waitFor(func() bool { return d.idle > 0 }); err != nil {
		t.Fatal(err)
	}
	if d.serving == 0 {
		t.Errorf("a wait that lost its CPU for %v (preemptGap %v) and then served RMA operations for %v (spin %v) never slept while they arrived", d.stall, preemptGap, 3*spin, spin)
	}
}
