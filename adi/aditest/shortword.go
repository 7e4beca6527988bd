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
