package bip

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/adimpi/adimpi/adi"
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
	for i, tc := range []struct{ size, cap int }{
		{shareMin, shareMin},                                // two pieces: one each
		{5*sharePiece + 123, 5*sharePiece + 123},            // a short last piece
		{3*sharePiece + 5, 2*sharePiece + 7},                // truncated receive
		{2*sharePiece + 9, 4 * sharePiece},                  // message shorter than the receive
		{shareMin - 1, shareMin},                            // below shareMin: one remote write, no sharing
		{7*sharePiece + 1, 7*sharePiece + 1 + sharePiece/2}, // odd sizes both sides
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
			pieces := int64((n + sharePiece - 1) / sharePiece)
			switch {
			case n < shareMin && wrote+read != 0:
				t.Fatalf("a message of %d bytes (below %d) was shared: %d pieces written, %d read", n, shareMin, wrote, read)
			case n >= shareMin && (wrote+read != pieces || wrote == 0 || read == 0):
				t.Fatalf("%d pieces written by the sender and %d read by the receiver, want %d in all from both", wrote, read, pieces)
			}
		})
	}
}
