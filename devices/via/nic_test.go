package via

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// loop opens a NIC with two VIs connected to each other.
func loop(t *testing.T, o Options, cqs bool) (*NIC, *VI, *VI, *CQ) {
	t.Helper()
	n, err := OpenNIC(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	var cq *CQ
	if cqs {
		if cq, err = n.CreateCQ(); err != nil {
			t.Fatal(err)
		}
	}
	a, err := n.CreateVI(cq, cq)
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.CreateVI(cq, cq)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(n.Address(), b.ID()); err != nil {
		t.Fatal(err)
	}
	if err := b.Connect(n.Address(), a.ID()); err != nil {
		t.Fatal(err)
	}
	return n, a, b, cq
}

func reg(t *testing.T, n *NIC, b []byte) MemHandle {
	t.Helper()
	h, err := n.RegisterMem(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestUnregisteredMemoryRefused(t *testing.T) {
	n, a, _, _ := loop(t, DefaultOptions(), false)
	buf := make([]byte, 100)
	h := reg(t, n, buf[:50])
	cases := []struct {
		name string
		ds   DataSegment
		want string
	}{
		{"unknown handle", DataSegment{Addr: Addr(buf), Len: 10, Handle: 99}, "not a registered region"},
		{"past the region", Seg(h, buf[40:60]), "is not inside registered region"},
		{"other memory", Seg(h, make([]byte, 8)), "is not inside registered region"},
	}
	for _, c := range cases {
		err := a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{c.ds}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: PostSend error %v, want one saying %q", c.name, err, c.want)
		}
		if err := a.PostRecv(&Descriptor{DS: []DataSegment{c.ds}}); err == nil {
			t.Errorf("%s: PostRecv accepted it", c.name)
		}
	}
	if err := n.DeregisterMem(h); err != nil {
		t.Fatal(err)
	}
	if err := a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(h, buf[:10])}}); err == nil {
		t.Error("a deregistered region was accepted")
	}
}

func TestLengthErrorAndStall(t *testing.T) {
	n, a, b, _ := loop(t, DefaultOptions(), false)
	src, dst := make([]byte, 16), make([]byte, 8)
	hs, hd := reg(t, n, src), reg(t, n, dst)
	// The send is posted before any receive: it waits at the NIC.
	s := &Descriptor{Control: OpSend, DS: []DataSegment{Seg(hs, src)}}
	if err := a.PostSend(s); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SendWait(20 * time.Millisecond); err != ErrTimeout {
		t.Fatalf("send without a receive descriptor completed: %v", err)
	}
	r := &Descriptor{DS: []DataSegment{Seg(hd, dst)}}
	if err := b.PostRecv(r); err != nil {
		t.Fatal(err)
	}
	if d, err := a.SendWait(5 * time.Second); err != nil || d.Status&StatusLengthError == 0 {
		t.Fatalf("send of 16 bytes into 8: %v status %#x", err, s.Status)
	}
	if d, err := b.RecvWait(5 * time.Second); err != nil || d.Err() == nil {
		t.Fatalf("receive of 16 bytes into 8: %v", err)
	}
	if !bytes.Equal(dst, make([]byte, 8)) {
		t.Fatal("a length error wrote into the receive buffer")
	}
}

