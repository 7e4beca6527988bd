package bip

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/pmi"
	"github.com/adimpi/adimpi/internal/testnote"
)

// TestSharedCopy: a long message between two endpoints of this process
// (peers on one host, remote write allowed) is copied by both sides, one
// piece per Progress call each, straight from the send buffer into the
// posted buffer: every byte lands, a receive shorter than the message gets
// its prefix, a message shorter than the receive its own size, and both
// sides copied pieces. Driving the two endpoints in turn makes the split
// deterministic: the sender copies the first piece when it matches, then
// the receiver and the sender alternate.
func TestSharedCopy(t *testing.T) {
	eps := pipeJob(t, []int{0, 0}, DefaultOptions)
	snd, rcv := eps[0], eps[1]
	if !snd.peers[1].remoteOK || !rcv.peers[0].remoteOK {
		testnote.Skip(t, "process_vm_writev into this very process is not allowed here: no shared copy to test")
	}
	const kib = 1 << 10
	for i, tc := range []struct{ size, cap int }{
		{shareMin, shareMin},                       // two pieces of sharePieceMin: one each
		{640*kib + 123, 640*kib + 123},             // pieces of 96 KiB, a short last one
		{3*sharePieceMax + 5, 2*sharePieceMax + 7}, // truncated receive, pieces of the largest size
		{200*kib + 9, 512 * kib},                   // message shorter than the receive
		{shareMin - 1, shareMin},                   // below shareMin: one remote write, no sharing
		{17*sharePieceMax + 1, 18 * sharePieceMax}, // many pieces of the largest size
	} {
		t.Run(fmt.Sprintf("%d-into-%d", tc.size, tc.cap), func(t *testing.T) {
			data := make([]byte, tc.size)
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			got := make([]byte, tc.cap)
			w0, r0 := snd.Stats.SharedWrites, rcv.Stats.SharedReads
			tag := uint32(100 + i)
			r, err := rcv.PostLong(0, tag, adi.Bytes(got), nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := snd.StartLong(1, tag, adi.Bytes(data), nil)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; !(s.Done() && r.Done()); k++ {
				if k > 10000 {
					t.Fatalf("not done after %d rounds of Progress: send done %v, receive done %v", k, s.Done(), r.Done())
				}
				rcv.Progress()
				snd.Progress()
			}
			if s.Err() != nil || r.Err() != nil {
				t.Fatalf("send error %v, receive error %v", s.Err(), r.Err())
			}
			n := min(tc.size, tc.cap)
			if r.Bytes() != n || r.Size() != tc.size || s.Bytes() != n {
				t.Fatalf("received %d of %d bytes (sent %d), want %d of %d", r.Bytes(), r.Size(), s.Bytes(), n, tc.size)
			}
			if !bytes.Equal(got[:n], data[:n]) {
				t.Fatalf("received bytes differ from the message's first %d", n)
			}
			if !r.Direct() {
				t.Fatalf("the message came through staging, not straight into the buffer")
			}
			wrote, read := snd.Stats.SharedWrites-w0, rcv.Stats.SharedReads-r0
			piece := int(sharePiece(n))
			pieces := int64((n + piece - 1) / piece)
			switch {
			case n < shareMin && wrote+read != 0:
				t.Fatalf("a message of %d bytes (below %d) was shared: %d pieces written, %d read", n, shareMin, wrote, read)
			case n >= shareMin && (wrote+read != pieces || wrote == 0 || read == 0):
				t.Fatalf("%d pieces written by the sender and %d read by the receiver, want %d in all from both", wrote, read, pieces)
			}
		})
	}
}

// devJob wires up size MPI devices in this process through a PMI server
// over in-memory connections, with device options opts.
func devJob(t testing.TB, size int, opts map[string]string) []*Device {
	t.Helper()
	srv := pmi.NewServer(size, "bip-dev-"+t.Name())
	devs := make([]*Device, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		a, b := net.Pipe()
		go srv.Serve(r, a)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pmi.NewClient(b, r, size)
			if err != nil {
				errs[r] = err
				return
			}
			devs[r] = new(Device)
			errs[r] = devs[r].Init(adi.Config{Rank: r, Size: size, KVS: c, Options: opts})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, d := range devs {
			d.Finalize()
		}
	})
	return devs
}

// TestSendShortKeepsOrder: the device's immediate small send (the core's
// path for blocking sends and the first try of every eager Isend) goes
// straight into the peer's queue only while nothing waits in the peer's
// backlog and a credit is free; once a message waits for credit, later
// ones queue behind it, so the receiver sees every message in sending
// order, with its data.
func TestSendShortKeepsOrder(t *testing.T) {
	devs := devJob(t, 2, map[string]string{"queue": "6"}) // 4 credits
	snd, rcv := devs[0], devs[1]
	const n = 12
	var sends []*adi.Request
	for i := range n {
		data := []byte{byte(i), 0xA5}
		if i%3 == 2 {
			// A blocking send's try: refused once credit is gone or the
			// backlog holds anything, and then sent as a request.
			if snd.SendShort(7, 1, i, adi.Bytes(data).Type.Signature(), data) {
				if i >= 4 {
					t.Fatalf("SendShort of message %d went with the credits used up", i)
				}
				continue
			}
		}
		r := &adi.Request{Op: adi.OpSend, Context: 7, Peer: 1, Tag: i, Buf: adi.Bytes(data)}
		if err := snd.Isend(r); err != nil {
			t.Fatal(err)
		}
		sends = append(sends, r)
	}
	if c := snd.Counters()["backlog"]; c != n-4 {
		t.Fatalf("backlog holds %d messages, want %d (the credits are 4)", c, n-4)
	}
	for i := range n {
		got := make([]byte, 2)
		r := &adi.Request{Op: adi.OpRecv, Context: 7, Peer: 0, Tag: adi.AnyTag, Buf: adi.Bytes(got)}
		if err := rcv.Irecv(r); err != nil {
			t.Fatal(err)
		}
		for k := 0; !r.Done(); k++ {
			if k > 100000 {
				t.Fatalf("message %d never came", i)
			}
			if _, err := rcv.Progress(); err != nil {
				t.Fatal(err)
			}
			if _, err := snd.Progress(); err != nil {
				t.Fatal(err)
			}
		}
		if st := r.Status; st.Err != nil || st.Tag != i || got[0] != byte(i) || got[1] != 0xA5 {
			t.Fatalf("receive %d: tag %d, data %v, error %v; want tag %d, data [%d 165]", i, st.Tag, got, st.Err, i, i)
		}
	}
	for _, r := range sends {
		if !r.Done() || r.Status.Err != nil {
			t.Fatalf("send of tag %d: done %v, %v", r.Tag, r.Done(), r.Status.Err)
		}
	}
}

// TestSlotsOnCacheLines: every short-message slot starts on a cache line,
// so that a small message (slot header, MPI-BIP header and 8 bytes of
// data: 64 bytes) is one line for the receiver to fetch, not two.
func TestSlotsOnCacheLines(t *testing.T) {
	for _, short := range []int{64, 256, 4096} {
		o := DefaultOptions
		o.Short = short
		eps := pipeJob(t, []int{0, 0}, o)
		for _, e := range eps {
			for _, p := range e.peers {
				for i := range e.opt.Queue {
					at := uintptr(unsafe.Pointer(&p.out[e.offQueue+i*e.slotBytes]))
					if at%64 != 0 {
						t.Fatalf("short=%d: rank %d's slot %d for rank %d at %#x, not on a 64-byte line", short, e.rank, i, p.rank, at)
					}
				}
			}
		}
	}
}
