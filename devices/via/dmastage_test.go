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
			postWait(t, va, cq, d)
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
	// Each chunk went one way (nic_stage_*): copied out of the buffers,
	// read by the initiator before or after the target's first chunk, or
	// written straight by the target; no read found the buffers taken.
	if got := ca["nic_stage_staged"] + ca["nic_stage_early"] + ca["nic_stage_late"] + cb["nic_stage_direct"]; got != chunks || ca["nic_stage_busy"] != 0 {
		t.Fatalf("chunks by way: %d staged + %d early + %d late + %d direct = %d, want %d; %d reads found the buffers taken",
			ca["nic_stage_staged"], ca["nic_stage_early"], ca["nic_stage_late"], cb["nic_stage_direct"], got, chunks, ca["nic_stage_busy"])
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

// TestStagedReadAlone: when the target's NIC does not come (its
// application computes elsewhere and its engine sleeps), the initiator
// reads the whole transfer itself, in runs of several chunks (stageRun: a
// quarter of what is left, whole chunks, at most stageRunMax) rather than
// one system call per chunk, whose per-call cost made a read from an
// absent target take a third longer (docs/via-bandwidth.md, session 9).
// Every byte lands in place and every chunk is counted once.
func TestStagedReadAlone(t *testing.T) {
	a, b, va, _, cq := pair(t, DefaultOptions())
	const size = 1<<20 + 4567
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i*13 + i>>11)
	}
	ha, hb := reg(t, a, dst), reg(t, b, src)
	const rounds = 4
	for round := 0; round < rounds; round++ {
		clear(dst)
		d := &Descriptor{Control: OpRDMARead, RemoteHandle: hb, RemoteAddr: Addr(src), DS: []DataSegment{Seg(ha, dst)}}
		postWait(t, va, cq, d)
		if err := d.Err(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst, src) {
			t.Fatalf("round %d: the read moved the wrong bytes", round)
		}
	}
	chunks := int64(rounds * ((size + stageChunk - 1) / stageChunk))
	ca, cb := a.Counters(), b.Counters()
	if got := ca["nic_stage_staged"] + ca["nic_stage_early"] + ca["nic_stage_late"] + cb["nic_stage_direct"]; got != chunks {
		t.Fatalf("chunks by way: %d staged + %d early + %d late + %d direct = %d, want %d", ca["nic_stage_staged"], ca["nic_stage_early"], ca["nic_stage_late"], cb["nic_stage_direct"], got, chunks)
	}
	own := ca["nic_stage_early"] + ca["nic_stage_late"]
	if own == 0 {
		t.Skip("the target's engine staged every chunk: nothing read alone to check (it woke although nobody rang it)")
	}
	if reads := ca["nic_stage_reads"]; reads*2 > own {
		t.Fatalf("the initiator read %d chunks itself in %d system calls; want runs of several chunks (at most half as many calls)", own, reads)
	}
	t.Logf("%d chunks read by the initiator in %d calls, %d staged by the target", own, ca["nic_stage_reads"], ca["nic_stage_staged"])
	for _, c := range []struct{ size, off, want uint64 }{
		{1 << 20, 0, 256 << 10}, {1 << 20, 256 << 10, 192 << 10}, {1 << 20, 448 << 10, 128 << 10},
		{1 << 20, 800 << 10, stageChunk}, {1 << 20, 1<<20 - 100, stageChunk}, {8 << 20, 0, stageRunMax},
	} {
		if got := stageRun(c.size, c.off); got != c.want {
			t.Errorf("stageRun(%d, %d) = %d, want %d", c.size, c.off, got, c.want)
		}
	}
}
