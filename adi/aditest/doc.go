// Package aditest checks that a device keeps the ADI's contract, the way
// testing/fstest checks a file system: a device's own tests call Run, which
// runs the suite against it:
//
//	func TestADI(t *testing.T) { aditest.Run(t, aditest.Config{Name: "fm"}) }
//
// The suite covers non-overtaking order (eager and rendezvous sizes mixed),
// ANY_SOURCE and ANY_TAG, truncation (ErrTruncate, and nothing written past
// the receive buffer), type-signature mismatch, the cancel of a posted
// receive, zero-byte messages, sends to oneself, synchronous sends, Iprobe,
// non-contiguous buffers, option errors, the optional capabilities the
// device offers (ShortSender, Multisender, Board), leaks (no posted receive
// or unexpected message left), and a dead peer: pending operations fail
// with an error naming the rank, without a hang.
//
// Every check but the dead peer runs N ranks of the device inside the test
// process (Start): each rank is a goroutine with its own device, wired up
// through an in-memory key-value space. The shared-memory devices work so
// because a process can map its own exported segments and write into its
// own memory as into a peer's; their liveness checks look at process ids,
// which then never die. So the dead-peer check starts a real second process
// (the test binary again, running only that check, wired up through
// internal/pmi over a socket pair), kills it, and watches the pending
// operations of the rank in the test process fail.
//
// Package aditest/loopback is a device that lives in one process only; the
// suite runs against it too, and it lets code above the ADI be tested fast
// without shared memory or processes.
package aditest
