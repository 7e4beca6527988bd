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
