package bip

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/aditest"
	"github.com/adimpi/adimpi/datatype"
)

// TestADIWord runs the ADI suite with messages of a word and of two words
// (truncated to one), the sizes of SendShort's and eagerIn's one-move
// copies, and with the largest eager message and the smallest long one.
func TestADIWord(t *testing.T) {
	const eager = 4096 - hdrSize // the default short less the MPI-BIP header
	aditest.Run(t, aditest.Config{Name: "bip", Sizes: []int{8, 16, eager, eager + 1}})
}

// putEager writes the very header putHdr writes for an eager message (its
// fields: the last four bytes are padding).
func TestPutEagerIsPutHdr(t *testing.T) {
	for _, h := range []hdr{
		{ctx: 1, tag: 2, sig: 3, size: 8},
		{ctx: 0xfedcba98, tag: -1, sig: 0x80000001, size: 4056},
		{ctx: 7, tag: 1<<31 - 1, size: 0},
	} {
		for _, credits := range []uint32{0, 5, 1<<32 - 1} {
			want, got := make([]byte, hdrSize), make([]byte, hdrSize)
			for i := range got {
				want[i], got[i] = 0xAA, 0x55 // every field's byte must be written
			}
			putHdr(want, &h, credits)
			putEager(got, h.ctx, h.tag, h.sig, h.size, credits)
			if fields := int(hFlags) + 4; !bytes.Equal(got[:fields], want[:fields]) {
				t.Fatalf("header %+v, credits %d: putEager wrote % x, putHdr % x", h, credits, got, want)
			}
		}
	}
}

// An eager message whose header claims more data than its short message
// holds is a protocol error that Progress reports, not a receive filled
// with whatever lies in the slot behind the message.
func TestEagerSizeMismatch(t *testing.T) {
	devs := devJob(t, 2, nil)
	got := make([]byte, 64)
	r := adi.Request{Op: adi.OpRecv, Context: 3, Peer: 0, Tag: 5, Buf: adi.Bytes(got)}
	if err := devs[1].Irecv(&r); err != nil {
		t.Fatal(err)
	}
	ok, err := devs[0].ep.TrySend(1, msgEager, hdrSize+8, func(b []byte) {
		putEager(b, 3, 5, 0, 40, 0) // 40 bytes claimed, 8 sent
		copy(b[hdrSize:], "8 bytes!")
	})
	if !ok || err != nil {
		t.Fatalf("TrySend: %v, %v", ok, err)
	}
	_, err = devs[1].Progress()
	if err == nil || !strings.Contains(err.Error(), "claims 40 bytes") {
		t.Fatalf("Progress after a broken eager message: error %v, want one saying it claims 40 bytes", err)
	}
	if r.Done() {
		t.Fatalf("the receive completed with %d bytes from a broken message", r.Status.Bytes)
	}
}

