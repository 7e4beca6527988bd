package fm

import (
	"bytes"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/aditest"
	"github.com/adimpi/adimpi/datatype"
)

// TestSmallMessagesShort: a blocking send's small message into a posted
// receive, as pingpong runs them, is one packet that SendShort writes
// straight into the peer's region (short_sends) and eagerIn takes straight
// into the receive (short_receives), whatever its size up to a word, the
// empty message included, and it arrives whole.
func TestSmallMessagesShort(t *testing.T) {
	j := aditest.Start(t, func() adi.Device { return new(Device) }, 2, nil)
	tx, rx := j.Devs[0].(*Device), j.Devs[1].(*Device)
	for _, n := range []int{0, 3, 8} {
		before, sentBefore := rx.Counters()["short_receives"], tx.Counters()["short_sends"]
		data := []byte("abcdefgh")[:n]
		got := make([]byte, 8)
		r := &adi.Request{Op: adi.OpRecv, Context: 7, Peer: 0, Tag: 3, Buf: adi.Buffer{Mem: got[:n], Count: n, Type: datatype.Byte}}
		if err := rx.Irecv(r); err != nil {
			t.Fatal(err)
		}
		if !tx.SendShort(7, 1, 3, datatype.Byte.Signature(), data) {
			t.Fatalf("%d B: SendShort refused an eager message to an empty ring", n)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !r.Done() {
			if time.Now().After(deadline) {
				t.Fatalf("%d B: the receive did not complete", n)
			}
			if _, err := rx.Progress(); err != nil {
				t.Fatal(err)
			}
		}
		if st := r.Status; st.Err != nil || st.Bytes != n || st.Source != 0 || st.Tag != 3 {
			t.Fatalf("%d B: status %+v, want %d bytes from rank 0 tag 3", n, st, n)
		}
		if !bytes.Equal(got[:n], data) || !bytes.Equal(got[n:], make([]byte, 8-n)) {
			t.Fatalf("%d B: received %q, want %q and nothing past it", n, got, data)
		}
		if d := rx.Counters()["short_receives"] - before; d != 1 {
			t.Errorf("%d B: short_receives went up by %d, want 1: the message took the stream path", n, d)
		}
		if d := tx.Counters()["short_sends"] - sentBefore; d != 1 {
			t.Errorf("%d B: short_sends went up by %d, want 1", n, d)
		}
	}
}