// allOptions is every combination of the seed's design choices.
func allOptions(tlbsize int) []Options {
	var out []Options
	for _, db := range []Doorbell{D1, D2} {
		for _, at := range []Translation{AT1, AT2, AT3} {
			for _, dc := range []bool{true, false} {
				for _, cq := range []CQMode{CQ1, CQ2} {
					o := DefaultOptions()
					o.Doorbell, o.AT, o.DescCache, o.CQ, o.TLBSize = db, at, dc, cq, tlbsize
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// TestDesignOptions moves data through every combination: sends with a
// 3-piece gather list into 6-piece scatter lists (more than a cached
// receive slot holds), and page-crossing RDMA writes and reads, finding
// completions through the CQ; and checks that each option did its work.
func TestDesignOptions(t *testing.T) {
	for _, o := range allOptions(4) {
		t.Run(o.String(), func(t *testing.T) {
			n, a, b, cq := loop(t, o, true)
			big := make([]byte, 5*pageSize+300)
			src := make([]byte, 3000)
			dst := make([]byte, 6*600)
			hb, hs, hd := reg(t, n, big), reg(t, n, src), reg(t, n, dst)
			const msgs = 50
			for i := 0; i < msgs; i++ {
				for k := range src {
					src[k] = byte(i + k*7)
				}
				var scatter []DataSegment
				for k := 0; k < 6; k++ {
					scatter = append(scatter, Seg(hd, dst[k*600:k*600+500]))
				}
				r := &Descriptor{DS: scatter}
				if err := b.PostRecv(r); err != nil {
					t.Fatal(err)
				}
				s := &Descriptor{Control: OpSend, DS: []DataSegment{Seg(hs, src[:1000]), Seg(hs, src[1000:1001]), Seg(hs, src[1001:2999])}}
				if err := a.PostSend(s); err != nil {
					t.Fatal(err)
				}
				seen := 0
				for seen < 2 {
					vi, recv, err := cq.Wait(5 * time.Second)
					if err != nil {
						t.Fatal(err)
					}
					if recv && vi == b {
						if d := b.RecvDone(); d == r {
							seen++
						}
					} else if !recv && vi == a {
						if d := a.SendDone(); d == s {
							seen++
						}
					}
				}
				if r.Err() != nil || r.Length != 2999 || s.Err() != nil {
					t.Fatalf("message %d: recv %v length %d, send %v", i, r.Err(), r.Length, s.Err())
				}
				for k := 0; k < 2999; k++ {
					if got := dst[(k/500)*600+k%500]; got != src[k] {
						t.Fatalf("message %d byte %d = %d, want %d", i, k, got, src[k])
					}
				}
			}
			// RDMA write of src into big at an offset that crosses pages, then read back.
			w := &Descriptor{Control: OpRDMAWrite, RemoteHandle: hb, RemoteAddr: Addr(big[pageSize-100:]), DS: []DataSegment{Seg(hs, src)}}
			if err := a.PostSend(w); err != nil {
				t.Fatal(err)
			}
			back := make([]byte, len(src))
			hk := reg(t, n, back)
			rd := &Descriptor{Control: OpRDMARead, RemoteHandle: hb, RemoteAddr: Addr(big[pageSize-100:]), DS: []DataSegment{Seg(hk, back[:1500]), Seg(hk, back[1500:])}}
			if err := a.PostSend(rd); err != nil {
				t.Fatal(err)
			}
			for _, want := range []*Descriptor{w, rd} {
				var d *Descriptor
				for d == nil {
					if _, _, err := cq.Wait(5 * time.Second); err != nil {
						t.Fatal(err)
					}
					d = a.SendDone()
				}
				if d != want || d.Err() != nil {
					t.Fatalf("RDMA completion %p err %v, want %p", d, d.Err(), want)
				}
			}
			if !bytes.Equal(big[pageSize-100:pageSize-100+len(src)], src) || !bytes.Equal(back, src) {
				t.Fatal("RDMA write/read moved the wrong bytes")
			}
			c := n.Counters()
			posts := c["nic_posts"]
			switch {
			case o.Doorbell == D2 && c["nic_kernel_crossings"] < posts:
				t.Errorf("d2: %d kernel crossings for %d posts", c["nic_kernel_crossings"], posts)
			case o.AT == AT1 && c["nic_kernel_crossings"] < posts:
				t.Errorf("at1: %d kernel crossings for %d posts", c["nic_kernel_crossings"], posts)
			case o.Doorbell == D1 && o.AT != AT1 && c["nic_kernel_crossings"] != 0:
				t.Errorf("d1 with at%d made %d kernel crossings", o.AT, c["nic_kernel_crossings"])
			case o.AT == AT3 && (c["tlb_misses"] == 0 || c["tlb_hits"] == 0):
				t.Errorf("at3 with 4 entries: hits %d misses %d", c["tlb_hits"], c["tlb_misses"])
			case o.AT != AT3 && c["tlb_hits"]+c["tlb_misses"] != 0:
				t.Errorf("at%d used the translation cache", o.AT)
			case !o.DescCache && c["nic_desc_fetches"] < posts+msgs:
				t.Errorf("desccache=off: %d fetches for %d sends and %d receives", c["nic_desc_fetches"], posts, msgs)
			case o.DescCache && c["nic_desc_fetches"] != int64(msgs):
				// only the 6-segment receives do not fit a cached slot
				t.Errorf("desccache=on: %d fetches, want %d (the oversized receives)", c["nic_desc_fetches"], msgs)
			}
		})
	}
}

func TestParseOptions(t *testing.T) {
	o, rest, err := ParseOptions(DefaultOptions(), map[string]string{"doorbell": "D2", "at": "at1", "tlbsize": "16", "desccache": "off", "cq": "cq2", "eager": "5"})
	if err != nil || o.Doorbell != D2 || o.AT != AT1 || o.TLBSize != 16 || o.DescCache || o.CQ != CQ2 || rest["eager"] != "5" {
		t.Fatalf("%+v %v %v", o, rest, err)
	}
	for _, bad := range []map[string]string{{"doorbell": "d3"}, {"at": "at4"}, {"tlbsize": "0"}, {"desccache": "maybe"}, {"cq": "cq3"}} {
		if _, _, err := ParseOptions(DefaultOptions(), bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if s := fmt.Sprint(o); s != "doorbell=d2,at=at1,tlbsize=16,desccache=off,cq=cq2" {
		t.Errorf("String = %s", s)
	}
}

// TestTranslationBurst: an RDMA write larger than the translation cache's
// reach misses on every page, and each miss used to read one host-table
// entry by DMA (a system call per 4 KiB page: 1.3 GB/s at 8 MiB with the
// default cache). A miss now reads the entries of the transfer's next
// pages in the same DMA, so the table reads are a fraction of the misses;
// the data must still land right through the prefetched entries.
func TestTranslationBurst(t *testing.T) {
	o := DefaultOptions()
	o.TLBSize = 16
	n, a, _, cq := loop(t, o, true)
	const size = 2 << 20 // 512 pages, 32 times the cache's reach
	src, dst := make([]byte, size+100), make([]byte, size+pageSize)
	for i := range src {
		src[i] = byte(i*13 + i>>12)
	}
	hs, hd := reg(t, n, src), reg(t, n, dst)
	for round := 0; round < 2; round++ {
		w := &Descriptor{Control: OpRDMAWrite, RemoteHandle: hd, RemoteAddr: Addr(dst[100:]), DS: []DataSegment{Seg(hs, src[100:])}}
		if err := a.PostSend(w); err != nil {
			t.Fatal(err)
		}
		for d := (*Descriptor)(nil); d == nil; d = a.SendDone() {
			if _, _, err := cq.Wait(5 * time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if w.Err() != nil {
			t.Fatal(w.Err())
		}
		if !bytes.Equal(dst[100:size+100], src[100:]) {
			t.Fatalf("round %d: the RDMA write through prefetched translations moved the wrong bytes", round)
		}
		clear(dst)
	}
	c := n.Counters()
	misses, reads := c["tlb_misses"], c["tlb_reads"]
	// Two rounds, two buffers of 513 pages each (the first touch of a
	// page may be translated at registration or post time).
	if misses < 2*size/pageSize {
		t.Fatalf("%d misses with a 16-entry cache, want every page to miss", misses)
	}
	if reads == 0 || reads > misses/32 {
		t.Errorf("%d host-table reads for %d misses, want at most one per 32", reads, misses)
	}
}

// TestSlotLayout: the NIC memory that two processes write in turn is laid
// out in whole cache lines. A receive-queue slot of a one-segment
// descriptor (the MPI device's buffers) is one line, holding what the
// owner writes when it posts (the descriptor's address and segment) and
// what the peer's NIC writes when it consumes it (the completion); no two
// slots share a line; a translation-cache entry lies in one line. The
// completion used to follow the cached segments, in the next line, which
// the following slot shared.
func TestSlotLayout(t *testing.T) {
	const line = 64
	for _, o := range allOptions(1024) {
		o.MaxVIs, o.RecvQueue = 3, 7
		l := makeLayout(o)
		if l.vis%line != 0 || l.viStride%line != 0 || slotSize%line != 0 || viHdrSize%line != 0 {
			t.Errorf("%v: receive queues at %d, stride %d, slots of %d bytes: not whole lines", o, l.vis, l.viStride, slotSize)
		}
		if slotComp+12 > line || slotSeg0+16 > line || slotSeg0 < slotComp+12 || slotSeg0+slotSegs*16 > slotSize {
			t.Errorf("a one-segment slot is not one line: completion at %d, segments at %d", slotComp, slotSeg0)
		}
		if o.AT == AT3 && (l.at3%line != 0 || line%cacheEntry != 0) {
			t.Errorf("%v: translation cache at %d with %d-byte entries straddles lines", o, l.at3, cacheEntry)
		}
	}
}

// TestTLBHitCount: a translation counts its cache hits once per call (not
// one atomic add per page), and the count stays exact: in the NIC's own
// cache at once, and in a peer's cache (translated by this process's
// engine) once the engine flushes what it counted, as it does before it
// sleeps.
func TestTLBHitCount(t *testing.T) {
	a, b, _, _, _ := pair(t, DefaultOptions())
	buf := make([]byte, 16*pageSize)
	h, err := b.RegisterMem(buf)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := a.importView(b.Address())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		v    *view
	}{{"own", b.self}, {"peer", pv}} {
		before := b.Counters()
		for i := 0; i < 3; i++ {
			if _, err := c.v.nicTranslate(h, Addr(buf), uint64(len(buf)), nil); err != nil {
				t.Fatal(err)
			}
		}
		a.eng.mu.Lock()
		a.flushHits()
		a.eng.mu.Unlock()
		after := b.Counters()
		hits, misses := after["tlb_hits"]-before["tlb_hits"], after["tlb_misses"]-before["tlb_misses"]
		if hits+misses != 48 || hits < 32 {
			t.Fatalf("%s: 3 translations of 16 pages counted %d hits and %d misses", c.name, hits, misses)
		}
	}
}

// TestLastTranslation: a translation within one page of the NIC's own
// memory that repeats the last one is served by the last-translation
// register, without the translation cache (an entry invalidated behind its
// back still counts a hit, not a miss), and DeregisterMem clears the
// register: a region registered again under the same handle translates to
// its own pages, and the old range fails.
func TestLastTranslation(t *testing.T) {
	_, b, _, _, _ := pair(t, DefaultOptions())
	buf := make([]byte, 2*pageSize)
	h, err := b.RegisterMem(buf)
	if err != nil {
		t.Fatal(err)
	}
	// Two pages (a send buffer's and a receive buffer's), each translated
	// twice: a miss, then a cache hit that fills a register.
	addr, other := Addr(buf)+100, Addr(buf)+pageSize+100
	for _, a := range []uint64{addr, addr, other, other} {
		out, err := b.self.nicTranslate(h, a, 8, nil)
		if err != nil || len(out) != 1 || out[0].Addr != a || out[0].Len != 8 {
			t.Fatalf("translation of %#x: %v %v", a, out, err)
		}
	}
	b.self.cacheInvalidate(addr >> 12)
	b.self.cacheInvalidate(other >> 12)
	before := b.Counters()
	for _, a := range []uint64{addr, other, addr} {
		out, err := b.self.nicTranslate(h, a, 8, nil)
		if err != nil || len(out) != 1 || out[0].Addr != a {
			t.Fatalf("repeated translation of %#x: %v %v", a, out, err)
		}
	}
	after := b.Counters()
	if hits, misses := after["tlb_hits"]-before["tlb_hits"], after["tlb_misses"]-before["tlb_misses"]; hits != 3 || misses != 0 {
		t.Fatalf("the repeated one-page translations went to the cache: %d hits, %d misses (want 3, 0)", hits, misses)
	}
	if err := b.DeregisterMem(h); err != nil {
		t.Fatal(err)
	}
	buf2 := make([]byte, 2*pageSize)
	h2, err := b.RegisterMem(buf2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.self.nicTranslate(h2, addr, 8, nil); h2 == h && err == nil {
		t.Fatal("the deregistered range still translates under its reused handle")
	}
	addr2 := Addr(buf2) + 100
	for i := 0; i < 2; i++ {
		out, err := b.self.nicTranslate(h2, addr2, 8, nil)
		if err != nil || len(out) != 1 || out[0].Addr != addr2 {
			t.Fatalf("new region, translation %d: %v %v (want %#x)", i, out, err, addr2)
		}
	}
	_ = buf[0] // buf stays allocated until here: addr must not be reused by buf2
}
