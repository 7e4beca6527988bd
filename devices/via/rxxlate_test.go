package via

import (
	"bytes"
	"testing"
)

// TestRecvSlotTranslation: a receive from another host into the buffer
// its receive-queue slot held before is translated from the slot's
// register, not the translation cache (an entry invalidated behind its
// back costs no miss), and DeregisterMem voids the register: a message
// for a descriptor whose region is gone completes in a protection error
// and leaves the memory as it was.
func TestRecvSlotTranslation(t *testing.T) {
	o := DefaultOptions()
	o.RecvQueue = 1 // every receive uses slot 0
	na, nb, a, b, ca, cb := hostPair(t, o)
	src, dst := pattern(8, 5), make([]byte, 64)
	ha, hb := reg(t, na, src), reg(t, nb, dst)
	exchange := func(round int) *Descriptor {
		t.Helper()
		r := &Descriptor{DS: []DataSegment{Seg(hb, dst)}}
		if err := b.PostRecv(r); err != nil {
			t.Fatal(err)
		}
		if err := a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(ha, src)}}); err != nil {
			t.Fatal(err)
		}
		if got := cqWait(t, cb, b, true); got != r {
			t.Fatalf("round %d: receive completed %p, want %p", round, got, r)
		}
		cqWait(t, ca, a, false)
		return r
	}
	if r := exchange(1); r.Err() != nil || !bytes.Equal(dst[:8], src) {
		t.Fatalf("round 1: %v, data equal %v", r.Err(), bytes.Equal(dst[:8], src))
	}
	if x := b.rxXlate[0]; x.h != hb || x.vpn != Addr(dst)>>12 {
		t.Fatalf("slot 0's register holds handle %d page %#x, want %d %#x", x.h, x.vpn, hb, Addr(dst)>>12)
	}
	nb.self.cacheInvalidate(Addr(dst) >> 12)
	clear(dst)
	before := nb.Counters()
	if r := exchange(2); r.Err() != nil || !bytes.Equal(dst[:8], src) {
		t.Fatalf("round 2: %v, data equal %v", r.Err(), bytes.Equal(dst[:8], src))
	}
	if after := nb.Counters(); after["tlb_misses"] != before["tlb_misses"] {
		t.Fatalf("round 2 missed in the translation cache (%d misses): the slot's register was not used", after["tlb_misses"]-before["tlb_misses"])
	}
	// A descriptor posted, then its region deregistered before the
	// message comes: the register must not let the NIC write there.
	clear(dst)
	r := &Descriptor{DS: []DataSegment{Seg(hb, dst)}}
	if err := b.PostRecv(r); err != nil {
		t.Fatal(err)
	}
	if err := nb.DeregisterMem(hb); err != nil {
		t.Fatal(err)
	}
	if err := a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(ha, src)}}); err != nil {
		t.Fatal(err)
	}
	if got := cqWait(t, cb, b, true); got != r || r.Status&StatusProtectionError == 0 {
		t.Fatalf("receive into a deregistered region: descriptor %p (want %p), status %#x (want a protection error)", got, r, r.Status)
	}
	if !bytes.Equal(dst, make([]byte, len(dst))) {
		t.Fatal("the NIC wrote into a deregistered region")
	}
	cqWait(t, ca, a, false)
	// The handle registered again for other memory: the old range must
	// not translate from the register (the engine sleeps or is idle: no
	// frame is in flight).
	buf2 := make([]byte, 64)
	if h2 := reg(t, nb, buf2); h2 == hb {
		seg := []DataSegment{{Addr: Addr(dst), Len: 8, Handle: hb}}
		if out, err := nb.translateRecv(b, 0, seg, nil); err == nil {
			t.Fatalf("the deregistered range translates under its reused handle: %v", out)
		}
	}
	_ = dst[0] // dst stays allocated: buf2 must not take its address
}
