package interjob

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
)

// pair opens two Nets of two one-process jobs, A and B, that know each
// other: each is the other's number 1.
func pair(t *testing.T) (a, b *Net, wake chan struct{}) {
	t.Helper()
	wake = make(chan struct{}, 16)
	ring := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	var err error
	if a, err = Open(Identity{Job: "A", Rank: 0}, 1, lo, ring); err != nil {
		t.Fatal(err)
	}
	if b, err = Open(Identity{Job: "B", Rank: 0}, 1, lo, ring); err != nil {
		t.Fatal(err)
	}
	if i := a.Learn(b.Self()); i != 1 {
		t.Fatalf("A numbers B %d, want 1", i)
	}
	if i := b.Learn(a.Self()); i != 1 {
		t.Fatalf("B numbers A %d, want 1", i)
	}
	return a, b, wake
}

// until progresses both Nets until cond holds, waiting for the doorbell
// between passes; it fails t after 10 s.
func until(t *testing.T, wake chan struct{}, cond func() bool, nets ...*Net) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		for _, n := range nets {
			n.Progress()
		}
		if cond() {
			return
		}
		select {
		case <-wake:
		case <-time.After(time.Millisecond): // completions queued by the calls themselves
		case <-deadline:
			t.Fatal("condition not reached in 10 s")
		}
	}
}

func TestSendRecv(t *testing.T) {
	a, b, wake := pair(t)
	defer a.Close()
	defer b.Close()
	msg := []byte("hello from A")
	s := &adi.Request{Op: adi.OpSend, Context: 4, Peer: 1, Tag: 7, Buf: adi.Bytes(msg)}
	if err := a.Isend(s); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	r := &adi.Request{Op: adi.OpRecv, Context: 4, Peer: adi.AnySource, Tag: adi.AnyTag, Buf: adi.Bytes(buf)}
	if err := b.Irecv(r); err != nil {
		t.Fatal(err)
	}
	until(t, wake, func() bool { return s.Done() && r.Done() }, a, b)
	if r.Status.Err != nil || r.Status.Source != 1 || r.Status.Tag != 7 || string(buf[:r.Status.Bytes]) != string(msg) {
		t.Fatalf("received %+v %q", r.Status, buf[:r.Status.Bytes])
	}
}

// TestSyncSend: a synchronous send completes only once its message has
// matched a receive.
func TestSyncSend(t *testing.T) {
	a, b, wake := pair(t)
	defer a.Close()
	defer b.Close()
	s := &adi.Request{Op: adi.OpSend, Mode: adi.ModeSync, Context: 2, Peer: 1, Tag: 1, Buf: adi.Bytes([]byte{1, 2, 3})}
	if err := a.Isend(s); err != nil {
		t.Fatal(err)
	}
	// The message arrives at B and waits there, unexpected.
	until(t, wake, func() bool { _, ok, _ := b.Iprobe(2, 1, 1); return ok }, a, b)
	a.Progress()
	if s.Done() {
		t.Fatal("a synchronous send completed before its receive was posted")
	}
	r := &adi.Request{Op: adi.OpRecv, Context: 2, Peer: 1, Tag: 1, Buf: adi.Bytes(make([]byte, 3))}
	if err := b.Irecv(r); err != nil {
		t.Fatal(err)
	}
	until(t, wake, func() bool { return s.Done() && r.Done() }, a, b)
	if s.Status.Err != nil || r.Status.Err != nil {
		t.Fatalf("send %v, receive %v", s.Status.Err, r.Status.Err)
	}
}

// TestPeerGone: a receive from a process that closes its Net fails,
// naming it, instead of waiting for ever.
func TestPeerGone(t *testing.T) {
	a, b, wake := pair(t)
	defer a.Close()
	// B must have sent something for A to hear its goodbye.
	s := &adi.Request{Op: adi.OpSend, Context: 2, Peer: 1, Tag: 1, Buf: adi.Bytes(nil)}
	if err := b.Isend(s); err != nil {
		t.Fatal(err)
	}
	first := &adi.Request{Op: adi.OpRecv, Context: 2, Peer: 1, Tag: 1, Buf: adi.Bytes(nil)}
	a.Irecv(first)
	until(t, wake, first.Done, a, b)
	r := &adi.Request{Op: adi.OpRecv, Context: 2, Peer: 1, Tag: 2, Buf: adi.Bytes(nil)}
	a.Irecv(r)
	b.Close()
	until(t, wake, r.Done, a)
	if r.Status.Err == nil || !strings.Contains(r.Status.Err.Error(), "B#0") {
		t.Fatalf("receive from a closed peer: %v", r.Status.Err)
	}
}

// TestRefusesWrongToken: a connection whose greeting lacks the listener's
// token delivers nothing.
func TestRefusesWrongToken(t *testing.T) {
	a, b, wake := pair(t)
	defer a.Close()
	defer b.Close()
	c, err := net.Dial("tcp4", b.Self().Addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "%s %s %s %d\n", greeting, strings.Repeat("0", 32), "A", 0)
	frame := make([]byte, hdrLen)
	frame[0] = kindMsg
	c.Write(frame)
	c.Close()
	// A real message after the forged one is the only one B sees.
	s := &adi.Request{Op: adi.OpSend, Context: 0, Peer: 1, Tag: 9, Buf: adi.Bytes([]byte("x"))}
	a.Isend(s)
	until(t, wake, func() bool { _, ok, _ := b.Iprobe(0, adi.AnySource, 9); return ok }, a, b)
	if _, ok, _ := b.Iprobe(0, adi.AnySource, 0); ok {
		t.Fatal("B took a frame from a connection without its token")
	}
}