// eagerIn's one-move copy of a word writes the word only, into a
// contiguous receive, and a word into a non-contiguous receive (every
// other 4-byte integer) lands block by block.
func TestEagerWord(t *testing.T) {
	devs := devJob(t, 2, nil)
	snd, rcv := devs[0], devs[1]
	word := []byte{1, 2, 3, 4, 5, 6, 7, 8}

	got := bytes.Repeat([]byte{0xEE}, 16)
	r := adi.Request{Op: adi.OpRecv, Context: 3, Peer: 0, Tag: 1, Buf: adi.Bytes(got[:8])}
	if err := rcv.Irecv(&r); err != nil {
		t.Fatal(err)
	}
	if !snd.SendShort(3, 1, 1, 0, word) {
		t.Fatal("SendShort of a word to an idle peer did not send")
	}
	if err := pollUntil(rcv, r.Done); err != nil {
		t.Fatal(err)
	}
	if r.Status.Err != nil || r.Status.Bytes != 8 || r.Status.Source != 0 || r.Status.Tag != 1 {
		t.Fatalf("status %+v, want 8 bytes from rank 0 tag 1", r.Status)
	}
	if want := append(append([]byte(nil), word...), bytes.Repeat([]byte{0xEE}, 8)...); !bytes.Equal(got, want) {
		t.Fatalf("receive buffer % x, want % x", got, want)
	}

	i32 := datatype.Of[int32]()
	vec, err := datatype.Vector(2, 1, 2, i32)
	if err != nil {
		t.Fatal(err)
	}
	if err := vec.Commit(); err != nil {
		t.Fatal(err)
	}
	mem := bytes.Repeat([]byte{0xEE}, 16)
	r = adi.Request{Op: adi.OpRecv, Context: 3, Peer: 0, Tag: 2, Buf: adi.Buffer{Mem: mem, Count: 1, Type: vec}}
	if err := rcv.Irecv(&r); err != nil {
		t.Fatal(err)
	}
	if !snd.SendShort(3, 1, 2, 0, word) {
		t.Fatal("SendShort of a word to an idle peer did not send")
	}
	if err := pollUntil(rcv, r.Done); err != nil {
		t.Fatal(err)
	}
	want := []byte{1, 2, 3, 4, 0xEE, 0xEE, 0xEE, 0xEE, 5, 6, 7, 8, 0xEE, 0xEE, 0xEE, 0xEE}
	if r.Status.Err != nil || r.Status.Bytes != 8 || !bytes.Equal(mem, want) {
		t.Fatalf("status %+v, buffer % x; want 8 bytes, % x", r.Status, mem, want)
	}
}

