package via

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/internal/testkvs"
)

// devicePair starts ranks 0 and 1 of a job as two devices in this process:
// each has its own NIC, so a rendezvous between them is an RDMA transfer
// between two NICs of one host, as between two processes.
func devicePair(t *testing.T, opts map[string]string) [2]*Device {
	t.Helper()
	kv := testkvs.New(2)
	var ds [2]*Device
	var errs [2]error
	var wg sync.WaitGroup
	for r := range ds {
		ds[r] = new(Device)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = ds[r].Init(adi.Config{Rank: r, Size: 2, KVS: kv, Options: opts})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, d := range ds {
			wg.Add(1)
			go func() { defer wg.Done(); d.Finalize() }()
		}
		wg.Wait()
	})
	return ds
}

// TestRendezvousReadPieces sends large messages from rank 0 to rank 1 of
// a device pair, received by RDMA read: into a contiguous buffer (the
// read is shared by both NICs, piece by piece), into a strided datatype
// (a scatter list), and both truncated (MPI_ERR_TRUNCATE, the buffer
// filled with the message's first bytes and nothing beyond it). Every
// byte is checked.
func TestRendezvousReadPieces(t *testing.T) {
	ds := devicePair(t, nil)
	const n = 3<<20 + 5
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i*13 + i>>12 + 1)
	}
	// A vector of blocks of 1000 bytes, 1500 apart: one holds 1.6 MB, two
	// (the second from the first's extent on) the whole message.
	const blocks, blen, stride = 1600, 1000, 1500
	const vbytes, extent = blocks * blen, (blocks-1)*stride + blen
	vec, err := datatype.Vector(blocks, blen, stride, datatype.Byte)
	if err == nil {
		err = vec.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	strided := func(k int) int {
		j := k % vbytes
		return k/vbytes*extent + j/blen*stride + j%blen
	}
	contiguous := func(k int) int { return k }
	cases := []struct {
		name  string
		rb    adi.Buffer
		bytes int           // the bytes received
		at    func(int) int // the place in rb.Mem of the k-th received byte
	}{
		{"contiguous", adi.Bytes(make([]byte, n)), n, contiguous},
		{"strided", adi.Buffer{Mem: make([]byte, 2*extent), Count: 2, Type: vec}, n, strided},
		{"contiguous truncated", adi.Bytes(make([]byte, 2<<20+1)), 2<<20 + 1, contiguous},
		{"strided truncated", adi.Buffer{Mem: make([]byte, extent), Count: 1, Type: vec}, vbytes, strided},
	}
	for _, c := range cases {
		sb := adi.Bytes(src)
		r := &adi.Request{Op: adi.OpRecv, Peer: 0, Tag: 3, Buf: c.rb}
		s := &adi.Request{Op: adi.OpSend, Peer: 1, Tag: 3, Buf: sb}
		if err := ds[1].Irecv(r); err != nil {
			t.Fatal(err)
		}
		if err := ds[0].Isend(s); err != nil {
			t.Fatal(err)
		}
		progressUntil(t, ds[:], r, s)
		truncated := sb.Size() > c.rb.Size()
		if s.Status.Err != nil {
			t.Fatalf("%s: send: %v", c.name, s.Status.Err)
		}
		if truncated != errors.Is(r.Status.Err, adi.ErrTruncate) || (!truncated && r.Status.Err != nil) {
			t.Fatalf("%s: receive status %+v (truncated: %v)", c.name, r.Status, truncated)
		}
		if r.Status.Bytes != c.bytes {
			t.Fatalf("%s: %d bytes received, want %d", c.name, r.Status.Bytes, c.bytes)
		}
		want := make([]byte, len(c.rb.Mem))
		for k := 0; k < c.bytes; k++ {
			want[c.at(k)] = src[k]
		}
		for i := range want {
			if c.rb.Mem[i] != want[i] {
				t.Fatalf("%s: byte %d of the receive buffer is %d, want %d", c.name, i, c.rb.Mem[i], want[i])
			}
		}
	}
	c0, c1 := ds[0].Counters(), ds[1].Counters()
	if c1["rendezvous_reads"] != int64(len(cases)) || c1["nic_shared_init"] == 0 {
		t.Fatalf("receiver: %d rendezvous reads, %d shared pieces; want %d reads, some shared", c1["rendezvous_reads"], c1["nic_shared_init"], len(cases))
	}
	t.Logf("pieces of the shared reads: %d by the reader, %d by the sender's NIC", c1["nic_shared_init"], c0["nic_shared_target"])
}

