package via

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// pair opens two NICs in this process with one VI each, connected to each
// other: the target of an RDMA transfer is another NIC, as between two
// ranks of one host.
func pair(t *testing.T, o Options) (a, b *NIC, va, vb *VI, cq *CQ) {
	t.Helper()
	open := func() *NIC {
		n, err := OpenNIC(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	a, b = open(), open()
	var err error
	if cq, err = a.CreateCQ(); err != nil {
		t.Fatal(err)
	}
	if va, err = a.CreateVI(cq, cq); err != nil {
		t.Fatal(err)
	}
	if vb, err = b.CreateVI(nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := va.Connect(b.Address(), vb.ID()); err != nil {
		t.Fatal(err)
	}
	if err := vb.Connect(a.Address(), va.ID()); err != nil {
		t.Fatal(err)
	}
	return a, b, va, vb, cq
}

// TestSharedDMA: large RDMA reads and writes between two NICs are moved
// in pieces by both NICs (dmashare.go; reads in chunks through the
// target's staging buffers, dmastage.go), and every byte lands where it
// belongs, at sizes that are not multiples of a piece and at unaligned
// addresses; every piece is counted once, by the initiator or by the
// target. Before the shared DMA the initiator moved everything in one
// system call and no piece was counted.
func TestSharedDMA(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("dmashare=%v", on), func(t *testing.T) { sharedDMA(t, on) })
	}
}

func sharedDMA(t *testing.T, on bool) {
	o := DefaultOptions()
	o.SharedDMA = on
	a, b, va, _, cq := pair(t, o)
	const max = 3<<20 + 12345
	src, dst := make([]byte, max+64), make([]byte, max+64)
	for i := range src {
		src[i] = byte(i*7 + i>>13)
	}
	ha := reg(t, a, src) // the initiator's memory
	hb := reg(t, b, dst) // the target's
	pieces := int64(0)
	for _, c := range []struct {
		op   uint32
		size int
	}{{OpRDMAWrite, shareMin}, {OpRDMAWrite, max}, {OpRDMARead, shareMin + 1}, {OpRDMARead, 1<<20 + 3}, {OpRDMARead, max}} {
		clear(dst)
		local, remote := src[7:7+c.size], dst[5:5+c.size]
		if c.op == OpRDMARead {
			// Read what the target holds into the initiator's memory.
			copy(remote, local)
			clear(src)
		}
		want := append([]byte(nil), local...)
		if c.op == OpRDMARead {
			want = append([]byte(nil), remote...)
		}
		d := &Descriptor{Control: c.op, RemoteHandle: hb, RemoteAddr: Addr(remote), DS: []DataSegment{Seg(ha, local)}}
		postWait(t, va, cq, d)
		if err := d.Err(); err != nil {
			t.Fatalf("op %d, %d bytes: %v", c.op, c.size, err)
		}
		got := remote
		if c.op == OpRDMARead {
			got = local
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("op %d, %d bytes: the shared transfer moved the wrong bytes", c.op, c.size)
		}
		if c.op == OpRDMAWrite && (dst[4] != 0 || dst[5+c.size] != 0) {
			t.Fatalf("op %d, %d bytes: the write went outside its range", c.op, c.size)
		}
		if c.op == OpRDMARead {
			pieces += int64((c.size + stageChunk - 1) / stageChunk) // staged (dmastage.go)
		} else {
			pieces += int64(sharePieces(uint64(c.size)))
		}
		for i := range src {
			src[i] = byte(i*7 + i>>13)
		}
	}
	ca, cb := a.Counters(), b.Counters()
	if !on {
		pieces = 0 // dmashare=off: the initiator moves it all, in one piece
	}
	if got := ca["nic_shared_init"] + cb["nic_shared_target"]; got != pieces {
		t.Fatalf("pieces moved: %d by the initiator + %d by the target = %d, want %d", ca["nic_shared_init"], cb["nic_shared_target"], got, pieces)
	}
	if ca["nic_shared_target"] != 0 || cb["nic_shared_init"] != 0 {
		t.Fatalf("roles swapped: %v / %v", ca, cb)
	}
	t.Logf("pieces: %d by the initiator, %d by the target", ca["nic_shared_init"], cb["nic_shared_target"])
}

// TestSharedDMAProtection: a shared transfer whose remote range leaves the
// target's region is refused before any piece moves, as an unshared one.
func TestSharedDMAProtection(t *testing.T) {
	a, b, va, _, cq := pair(t, DefaultOptions())
	src, dst := make([]byte, 1<<20), make([]byte, 1<<20)
	ha, hb := reg(t, a, src), reg(t, b, dst)
	d := &Descriptor{Control: OpRDMAWrite, RemoteHandle: hb, RemoteAddr: Addr(dst[1:]), DS: []DataSegment{Seg(ha, src)}}
	postWait(t, va, cq, d)
	if d.Status&StatusProtectionError == 0 {
		t.Fatalf("status %#x, want a protection error", d.Status)
	}
	if c := a.Counters(); c["nic_shared_init"] != 0 {
		t.Fatalf("%d pieces moved for a refused transfer", c["nic_shared_init"])
	}
}

// TestSharePieces: the pieces of a shared transfer cover it exactly, in
// order, and shrink towards its end, so that the last piece (the one the
// other NIC may wait for) is at most sharePieceMin; none is larger than
// sharePieceMax. With pieces of an eighth of the transfer, the last piece
// of 1 MiB was 128 KiB.
func TestSharePieces(t *testing.T) {
	for _, n := range []uint64{shareMin, shareMin + 1, 100 << 10, 1 << 20, 1<<20 + 3, 3<<20 + 12345, 8 << 20, 64 << 20} {
		var off, last uint64
		prev := uint64(sharePieceMax)
		for k := 0; off < n; k++ {
			p := sharePiece(n, off)
			if p == 0 || p > prev || p > sharePieceMax {
				t.Fatalf("%d bytes: piece %d at %d is %d bytes after one of %d", n, k, off, p, prev)
			}
			if p < sharePieceMin && off+p != n {
				t.Fatalf("%d bytes: piece %d at %d is %d bytes, below the minimum before the end", n, k, off, p)
			}
			prev, last = p, p
			off += p
		}
		if off != n {
			t.Fatalf("%d bytes: the pieces cover %d", n, off)
		}
		if last > sharePieceMin {
			t.Fatalf("%d bytes: the last piece is %d bytes, more than %d", n, last, sharePieceMin)
		}
		t.Logf("%d bytes: %d pieces", n, sharePieces(n))
	}
}

// postWait posts send-queue descriptor d on vi and waits until vi's send
// queue hands back a completed descriptor.
func postWait(t *testing.T, vi *VI, cq *CQ, d *Descriptor) {
	t.Helper()
	if err := vi.PostSend(d); err != nil {
		t.Fatal(err)
	}
	for got := (*Descriptor)(nil); got == nil; got = vi.SendDone() {
		if _, _, err := cq.Wait(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
}
