package via

import (
	"bytes"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// kvs is a one-process key-value space.
type kvs map[string]string

func (k kvs) Put(key, v string) error { k[key] = v; return nil }
func (k kvs) Barrier() error          { return nil }
func (k kvs) Get(key string) (string, error) {
	return k[key], nil
}

// wait runs d's progress until every request is done.
func wait(t *testing.T, d *Device, rs ...*adi.Request) {
	t.Helper()
	progressUntil(t, []*Device{d}, rs...)
}

// progressUntil runs the progress of every device in ds, which may be
// ranks of one job in this process, until every request is done; a pass
// in which none did anything sleeps on the first one's doorbell.
func progressUntil(t *testing.T, ds []*Device, rs ...*adi.Request) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		done := true
		for _, r := range rs {
			done = done && r.Done()
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("requests did not complete")
		}
		seq, moved := ds[0].Seq(), false
		for _, d := range ds {
			did, err := d.Progress()
			if err != nil {
				t.Fatal(err)
			}
			moved = moved || did
		}
		if !moved {
			ds[0].Sleep(seq, time.Millisecond)
		}
	}
}

// TestSelfRendezvousAndRegCache sends large messages to itself — contiguous
// both ways (RDMA write), strided receive (RDMA read with a scatter list),
// strided both ways (bounce buffer) — and checks that a buffer used again
// hits the registration cache.
func TestSelfRendezvousAndRegCache(t *testing.T) {
	d := new(Device)
	if err := d.Init(adi.Config{Rank: 0, Size: 1, KVS: kvs{}, Options: map[string]string{"eager": "1024"}}); err != nil {
		t.Fatal(err)
	}
	defer d.Finalize()
	const n = 50000
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i*13 + 1)
	}
	vec, err := datatype.Vector(n, 1, 2, datatype.Byte)
	if err == nil {
		err = vec.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	strided := make([]byte, 2*n)
	for i := range strided {
		strided[i] = byte(i*13/2 + 1)
	}
	cases := []struct {
		name   string
		sb, rb func() adi.Buffer
		check  func(adi.Buffer) bool
	}{
		{"contiguous", func() adi.Buffer { return adi.Bytes(src) }, func() adi.Buffer { return adi.Bytes(make([]byte, n)) },
			func(b adi.Buffer) bool { return bytes.Equal(b.Mem, src) }},
		{"strided receive", func() adi.Buffer { return adi.Bytes(src) }, func() adi.Buffer { return adi.Buffer{Mem: make([]byte, 2*n), Count: 1, Type: vec} },
			func(b adi.Buffer) bool {
				for i := 0; i < n; i++ {
					if b.Mem[2*i] != src[i] || b.Mem[2*i+1] != 0 {
						return false
					}
				}
				return true
			}},
		{"strided both", func() adi.Buffer { return adi.Buffer{Mem: strided, Count: 1, Type: vec} }, func() adi.Buffer { return adi.Buffer{Mem: make([]byte, 2*n), Count: 1, Type: vec} },
			func(b adi.Buffer) bool {
				for i := 0; i < n; i++ {
					if b.Mem[2*i] != strided[2*i] {
						return false
					}
				}
				return true
			}},
	}
	for _, c := range cases {
		sb := c.sb()
		for round := 0; round < 3; round++ {
			rb := c.rb()
			r := &adi.Request{Op: adi.OpRecv, Peer: 0, Tag: 5, Buf: rb}
			s := &adi.Request{Op: adi.OpSend, Peer: 0, Tag: 5, Buf: sb}
			if err := d.Irecv(r); err != nil {
				t.Fatal(err)
			}
			if err := d.Isend(s); err != nil {
				t.Fatal(err)
			}
			wait(t, d, r, s)
			if r.Status.Err != nil || s.Status.Err != nil || r.Status.Bytes != n || !c.check(rb) {
				t.Fatalf("%s round %d: recv %+v send %+v", c.name, round, r.Status, s.Status)
			}
		}
	}
	c := d.Counters()
	// The send buffers are the same every round: after the first round of
	// each case they are found in the cache (the receive buffers are new).
	if c["regcache_hits"] < 6 || c["rendezvous_sends"] != 0 || c["rendezvous_receives"] != 0 || c["nic_rdma_reads"] == 0 || c["nic_rdma_writes"] == 0 {
		t.Fatalf("counters %v", c)
	}
}