// TestDoneFollowsReads: the DONE that releases a rendezvous sender is
// posted behind the RDMA read, so the NIC sends it as soon as the data is
// in. When the receive completes, the receiver's NIC has nothing left to
// execute and the sender's next progress completes the send, without the
// receiver calling progress again. Before, the receiver posted the DONE
// when it saw the read's completion, and it waited in its send queue for
// the next pass: a stream of messages then found the NIC idle for a round
// trip after every batch of reads.
func TestDoneFollowsReads(t *testing.T) {
	ds := devicePair(t, nil)
	const n = 1 << 20
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i * 3)
	}
	for round := 0; round < 3; round++ {
		r := &adi.Request{Op: adi.OpRecv, Peer: 0, Tag: 4, Buf: adi.Bytes(dst)}
		s := &adi.Request{Op: adi.OpSend, Peer: 1, Tag: 4, Buf: adi.Bytes(src)}
		if err := ds[1].Irecv(r); err != nil {
			t.Fatal(err)
		}
		if err := ds[0].Isend(s); err != nil {
			t.Fatal(err)
		}
		// Progress both until the receive is done, the sender first in
		// each turn so that its last call comes before the receiver's.
		deadline := time.Now().Add(20 * time.Second)
		for !r.Done() {
			if time.Now().After(deadline) {
				t.Fatal("the receive did not complete")
			}
			for _, d := range []*Device{ds[0], ds[1]} {
				if _, err := d.Progress(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if r.Status.Err != nil || string(dst) != string(src) {
			t.Fatalf("round %d: receive %+v, or wrong data", round, r.Status)
		}
		if ds[1].nic.Busy() || len(ds[1].peers[0].out) > 0 || len(ds[1].peers[0].data) > 0 {
			t.Fatalf("round %d: the receive is complete but its DONE has not left the receiver (NIC busy %v, %d waiting)",
				round, ds[1].nic.Busy(), len(ds[1].peers[0].out)+len(ds[1].peers[0].data))
		}
		for !s.Done() {
			if time.Now().After(deadline) {
				t.Fatal("the send did not complete with the sender's progress alone")
			}
			if _, err := ds[0].Progress(); err != nil {
				t.Fatal(err)
			}
		}
		if s.Status.Err != nil {
			t.Fatalf("round %d: send %v", round, s.Status.Err)
		}
		clear(dst)
	}
}

// TestReadCompletesInPlace: a receive whose RDMA read the doorbell ran on
// the receiver's thread (NIC.inline, when the DONE behind it was posted)
// is complete when that progress call returns. Before, its completion
// waited for the next progress call, which a ping-pong paid on every
// message. Rounds in which the engine goroutine took the read instead
// (it held the NIC's lock at the doorbell) prove nothing and are not
// counted; most rounds run it inline.
func TestReadCompletesInPlace(t *testing.T) {
	ds := devicePair(t, nil)
	const n = 1 << 20
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i*5 + 1)
	}
	inlineRounds := 0
	for round := 0; round < 8; round++ {
		r := &adi.Request{Op: adi.OpRecv, Peer: 0, Tag: 5, Buf: adi.Bytes(dst)}
		s := &adi.Request{Op: adi.OpSend, Peer: 1, Tag: 5, Buf: adi.Bytes(src)}
		if err := ds[1].Irecv(r); err != nil {
			t.Fatal(err)
		}
		if err := ds[0].Isend(s); err != nil {
			t.Fatal(err)
		}
		reads := ds[1].cnt.rndvReads
		deadline := time.Now().Add(20 * time.Second)
		for ds[1].cnt.rndvReads == reads {
			if time.Now().After(deadline) {
				t.Fatal("the RTS did not arrive")
			}
			before := ds[1].nic.passCount(&ds[1].nic.pc.inline)
			if _, err := ds[1].Progress(); err != nil {
				t.Fatal(err)
			}
			if ds[1].cnt.rndvReads != reads && ds[1].nic.passCount(&ds[1].nic.pc.inline)-before >= 2 {
				// This call matched the RTS and ran the read and the DONE.
				inlineRounds++
				if !r.Done() {
					t.Fatalf("round %d: the read ran in this progress call, but the receive is not complete", round)
				}
			}
		}
		progressUntil(t, ds[:], r, s)
		if r.Status.Err != nil || s.Status.Err != nil || string(dst) != string(src) {
			t.Fatalf("round %d: receive %+v, send %+v, or wrong data", round, r.Status, s.Status)
		}
		clear(dst)
	}
	if inlineRounds == 0 {
		t.Fatal("no round ran its read at the doorbell on the receiver's thread")
	}
}

