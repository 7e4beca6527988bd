package fm

import (
	"bytes"
	"testing"

	"github.com/adimpi/adimpi/adi"
)

// TestBulkUnfreed checks the bookkeeping by which a sender's idle Progress
// yields the CPU while its data still waits in the receiver's bulk lane: a
// rendezvous send is complete once its chunks are in the lane, but until
// the receiver has copied them out the lane counts as waiting on it; once
// it has, the sender forgets it (and polls idle again).
func TestBulkUnfreed(t *testing.T) {
	d := new(Device)
	if err := d.Init(adi.Config{Rank: 0, Size: 1, KVS: memKVS{}, Options: map[string]string{"rndv": "1000", "bulk": "4096", "bslots": "2"}}); err != nil {
		t.Fatal(err)
	}
	defer d.Finalize()
	src := bytes.Repeat([]byte("unfreed!"), 500) // 4000 bytes: one chunk
	dst := make([]byte, len(src))
	rq := &adi.Request{Op: adi.OpRecv, Context: 7, Peer: 0, Tag: 1, Buf: adi.Bytes(dst)}
	sq := &adi.Request{Op: adi.OpSend, Context: 7, Peer: 0, Tag: 1, Buf: adi.Bytes(src)}
	if err := d.Irecv(rq); err != nil {
		t.Fatal(err)
	}
	if err := d.Isend(sq); err != nil {
		t.Fatal(err)
	}
	for i := 0; !sq.Done(); i++ {
		if _, err := d.Progress(); err != nil {
			t.Fatal(err)
		}
		if i > 1e5 {
			t.Fatal("the send did not complete")
		}
	}
	if rq.Done() {
		t.Fatal("the receive completed in the pass that wrote its chunk: the test cannot see the chunk waiting")
	}
	if !d.unfreed() {
		t.Fatal("the send's chunk is in the lane, not copied out, but the sender does not count it as waiting on the receiver")
	}
	for i := 0; !rq.Done(); i++ {
		if _, err := d.Progress(); err != nil {
			t.Fatal(err)
		}
		if i > 1e5 {
			t.Fatal("the receive did not complete")
		}
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("received data differ from those sent")
	}
	if d.unfreed() || len(d.bUnfreed) != 0 {
		t.Fatalf("the receiver copied every chunk out, but the sender still counts %v as waiting", d.bUnfreed)
	}
}