// Within MPI-BIP's credits a sender never finds a receiver's queue full,
// even with the smallest queue and a receiver that drains it only now and
// then: what lets the MPI device publish its queue heads with a release
// store (consumeShort), since no sender ever waits for a wake-up on them.
func TestCreditsKeepQueuesFromFilling(t *testing.T) {
	for _, queue := range []string{"4", "66"} {
		t.Run("queue="+queue, func(t *testing.T) {
			devs := devJob(t, 2, map[string]string{"queue": queue})
			const n = 500
			sends := make([]adi.Request, n)
			recvs := make([]adi.Request, n)
			in := make([]byte, 8*n)
			out := make([]byte, 8*n)
			for i := range n {
				binary.LittleEndian.PutUint64(out[8*i:], uint64(i))
			}
			// Both ranks send to each other (credits come back
			// piggybacked as well as explicitly), the receiver polling
			// once every 7 sends.
			for i := range n {
				for me, d := range devs {
					if me == 1 {
						recvs[i] = adi.Request{Op: adi.OpRecv, Context: 3, Peer: 0, Tag: 9, Buf: adi.Bytes(in[8*i : 8*i+8])}
						if err := d.Irecv(&recvs[i]); err != nil {
							t.Fatal(err)
						}
						continue
					}
					sends[i] = adi.Request{Op: adi.OpSend, Context: 3, Peer: 1, Tag: 9, Buf: adi.Bytes(out[8*i : 8*i+8])}
					if err := d.Isend(&sends[i]); err != nil {
						t.Fatal(err)
					}
				}
				if i%7 == 6 {
					if _, err := devs[1].Progress(); err != nil {
						t.Fatal(err)
					}
				}
				if i%3 == 2 {
					if _, err := devs[0].Progress(); err != nil {
						t.Fatal(err)
					}
				}
			}
			all := func() bool { return sends[n-1].Done() && recvs[n-1].Done() }
			for k := 0; !all(); k++ {
				if k > 1e6 {
					t.Fatal("the stream did not complete")
				}
				for _, d := range devs {
					if _, err := d.Progress(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !bytes.Equal(in, out) {
				t.Fatal("received data differ from the sent data")
			}
			for r, d := range devs {
				if full := d.ep.Stats.QueueFull; full != 0 {
					t.Errorf("rank %d found a queue full %d times", r, full)
				}
				for _, p := range d.ep.peers {
					if p.out != nil && blkWaitSpace.Load(p.out) != 0 {
						t.Errorf("rank %d asked rank %d to ring when it consumes", r, p.rank)
					}
				}
			}
		})
	}
}

// Small eager messages that arrive before their receives are kept as
// unexpected messages whose records and copies are reused once delivered:
// after the first few, such a stream allocates nothing per message, and
// every receive gets its own message's bytes.
func TestUnexpectedEagerAllocatesNothing(t *testing.T) {
	devs := devJob(t, 2, nil)
	snd, rcv := devs[0], devs[1]
	out, in := make([]byte, 200), make([]byte, 200)
	const burst = 5
	reqs := make([]adi.Request, burst)
	round := 0
	stream := func() {
		round++
		for i := range burst {
			n := []int{8, 0, 200, 1, 64}[i]
			for j := range out[:n] {
				out[j] = byte(round + i + j)
			}
			if !snd.SendShort(3, 1, i, 0, out[:n]) {
				t.Fatal("SendShort did not send")
			}
			// Consumed now, before any receive is posted: unexpected.
			if _, err := rcv.Progress(); err != nil {
				t.Fatal(err)
			}
		}
		for i := range burst {
			n := []int{8, 0, 200, 1, 64}[i]
			reqs[i] = adi.Request{Op: adi.OpRecv, Context: 3, Peer: 0, Tag: i, Buf: adi.Bytes(in[:n])}
			if err := rcv.Irecv(&reqs[i]); err != nil {
				t.Fatal(err)
			}
			if !reqs[i].Done() || reqs[i].Status.Bytes != n {
				t.Fatalf("receive %d: done %v, status %+v; want %d bytes at once", i, reqs[i].Done(), reqs[i].Status, n)
			}
			for j, b := range in[:n] {
				if b != byte(round+i+j) {
					t.Fatalf("round %d, message %d: byte %d is %d, want %d", round, i, j, b, byte(round+i+j))
				}
			}
		}
		for k := 0; k < 2; k++ {
			if _, err := snd.Progress(); err != nil { // credits back
				t.Fatal(err)
			}
		}
	}
	stream()
	if a := testing.AllocsPerRun(50, stream); a != 0 {
		t.Fatalf("%v allocations per burst of %d unexpected messages, want 0", a, burst)
	}
}

// A Progress whose message takes the last posted receive returns without
// looking at the sender's next slot (the next Progress takes what is
// there), while messages that no receive waits for are drained whole.
func TestDrainStopsAtLastReceive(t *testing.T) {
	devs := devJob(t, 2, nil)
	snd, rcv := devs[0], devs[1]
	word := make([]byte, 8)
	for i := range 3 {
		if !snd.SendShort(3, 1, i, 0, word) {
			t.Fatal("SendShort did not send")
		}
	}
	r := adi.Request{Op: adi.OpRecv, Context: 3, Peer: 0, Tag: 0, Buf: adi.Bytes(make([]byte, 8))}
	if err := rcv.Irecv(&r); err != nil {
		t.Fatal(err)
	}
	if _, err := rcv.Progress(); err != nil {
		t.Fatal(err)
	}
	if !r.Done() {
		t.Fatal("the receive of the first message did not complete")
	}
	if got, un := rcv.ep.Stats.ShortRecv, rcv.eng.Unexpected(); got != 1 || un != 0 {
		t.Fatalf("after the Progress that completed the only receive: %d messages consumed, %d unexpected; want 1 and 0", got, un)
	}
	if _, err := rcv.Progress(); err != nil {
		t.Fatal(err)
	}
	if got, un := rcv.ep.Stats.ShortRecv, rcv.eng.Unexpected(); got != 3 || un != 2 {
		t.Fatalf("after a Progress with no receive posted: %d messages consumed, %d unexpected; want 3 and 2", got, un)
	}
}
