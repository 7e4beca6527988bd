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

func wait(t *testing.T, d *Device, rs ...*adi.Request) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
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
		seq := d.Seq()
		if did, err := d.Progress(); err != nil {
			t.Fatal(err)
		} else if !did {
			d.Sleep(seq, time.Millisecond)
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