// TestSenderStaysUp: while a peer of this host is reading this process's
// large sends with the shared DMA (a send is live and the sender's NIC
// copied a piece of a transfer within shareStay), the sender's Sleep
// returns at once: the waiter keeps polling and moves its NIC's half of
// every transfer. It sleeps when the reader has not come for shareStay,
// when the ranks outnumber the cores, and once no such send is live.
// Before, the sender slept, and the reader's NIC had to wake its engine
// for every transfer of a stream.
func TestSenderStaysUp(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("SKIPPED: the device stays up only with a core per rank; this machine has one core")
	}
	ds := devicePair(t, nil)
	const n = 1 << 20
	src, dst := make([]byte, n), make([]byte, n)
	asleep := func(d *Device) time.Duration {
		t0 := time.Now()
		d.Sleep(d.Seq(), 200*time.Millisecond)
		return time.Since(t0)
	}
	s := &adi.Request{Op: adi.OpSend, Peer: 1, Tag: 6, Buf: adi.Bytes(src)}
	if err := ds[0].Isend(s); err != nil {
		t.Fatal(err)
	}
	if got := ds[0].liveShared.Load(); got != 1 {
		t.Fatalf("%d shared sends after a 1 MiB send to a rank of this host, want 1", got)
	}
	for i := 0; i < 3; i++ { // the RTS's completion taken: nothing is left to wake a Sleep
		if _, err := ds[0].Progress(); err != nil {
			t.Fatal(err)
		}
	}
	// No piece copied yet (the receiver has not come): the sender sleeps.
	if d := asleep(ds[0]); d < 150*time.Millisecond {
		t.Fatalf("before any shared piece the sender slept only %v of 200ms", d)
	}
	// As just after its NIC copied a piece of a transfer: it stays up.
	// (The time is set ahead, so that the check does not depend on how
	// soon this goroutine runs again on a loaded machine.)
	ds[0].nic.sharedAt.Store(time.Now().Add(time.Hour).UnixNano())
	if d := asleep(ds[0]); d > 100*time.Millisecond {
		t.Fatalf("the sender of a shared transfer slept %v", d)
	}
	ds[0].stayUp = false // as with more ranks than cores
	if d := asleep(ds[0]); d < 150*time.Millisecond {
		t.Fatalf("with more ranks than cores the sender slept only %v of 200ms", d)
	}
	ds[0].stayUp = true
	r := &adi.Request{Op: adi.OpRecv, Peer: 0, Tag: 6, Buf: adi.Bytes(dst)}
	if err := ds[1].Irecv(r); err != nil {
		t.Fatal(err)
	}
	progressUntil(t, ds[:], r, s)
	if r.Status.Err != nil || s.Status.Err != nil {
		t.Fatalf("receive %+v, send %+v", r.Status, s.Status)
	}
	if got := ds[0].liveShared.Load(); got != 0 {
		t.Fatalf("%d shared sends after the send completed, want 0", got)
	}
	if d := asleep(ds[0]); d < 150*time.Millisecond {
		t.Fatalf("with no shared send left the sender slept only %v of 200ms", d)
	}
}

// TestSenderDoesNotYield: a waiter whose 1 MiB send a peer of this host
// reads with the shared DMA, in a stream (its NIC moved a chunk lately),
// polls without giving its core away, so that it moves its NIC's chunks
// as soon as the reader publishes them; with more ranks than cores it
// yields as before. Before, every idle poll of such a sender called
// sched_yield, which on a host loaded by other jobs handed the core to one
// of them for the rest of its time slice.
func TestSenderDoesNotYield(t *testing.T) {
	ds := devicePair(t, nil)
	const n = 1 << 20
	src, dst := make([]byte, n), make([]byte, n)
	s := &adi.Request{Op: adi.OpSend, Peer: 1, Tag: 6, Buf: adi.Bytes(src)}
	if err := ds[0].Isend(s); err != nil {
		t.Fatal(err)
	}
	idle := func() int64 { // yields over 10 idle polls
		y0 := ds[0].cnt.yields
		for i := 0; i < 10; i++ {
			if _, err := ds[0].Progress(); err != nil {
				t.Fatal(err)
			}
		}
		return ds[0].cnt.yields - y0
	}
	idle() // the RTS's completion taken
	ds[0].stayUp = true
	ds[0].nic.sharedAt.Store(time.Now().Add(time.Hour).UnixNano()) // in a stream (see TestSenderStaysUp)
	if y := idle(); y != 0 {
		t.Fatalf("a sender in a stream of shared transfers yielded %d times in 10 idle polls", y)
	}
	ds[0].stayUp = false // as with more ranks than cores
	if y := idle(); y == 0 {
		t.Fatal("with more ranks than cores the sender of 1 MiB did not yield")
	}
	r := &adi.Request{Op: adi.OpRecv, Peer: 0, Tag: 6, Buf: adi.Bytes(dst)}
	if err := ds[1].Irecv(r); err != nil {
		t.Fatal(err)
	}
	progressUntil(t, ds[:], r, s)
	if r.Status.Err != nil || s.Status.Err != nil {
		t.Fatalf("receive %+v, send %+v", r.Status, s.Status)
	}
}
