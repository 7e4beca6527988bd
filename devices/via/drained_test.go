package via

import (
	"bytes"
	"testing"
	"time"
)

// TestDrainedWhileResolving: the first send to a peer on another host makes
// the NIC ask where the peer is (in a job, the process manager, which
// MPI_Finalize's barrier holds). Until that send's frames are on the
// network Drained must say no, or Finalize would enter the barrier while
// the NIC still waits for the answer, and the job would hang.
func TestDrainedWhileResolving(t *testing.T) {
	asked := make(chan struct{})
	release := make(chan struct{})
	// Rank 0's first look-up waits for release.
	first := true
	na, nb, a, b, _, cb := hostPairResolving(t, DefaultOptions(), func(r int, lookup func(int) (string, error)) func(int) (string, error) {
		if r != 0 {
			return lookup
		}
		return func(p int) (string, error) {
			if first {
				first = false
				close(asked)
				<-release
			}
			return lookup(p)
		}
	})
	released := false
	t.Cleanup(func() { // before the NICs close, which waits for their engines
		if !released {
			close(release)
		}
	})
	connectPair(t, a, b)

	src, dst := []byte("last msg"), make([]byte, 8)
	hs, hd := reg(t, na, src), reg(t, nb, dst)
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
	cqWait(t, cb, b, true)
	if !bytes.Equal(dst, src) {
		t.Fatalf("received %q, want %q", dst, src)
	}
}
