package via

import (
	"bytes"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/wire"
)

// TestDrainedWhileResolving: the first send to a peer on another host makes
// the NIC ask where the peer is (in a job, the process manager, which
// MPI_Finalize's barrier holds). Until that send's frames are on the
// network Drained must say no, or Finalize would enter the barrier while
// the NIC still waits for the answer, and the job would hang.
func TestDrainedWhileResolving(t *testing.T) {
	asked := make(chan struct{})
	release := make(chan struct{})
	nics := make([]*NIC, 2)
	eps := make([]*wire.Endpoint, 2)
	for r := range nics {
		n, err := OpenNIC(DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		resolve := func(p int) (string, error) { return eps[p].Addr(), nil }
		if r == 0 {
			first := true
			resolve = func(p int) (string, error) {
				if first {
					first = false
					close(asked)
					<-release
				}
				return eps[p].Addr(), nil
			}
		}
		ep, err := wire.Open(wire.Config{Rank: r, Job: 7, Secret: bytes.Repeat([]byte{9}, 32), Listen: "127.0.0.1:0",
			Handler: n.WireHandler(), Logf: t.Logf, Resolve: resolve})
		if err != nil {
			t.Fatal(err)
		}
		nics[r], eps[r] = n, ep
	}
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	var vis [2]*VI
	var cqs [2]*CQ
	for r, n := range nics {
		n.UseWire(eps[r])
		cq, err := n.CreateCQ()
		if err != nil {
			t.Fatal(err)
		}
		vi, err := n.CreateVI(cq, cq)
		if err != nil {
			t.Fatal(err)
		}
		vis[r], cqs[r] = vi, cq
	}
	na, a, b := nics[0], vis[0], vis[1]
	connectPair(t, a, b)

	src, dst := []byte("last msg"), make([]byte, 8)
	hs, hd := reg(t, na, src), reg(t, nics[1], dst)
	if err := b.PostRecv(&Descriptor{DS: []DataSegment{Seg(hd, dst)}}); err != nil {
		t.Fatal(err)
	}
	if !na.Drained() {
		t.Fatal("Drained false before anything was posted")
	}
	// PostSend may carry the send out itself (the doorbell of an idle NIC)
	// or leave it to the engine: either way one of them asks for the
	// peer's address and waits for it.
	posted := make(chan error, 1)
	go func() { posted <- a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(hs, src)}}) }()
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the NIC never asked where the peer is")
	}
	for i := 0; i < 100; i++ {
		if na.Drained() {
			t.Fatalf("Drained true (check %d) while the send waits for the peer's address", i)
		}
	}
	close(release)
	released = true
	if err := <-posted; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !na.Drained() {
		if time.Now().After(deadline) {
			t.Fatal("Drained still false 10 s after the peer's address came")
		}
		na.Help()
		time.Sleep(time.Millisecond)
	}
	cqWait(t, cqs[1], b, true)
	if !bytes.Equal(dst, src) {
		t.Fatalf("received %q, want %q", dst, src)
	}
}
