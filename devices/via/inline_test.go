package via

import (
	"bytes"
	"testing"
	"time"
)

// TestDoorbellInline: a send posted to an idle NIC whose peer has a
// receive descriptor posted is executed by the doorbell itself, so it is
// complete (and the data in place) when PostSend returns; one whose peer
// has none waits at the NIC, and the receive posted later releases it.
func TestDoorbellInline(t *testing.T) {
	n, a, b, cq := loop(t, DefaultOptions(), true)
	buf := make([]byte, 64)
	h := reg(t, n, buf)
	copy(buf, "inline!!")
	r := &Descriptor{DS: []DataSegment{Seg(h, buf[32:40])}}
	if err := b.PostRecv(r); err != nil {
		t.Fatal(err)
	}
	s := &Descriptor{Control: OpSend, DS: []DataSegment{Seg(h, buf[:8])}}
	if err := a.PostSend(s); err != nil {
		t.Fatal(err)
	}
	if !s.Done() || !r.Done() || !bytes.Equal(buf[32:40], buf[:8]) {
		t.Fatalf("after PostSend: send done %v, receive done %v, data %q", s.Done(), r.Done(), buf[32:40])
	}
	if c := n.Counters(); c["nic_inline"] != 1 {
		t.Fatalf("nic_inline = %d, want 1", c["nic_inline"])
	}
	if a.SendDone() != s || b.RecvDone() != r {
		t.Fatal("SendDone/RecvDone do not return the completed descriptors")
	}
	for k := 0; k < 2; k++ { // the two CQ entries
		if _, _, ok := cq.Done(); !ok {
			t.Fatal("CQ lacks an entry of the inline execution")
		}
	}

	// No receive descriptor: the send stays posted.
	copy(buf, "stalled!")
	if err := a.PostSend(s); err != nil {
		t.Fatal(err)
	}
	if s.Done() {
		t.Fatal("a send without a receive descriptor at the peer completed")
	}
	if err := b.PostRecv(r); err != nil {
		t.Fatal(err)
	}
	got, err := b.RecvWait(5 * time.Second)
	if err != nil || got != r || !bytes.Equal(buf[32:40], []byte("stalled!")) {
		t.Fatalf("RecvWait: %v, %v, data %q", got, err, buf[32:40])
	}
}

// TestSleepSeesPeerCompletion: a peer's NIC moves this NIC's completion
// word only while a waiter sleeps, so a completion that lands between a
// waiter's Seq and its Sleep must be found by Sleep's last look, not slept
// through.
func TestSleepSeesPeerCompletion(t *testing.T) {
	n1, err := OpenNIC(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	n2, err := OpenNIC(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	a, err := n1.CreateVI(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := n2.CreateVI(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(n2.Address(), b.ID()); err != nil {
		t.Fatal(err)
	}
	if err := b.Connect(n1.Address(), a.ID()); err != nil {
		t.Fatal(err)
	}
	src, dst := []byte("12345678"), make([]byte, 8)
	hs, hd := reg(t, n1, src), reg(t, n2, dst)
	r := &Descriptor{DS: []DataSegment{Seg(hd, dst)}}
	if err := b.PostRecv(r); err != nil {
		t.Fatal(err)
	}
	seq := n2.Seq()
	if err := a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(hs, src)}}); err != nil {
		t.Fatal(err)
	}
	// The send completes at once (inline) or soon (n1's engine); either
	// way n2's application is not asleep when it does.
	deadline := time.Now().Add(5 * time.Second)
	for !r.Done() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	n2.Sleep(seq, 3*time.Second)
	if el := time.Since(start); el > time.Second {
		t.Fatalf("Sleep slept %v through a completed receive descriptor", el)
	}
	if b.RecvDone() != r || !bytes.Equal(dst, src) {
		t.Fatalf("receive: data %q", dst)
	}
}

// TestBusyNotOnWire: a send to another host that is on the wire and waits
// for the remote NIC (here: for a receive descriptor there) leaves this
// NIC idle (Busy false), so that the MPI device's waiter does not give its
// core away on every poll for the other host's work; it completes once
// the remote receive is posted.
func TestBusyNotOnWire(t *testing.T) {
	na, _, a, b, ca, cb := hostPair(t, DefaultOptions())
	src, dst := []byte("on wire!"), make([]byte, 8)
	hs, hd := reg(t, na, src), reg(t, b.NIC(), dst)
	s := &Descriptor{Control: OpSend, DS: []DataSegment{Seg(hs, src)}}
	if err := a.PostSend(s); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.Unsent() && time.Now().Before(deadline) {
		na.Help()
		time.Sleep(time.Millisecond)
	}
	if a.Unsent() {
		t.Fatal("the send never left for the wire")
	}
	if s.Done() {
		t.Fatal("the send completed without a receive descriptor at the peer")
	}
	if na.Busy() {
		t.Fatal("Busy with nothing left to do but wait for the remote NIC")
	}
	if err := b.PostRecv(&Descriptor{DS: []DataSegment{Seg(hd, dst)}}); err != nil {
		t.Fatal(err)
	}
	cqWait(t, cb, b, true)
	cqWait(t, ca, a, false)
	if !bytes.Equal(dst, src) {
		t.Fatalf("received %q", dst)
	}
}

// TestFastPeer: the C fast path completes a peer's receive descriptors
// only when the peer's receive queue reports to no CQ (a completion there
// is also a CQ entry, which only the Go side appends), its descriptors
// are cached in their slots, and it is on this host; FastLink decides it
// once, from the peer's VI header, for the connection's life.
func TestFastPeer(t *testing.T) {
	n, err := OpenNIC(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	cq, err := n.CreateCQ()
	if err != nil {
		t.Fatal(err)
	}
	a, err := n.CreateVI(cq, nil) // its receive queue reports to no CQ
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.CreateVI(nil, cq) // its receive queue reports to cq
	if err != nil {
		t.Fatal(err)
	}
	if a.fastPeer() || b.fastPeer() {
		t.Fatal("fastPeer true for a VI not connected")
	}
	if err := a.Connect(n.Address(), b.ID()); err != nil {
		t.Fatal(err)
	}
	if err := b.Connect(n.Address(), a.ID()); err != nil {
		t.Fatal(err)
	}
	if a.fastPeer() {
		t.Error("fastPeer true toward a receive queue that reports to a CQ")
	}
	if !b.fastPeer() {
		t.Error("fastPeer false toward a receive queue without a CQ, on this host, descriptors cached")
	}

	o := DefaultOptions()
	o.DescCache = false
	_, c, _, _ := loop(t, o, false)
	if c.fastPeer() {
		t.Error("fastPeer true toward a NIC without the descriptor cache")
	}
	_, _, d, _, _, _ := hostPair(t, DefaultOptions())
	if d.fastPeer() {
		t.Error("fastPeer true toward a VI on another host")
	}
}
