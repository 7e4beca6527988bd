package adi

import (
	"sync/atomic"
	"testing"
)

// TestHeldCompletion: a request completed while Held is done for Done (the
// core's look under its lock) without the atomic flag, which a waiter
// without the lock would read; Restart and Reset clear both.
func TestHeldCompletion(t *testing.T) {
	var r Request
	r.Held = true
	r.Complete(Status{Source: 3, Tag: 4, Bytes: 0})
	if !r.Done() || (atomic.LoadUint32(&r.done) != 0) || r.Status.Source != 3 || r.Status.Tag != 4 {
		t.Fatalf("held completion: Done %v, atomic flag %v, status %+v; want done by the plain flag only", r.Done(), (atomic.LoadUint32(&r.done) != 0), r.Status)
	}
	var b Buffer
	r.Restart(OpRecv, ModeStandard, 1, 0, 4, &b)
	if r.Done() || r.Held {
		t.Fatalf("after Restart: Done %v, Held %v; want neither", r.Done(), r.Held)
	}
	r.Complete(Status{})
	if !r.Done() || !(atomic.LoadUint32(&r.done) != 0) {
		t.Fatalf("completion without Held: Done %v, atomic flag %v; want both", r.Done(), (atomic.LoadUint32(&r.done) != 0))
	}
	r.Held = true
	r.Reset()
	if r.Done() || r.Held {
		t.Fatalf("after Reset: Done %v, Held %v; want neither", r.Done(), r.Held)
	}
}
