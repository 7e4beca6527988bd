package via

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStagedRead: a large RDMA read whose target NIC runs (here its
// application helps, as an MPI sender waits for its DONE) moves through
// the target's staging buffers: the target copies chunks of its registered
// memory into its NIC memory and the initiator copies them out, and every
// byte lands in place, at sizes that are not multiples of a chunk and at
// unaligned addresses. The staging buffers are free again after each
// read, and the chunks are counted once, by whichever NIC moved them.
// Before staging, the target wrote its pieces with process_vm_writev and
// nothing went through its NIC memory (the buffers did not exist).
func TestStagedRead(t *testing.T) {
	a, b, va, _, cq := pair(t, DefaultOptions())
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the target's application, waiting in progress
		defer wg.Done()
		for !stop.Load() {
			b.Help()
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	const max = 3<<20 + 12345
	src, dst := make([]byte, max+64), make([]byte, max+64)
	ha, hb := reg(t, a, dst), reg(t, b, src) // a reads b's src into its dst
	chunks := int64(0)
	for round := 0; round < 8; round++ {
		for _, size := range []int{shareMin, shareMin + 1, 1<<20 + 3, max} {
			for i := range src {
				src[i] = byte(i*7 + i>>13 + round)
			}
			clear(dst)
			remote, local := src[5:5+size], dst[7:7+size]
			d := &Descriptor{Control: OpRDMARead, RemoteHandle: hb, RemoteAddr: Addr(remote), DS: []DataSegment{Seg(ha, local)}}
			if err := va.PostSend(d); err != nil {
				t.Fatal(err)
			}
			for got := (*Descriptor)(nil); got == nil; got = va.SendDone() {
				if _, _, err := cq.Wait(10 * time.Second); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Err(); err != nil {
				t.Fatalf("%d bytes: %v", size, err)
			}
			if !bytes.Equal(local, remote) || dst[6] != 0 || dst[7+size] != 0 {
				t.Fatalf("%d bytes (round %d): the staged read moved the wrong bytes", size, round)
			}
			if owner := *b.self.u64(b.lay.stage); owner != 0 {
				t.Fatalf("%d bytes: the staging buffers are still taken after the read (%d)", size, owner)
			}
			chunks += int64((size + stageChunk - 1) / stageChunk)
		}
	}
	ca, cb := a.Counters(), b.Counters()
	if got := ca["nic_shared_init"] + cb["nic_shared_target"]; got != chunks {
		t.Fatalf("chunks moved: %d by the initiator + %d by the target = %d, want %d", ca["nic_shared_init"], cb["nic_shared_target"], got, chunks)
	}
	// The target helps all along; on a loaded machine it may lose its
	// core for a whole transfer, but not for all 32.
	if cb["nic_shared_target"] == 0 {
		t.Fatalf("the target staged no chunk of %d", chunks)
	}
	t.Logf("chunks: %d read by the initiator, %d staged by the target", ca["nic_shared_init"], cb["nic_shared_target"])
}

// TestStagedReadsCross: two NICs that read from each other at the same
// time, neither application helping, both finish with the right bytes:
// each initiator, while nothing arrives in its peer's buffers, stages its
// own target's chunks (or reads the chunks itself), so neither waits for
// the other.
func TestStagedReadsCross(t *testing.T) {
	a, b, va, vb, _ := pair(t, DefaultOptions())
	const size = 2<<20 + 77
	bufs := [4][]byte{}
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	for i := range bufs[0] {
		bufs[0][i], bufs[1][i] = byte(i*3), byte(i*5+1)
	}
	srcA, dstA := reg(t, a, bufs[0]), reg(t, a, bufs[2])
	srcB, dstB := reg(t, b, bufs[1]), reg(t, b, bufs[3])
	da := &Descriptor{Control: OpRDMARead, RemoteHandle: srcB, RemoteAddr: Addr(bufs[1]), DS: []DataSegment{Seg(dstA, bufs[2])}}
	db := &Descriptor{Control: OpRDMARead, RemoteHandle: srcA, RemoteAddr: Addr(bufs[0]), DS: []DataSegment{Seg(dstB, bufs[3])}}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, c := range []struct {
		vi *VI
		d  *Descriptor
	}{{va, da}, {vb, db}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = c.vi.PostSend(c.d); errs[i] != nil {
				return
			}
			_, errs[i] = c.vi.SendWait(10 * time.Second)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if err := da.Err(); err != nil {
		t.Fatal(err)
	}
	if err := db.Err(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bufs[2], bufs[1]) || !bytes.Equal(bufs[3], bufs[0]) {
		t.Fatal("crossed staged reads moved the wrong bytes")
	}
}

// TestStageIdle: how long the initiator of a staged read waits with no
// chunk arriving before it reads chunks itself (process_vm_readv) depends
// on what it knows of the target: a target whose application sleeps is
// not waited for (its engine joins after a wake-up); an awake one gets
// stageStart for its first chunk, longer than its claim and first copy
// take; one that has claimed a chunk of the transfer is copying and gets
// stageWait. Before, every case waited 5 µs, and in NetPIPE's ping-pong
// the awake sender's first chunk came after 5–10 µs in most transfers, so
// the reader read one chunk or more itself in nearly every transfer
// (docs/via-bandwidth.md).
func TestStageIdle(t *testing.T) {
	a, b, _, _, _ := pair(t, DefaultOptions())
	pb := b.self // the target's NIC memory (the initiator maps the same segment)
	if got := a.stageIdle(pb, false, false); got != stageStart || got < 10*time.Microsecond {
		t.Fatalf("awake target, no chunk yet: waits %v, want stageStart (%v, at least 10µs)", got, stageStart)
	}
	if got := a.stageIdle(pb, true, false); got != stageWait || got < stageStart {
		t.Fatalf("target copying: waits %v, want stageWait (%v)", got, stageWait)
	}
	if got := a.stageIdle(pb, false, true); got != 0 {
		t.Fatalf("target asleep at the publication: waits %v, want 0", got)
	}
	atomic.AddUint32(b.self.u32(offAppSleep), 1)
	defer atomic.AddUint32(b.self.u32(offAppSleep), ^uint32(0))
	if got := a.stageIdle(pb, false, false); got != 0 {
		t.Fatalf("target's application asleep now: waits %v, want 0", got)
	}
}
