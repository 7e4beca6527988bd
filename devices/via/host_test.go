package via

import (
	"bytes"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestHostMemCopy: a send into a receive buffer of the peer's host memory
// (AllocHostMem) is moved with a copy, one into ordinary memory through
// the kernel; both arrive whole, and the receive descriptors report the
// length and immediate data the NIC left in their receive-queue slots.
func TestHostMemCopy(t *testing.T) {
	o := DefaultOptions()
	o.HostMem = 1 << 14
	n, a, b, cq := loop(t, o, true)
	host, err := n.AllocHostMem(256)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.AllocHostMem(1 << 14); err == nil {
		t.Fatal("AllocHostMem handed out more than Options.HostMem")
	}
	heap := make([]byte, 256)
	src := []byte("eight by")
	hs := reg(t, n, src)
	for _, c := range []struct {
		name   string
		dst    []byte
		counts string
	}{{"host memory", host, "nic_host_copies"}, {"heap", heap, "nic_kernel_writes"}} {
		before := n.Counters()[c.counts]
		r := &Descriptor{DS: []DataSegment{Seg(reg(t, n, c.dst), c.dst[100:])}}
		if err := b.PostRecv(r); err != nil {
			t.Fatal(err)
		}
		if err := a.PostSend(&Descriptor{Control: OpSend | FlagImmediate, Imm: 77, DS: []DataSegment{Seg(hs, src)}}); err != nil {
			t.Fatal(err)
		}
		var got *Descriptor
		for got == nil {
			vi, recv, err := cq.Wait(5 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if recv {
				got = vi.RecvDone()
			} else {
				vi.SendDone()
			}
		}
		if got != r || got.Err() != nil || got.Length != 8 || got.Imm != 77 || !bytes.Equal(c.dst[100:108], src) {
			t.Fatalf("%s: descriptor %p (want %p) err %v length %d imm %d data %q", c.name, got, r, got.Err(), got.Length, got.Imm, c.dst[100:108])
		}
		if d := n.Counters()[c.counts] - before; d != 1 {
			t.Errorf("%s: %s moved by %d, want 1", c.name, c.counts, d)
		}
	}
}

// TestHelpExecutes: an application that polls its CQ through Help runs the
// engine's work itself: the sends it posts are executed on its thread, by
// the doorbell of the idle NIC or by Help (the engine goroutine is not
// woken for them), so nearly all of a stream of round trips is counted in
// nic_inline and nic_helped.
func TestHelpExecutes(t *testing.T) {
	n, a, b, cq := loop(t, DefaultOptions(), true)
	buf := make([]byte, 64)
	h := reg(t, n, buf)
	r := &Descriptor{DS: []DataSegment{Seg(h, buf[8:16])}}
	s := &Descriptor{Control: OpSend, DS: []DataSegment{Seg(h, buf[:8])}}
	const rounds = 2000
	for i := 0; i < rounds; i++ {
		if err := b.PostRecv(r); err != nil {
			t.Fatal(err)
		}
		if err := a.PostSend(s); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 2; {
			n.Help()
			vi, recv, ok := cq.Done()
			if !ok {
				continue
			}
			if recv {
				vi.RecvDone()
			} else {
				vi.SendDone()
			}
			got++
		}
	}
	c := n.Counters()
	if c["nic_executed"] != rounds || c["nic_helped"]+c["nic_inline"] < rounds/2 {
		t.Fatalf("%d sends executed, %d of them by Help and %d at the doorbell; want %d, most on this thread", c["nic_executed"], c["nic_helped"], c["nic_inline"], rounds)
	}
}

// TestIdleHelpKeepsEngineAsleep: an application that waits in Help with
// nothing to run (a receive not yet arrived) counts as assisting, so that
// after it slept once (Sleep hands the engine the NIC) the engine goes
// back to its assisted sleep and the application's next posts neither
// wake it nor race it for the lock. Before, only a Help that ran a pass
// counted: an engine woken by a Sleep that took the next descriptor first
// stayed awake, was woken by every post and ran the transfers on threads
// of their own beside the spinning application (the slow mode of NetPIPE
// on via, docs/via-bandwidth.md, session 9).
func TestIdleHelpKeepsEngineAsleep(t *testing.T) {
	n, a, b, cq := loop(t, DefaultOptions(), true)
	buf := make([]byte, 64)
	h := reg(t, n, buf)
	r := &Descriptor{DS: []DataSegment{Seg(h, buf[8:16])}}
	s := &Descriptor{Control: OpSend, DS: []DataSegment{Seg(h, buf[:8])}}
	const rounds = 200
	for i := 0; i < rounds; i++ {
		n.Sleep(n.Seq(), time.Microsecond) // the engine takes over
		for k := 0; k < 256; k++ {
			n.Help() // waiting, nothing to run
		}
		if !n.assisted() {
			t.Fatalf("round %d: the application polled Help 256 times after a Sleep, but the engine does not count it as assisting", i)
		}
		if err := b.PostRecv(r); err != nil {
			t.Fatal(err)
		}
		if err := a.PostSend(s); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 2; {
			n.Help()
			vi, recv, ok := cq.Done()
			if !ok {
				continue
			}
			if recv {
				vi.RecvDone()
			} else {
				vi.SendDone()
			}
			got++
		}
	}
	c := n.Counters()
	if by := c["nic_helped"] + c["nic_inline"]; by < rounds*9/10 {
		t.Errorf("%d of %d sends executed on the application's thread (Help or the doorbell); want nearly all", by, c["nic_executed"])
	}
}

// TestEngineStaysAssistedAfterPreemption: an application that assisted
// and then lost its core for longer than assistedFor (a loaded host)
// finds its engine, once the engine has looked at the posted work, back in
// the assisted sleep that the application's own posts do not interrupt.
// Before, the engine fell back to the plain sleep, and each of the
// application's next posts woke it: a thread that took a core from one of
// the ranks in mid-transfer (docs/via-bandwidth.md, session 9).
func TestEngineStaysAssistedAfterPreemption(t *testing.T) {
	n, _, _, _ := loop(t, DefaultOptions(), true)
	// A loaded machine (CI) can keep this test away for longer than
	// assistRecent between its Help and the engine's choice; the window
	// under test is the engine's, not the scheduler's.
	n.eng.recent.Store(int64(time.Minute))
	sleep := n.self.u32(offNICSleep)
	for i := 0; i < 5; i++ {
		for k := 0; k < 256; k++ {
			n.Help() // waiting, nothing to run: assisting
		}
		// The application is away (preempted) for longer than assistedFor.
		time.Sleep(3 * assistedFor)
		// The application's next post rings the NIC: an engine in its
		// plain sleep wakes at once, one in the assisted sleep at its
		// timeout. Either runs a pass and sleeps again; wait for that
		// without assisting.
		slept := n.cnt.sleeps.Load()
		n.self.ringNIC()
		deadline := time.Now().Add(5 * time.Second)
		for n.cnt.sleeps.Load() == slept || atomic.LoadUint32(sleep) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the engine did not go back to sleep within 5 s")
			}
			runtime.Gosched()
		}
		if m := atomic.LoadUint32(sleep); m != sleepAssisted {
			t.Fatalf("round %d: the engine sleeps in mode %d after the application was away for %v; want the assisted sleep (%d), which the application's posts do not interrupt", i, m, 3*assistedFor, sleepAssisted)
		}
	}
}
