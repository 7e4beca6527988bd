package netvm

import (
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/aditest"
	"github.com/adimpi/adimpi/datatype"
)

// TestSmallMessagesInline: a blocking send's small message (SendShort)
// into a posted receive, as pingpong runs them, takes the slot-to-receive
// path whatever its size up to a word, the empty message included
// (inline_receives counts it), and arrives whole. An empty message took
// the ring's staging copy and consume once, a longer path than 8 bytes'.
func TestSmallMessagesInline(t *testing.T) {
	aditest.ShortWords(t, func() adi.Device { return new(Device) }, "rx:inline_receives")
}

// TestDrainStopsAtLastPostedReceive: once an eager message takes the last
// posted receive, Progress leaves what else waits in the rings (the
// sender's next slot, whose line the sender fetches for writing, and the
// other senders' rings) for the next Progress, which then finds it in
// arrival order: an ANY_SOURCE receive posted next takes the message that
// waited in the first sender's ring, not one of a sender drained after
// it. Before, the first Progress drained every ring, reading the next slot
// on the waiter's way out.
func TestDrainStopsAtLastPostedReceive(t *testing.T) {
	j := aditest.Start(t, func() adi.Device { return new(Device) }, 3, nil)
	rx := j.Devs[2].(*Device)
	sig := datatype.Byte.Signature()
	for _, s := range []struct {
		from int
		data string
	}{{0, "first..."}, {0, "second.."}, {1, "third..."}} {
		if !j.Devs[s.from].(*Device).SendShort(7, 2, 3, sig, []byte(s.data)) {
			t.Fatalf("SendShort from %d refused an eager message to an empty ring", s.from)
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
		t.Errorf("after the receive, %d unexpected messages, want 0: the drain went on past the message that took the last posted receive", u)
	}
	if got, st := recvFrom(adi.AnySource); string(got) != "second.." || st.Source != 0 {
		t.Errorf("ANY_SOURCE receive: %q from %d, want %q from 0 (the earlier message in the first sender's ring)", got, st.Source, "second..")
	}
	if got, st := recvFrom(1); string(got) != "third..." || st.Source != 1 {
		t.Errorf("receive from 1: %q from %d, want %q from 1", got, st.Source, "third...")
	}
}
