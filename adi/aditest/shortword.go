package aditest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// ShortWords sends messages of 0, 3 and 8 bytes with SendShort from the
// first device of a fresh two-rank job into a receive posted on the second,
// as a ping-pong does, and checks that each arrives whole with its status
// and that every counter named in counts (on the sender with "tx:", on the
// receiver with "rx:") went up by exactly one: that the device took its
// word-sized path for each size, the empty message included.
func ShortWords(t *testing.T, newDev adi.Factory, counts ...string) {
	j := Start(t, newDev, 2, nil)
	devs := map[string]adi.Device{"tx": j.Devs[0], "rx": j.Devs[1]}
	tx, rx := j.Devs[0].(adi.ShortSender), j.Devs[1]
	read := func() []int64 {
		v := make([]int64, len(counts))
		for i, c := range counts {
			side, name, _ := strings.Cut(c, ":")
			v[i] = devs[side].Counters()[name]
		}
		return v
	}
	for _, n := range []int{0, 3, 8} {
		before := read()
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
		for i, after := range read() {
			if d := after - before[i]; d != 1 {
				t.Errorf("%d B: %s went up by %d, want 1: the message left the word-sized path", n, counts[i], d)
			}
		}
	}
}

// StopsAtLastReceive sends two small messages from rank 0 and one from
// rank 1 of a fresh three-rank job to rank 2 with SendShort, then receives
// them one by one: once a message takes the last posted receive, the
// device's Progress must leave the rest where it waits (the sender's next
// slot, whose line the sender fetches for writing, and the other senders'
// queues) for the next Progress, so that no message has been moved to the
// unexpected queue (counter unexpected_messages) and an ANY_SOURCE receive
// posted next takes the earlier message of the first sender.
func StopsAtLastReceive(t *testing.T, newDev adi.Factory) {
	j := Start(t, newDev, 3, nil)
	rx := j.Devs[2]
	sig := datatype.Byte.Signature()
	for _, s := range []struct {
		from int
		data string
	}{{0, "first..."}, {0, "second.."}, {1, "third..."}} {
		if !j.Devs[s.from].(adi.ShortSender).SendShort(7, 2, 3, sig, []byte(s.data)) {
			t.Fatalf("SendShort from %d refused a small message to an empty queue", s.from)
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
		t.Errorf("after the receive, %d unexpected messages, want 0: Progress went on past the message that took the last posted receive", u)
	}
	if got, st := recvFrom(adi.AnySource); string(got) != "second.." || st.Source != 0 {
		t.Errorf("ANY_SOURCE receive: %q from %d, want %q from 0 (the earlier message of the first sender)", got, st.Source, "second..")
	}
	if got, st := recvFrom(1); string(got) != "third..." || st.Source != 1 {
		t.Errorf("receive from 1: %q from %d, want %q from 1", got, st.Source, "third...")
	}
}