// TestRendezvousStreamFewCredits keeps many rendezvous messages to itself
// in flight with 4 credits, so that RTSs and FINs wait for credits while
// the data of earlier messages moves through the data queue (postData):
// every message must arrive whole, in order, by RDMA write (contiguous
// receive) and by RDMA read (strided receive), some posted before their
// send and some after.
//
// Under rndv=read (the default) a contiguous receive buffer reads the
// contiguous send buffer (RTS, RDMA read, DONE: no CTS round trip, one
// credit each way); under rndv=write it answers CTS and the sender writes.
func TestRendezvousStreamFewCredits(t *testing.T) {
	for _, mode := range []string{"read", "write"} {
		t.Run("rndv="+mode, func(t *testing.T) { rendezvousStream(t, mode) })
	}
}

func rendezvousStream(t *testing.T, mode string) {
	d := new(Device)
	if err := d.Init(adi.Config{Rank: 0, Size: 1, KVS: kvs{}, Options: map[string]string{"eager": "1024", "credits": "4", "rndv": mode}}); err != nil {
		t.Fatal(err)
	}
	defer d.Finalize()
	const n, msgs = 40000, 24
	vec, err := datatype.Vector(n, 1, 2, datatype.Byte)
	if err == nil {
		err = vec.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	var reqs []*adi.Request
	recvs := make([]*adi.Request, msgs)
	srcs := make([][]byte, msgs)
	irecv := func(k int) {
		rb := adi.Bytes(make([]byte, n))
		if k%2 == 1 {
			rb = adi.Buffer{Mem: make([]byte, 2*n), Count: 1, Type: vec}
		}
		recvs[k] = &adi.Request{Op: adi.OpRecv, Peer: 0, Tag: 9, Buf: rb}
		if err := d.Irecv(recvs[k]); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, recvs[k])
	}
	for k := 0; k < msgs; k++ {
		if k < msgs/2 {
			irecv(k)
		}
		srcs[k] = make([]byte, n)
		for i := range srcs[k] {
			srcs[k][i] = byte(i*7 + k*31 + 1)
		}
		s := &adi.Request{Op: adi.OpSend, Peer: 0, Tag: 9, Buf: adi.Bytes(srcs[k])}
		if err := d.Isend(s); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, s)
	}
	for k := msgs / 2; k < msgs; k++ {
		irecv(k)
	}
	wait(t, d, reqs...)
	for k, r := range recvs {
		if r.Status.Err != nil || r.Status.Bytes != n {
			t.Fatalf("message %d: status %+v", k, r.Status)
		}
		for i := 0; i < n; i++ {
			got := r.Buf.Mem[i]
			if k%2 == 1 {
				got = r.Buf.Mem[2*i]
			}
			if got != srcs[k][i] {
				t.Fatalf("message %d byte %d: got %d, want %d", k, i, got, srcs[k][i])
			}
		}
	}
	for _, s := range reqs {
		if s.Status.Err != nil {
			t.Fatalf("send: %v", s.Status.Err)
		}
	}
	c := d.Counters()
	if c["backlogged_items"] == 0 || c["backlog"] != 0 || c["rendezvous_sends"] != 0 || c["rendezvous_receives"] != 0 {
		t.Fatalf("credits never ran short, or something stayed behind: %v", c)
	}
	// Half the receives are strided (always read); the contiguous half
	// follow the mode.
	wantReads, wantWrites := int64(msgs), int64(0)
	if mode == "write" {
		wantReads, wantWrites = msgs/2, msgs/2
	}
	if c["rendezvous_reads"] != wantReads || c["rendezvous_writes"] != wantWrites {
		t.Errorf("rndv=%s: %d reads and %d writes, want %d and %d", mode, c["rendezvous_reads"], c["rendezvous_writes"], wantReads, wantWrites)
	}
}
