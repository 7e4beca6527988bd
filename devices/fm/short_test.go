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

// TestExtractStopsAtLastPostedReceive: once a one-packet message takes the
// last posted receive, Extract leaves what else waits in the regions (the
// sender's next slot, whose line the sender fetches for writing, and the
// other senders' regions) for the next Extract, which then finds it in
// arrival order: an ANY_SOURCE receive posted next takes the message that
// waited in the first sender's region, not one of a sender extracted after
// it. Before, the first Extract took every packet, reading the next slot
// on the waiter's way out.
func TestExtractStopsAtLastPostedReceive(t *testing.T) {
	j := aditest.Start(t, func() adi.Device { return new(Device) }, 3, nil)
	rx := j.Devs[2].(*Device)
	sig := datatype.Byte.Signature()
	for _, s := range []struct {
		from int
		data string
	}{{0, "first..."}, {0, "second.."}, {1, "third..."}} {
		if !j.Devs[s.from].(*Device).SendShort(7, 2, 3, sig, []byte(s.data)) {
			t.Fatalf("SendShort from %d refused a small message with credits", s.from)
		}
	}
	recvFrom := func(src int) ([]byte, adi.Status) {
		got := make([]byte, 8)
		r := &adi.Request{Op: adi.OpRecv, Context: 7, Peer: src, Tag: 3, Buf: adi.Bytes(got)}
		if err := rx.Irecv(r); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !r.Done() {
			if time.Now().After(deadline) {
				t.Fatalf("the receive from %d did not complete", src)
			}
			if _, err := rx.Progress(); err != nil {
				t.Fatal(err)
			}
		}
		return got, r.Status
	}
	if got, st := recvFrom(0); string(got) != "first..." || st.Source != 0 {
		t.Fatalf("receive from 0: %q from %d, want %q from 0", got, st.Source, "first...")
	}
	if u := rx.Counters()["unexpected_messages"]; u != 0 {
		t.Errorf("after the receive, %d unexpected messages, want 0: Extract went on past the message that took the last posted receive", u)
	}
	if got, st := recvFrom(adi.AnySource); string(got) != "second.." || st.Source != 0 {
		t.Errorf("ANY_SOURCE receive: %q from %d, want %q from 0 (the earlier message in the first sender's region)", got, st.Source, "second..")
	}
	if got, st := recvFrom(1); string(got) != "third..." || st.Source != 1 {
		t.Errorf("receive from 1: %q from %d, want %q from 1", got, st.Source, "third...")
	}
}
