package fm

import (
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
	aditest.ShortWords(t, func() adi.Device { return new(Device) }, "tx:short_sends", "rx:short_receives")
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
