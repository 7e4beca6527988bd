package via

import (
	"errors"
	"testing"
)

// TestNetBreakMidReceive: when the connection to another host breaks
// while a message is half received, the receive descriptor it was
// filling (taken off its slot at the first frame) completes with a
// transport error, as the descriptors still posted behind it do.
func TestNetBreakMidReceive(t *testing.T) {
	_, nb, a, b, _, cb := hostPair(t, DefaultOptions())
	dst := make([]byte, 1000)
	hb := reg(t, nb, dst)
	first, second := &Descriptor{DS: []DataSegment{Seg(hb, dst)}}, &Descriptor{DS: []DataSegment{Seg(hb, dst)}}
	for _, d := range []*Descriptor{first, second} {
		if err := b.PostRecv(d); err != nil {
			t.Fatal(err)
		}
	}
	// The first of two frames of a 1000-byte send from a, handed to b's
	// NIC as its engine would (under the engine's lock), then the break.
	head := make([]byte, fhSize)
	(&fhead{kind: kData, src: uint32(a.ID()), dst: uint32(b.ID()), ctl: OpSend, total: 1000}).put(head)
	nb.eng.mu.Lock()
	nb.netFrame(0, head, make([]byte, 500))
	if !b.net.rx.active {
		nb.eng.mu.Unlock()
		t.Fatal("the first frame did not start a reception")
	}
	nb.netBreak(0, errors.New("link down"))
	nb.eng.mu.Unlock()
	for _, want := range []*Descriptor{first, second} {
		d := cqWait(t, cb, b, true)
		if d != want || d.Status&StatusTransportError == 0 {
			t.Fatalf("after the break: descriptor %p status %#x, want %p with a transport error", d, d.Status, want)
		}
	}
}
