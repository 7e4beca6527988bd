package bip

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/adi/aditest"
	"github.com/adimpi/adimpi/internal/pmi"
	"github.com/adimpi/adimpi/internal/wire"
)

// hostsDevice is the device told that rank r runs on host hostOf(r): ranks
// of one process then reach "other hosts" over the wire (on the loopback
// interface) and their own through shared memory, as across real hosts.
type hostsDevice struct {
	*Device
	hostOf func(r int) int
}

func (d *hostsDevice) Init(cfg adi.Config) error {
	cfg.Hosts = make([]int, cfg.Size)
	for r := range cfg.Hosts {
		cfg.Hosts[r] = d.hostOf(r)
	}
	return d.Device.Init(cfg)
}

func pretendHosts(hostOf func(r int) int) adi.Factory {
	return func() adi.Device { return &hostsDevice{Device: new(Device), hostOf: hostOf} }
}

// TestADIAcrossHosts runs the ADI contract suite with every rank on a host
// of its own (everything over the wire), and with two ranks of three on one
// host (shared memory and wire side by side), with BIP's defaults and with
// tiny queues, two long slots and no remote write (staging chunks across
// the wire).
func TestADIAcrossHosts(t *testing.T) {
	t.Setenv(wire.EnvAddr, "127.0.0.1")
	small := map[string]string{"queue": "4", "short": "256", "chunk": "1024", "maxlong": "2", "cma": "off"}
	for _, tc := range []struct {
		name   string
		hostOf func(int) int
		opts   map[string]string
	}{
		{"own-hosts", func(r int) int { return r }, nil},
		{"mixed", func(r int) int { return r % 2 }, nil},
		{"own-hosts-small", func(r int) int { return r }, small},
		{"mixed-small", func(r int) int { return r % 2 }, small},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aditest.Run(t, aditest.Config{Name: "bip", New: pretendHosts(tc.hostOf), Options: tc.opts})
		})
	}
}

// pipeJob wires up size BIP endpoints in this process through a PMI server
// over in-memory connections, rank r told that it runs on hosts[r].
func pipeJob(t *testing.T, hosts []int, o Options) []*Endpoint {
	t.Helper()
	size := len(hosts)
	srv := pmi.NewServer(size, "bip-net-"+t.Name())
	eps := make([]*Endpoint, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		a, b := net.Pipe()
		go srv.Serve(r, a)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pmi.NewClient(b, r, size)
			if err != nil {
				errs[r] = err
				return
			}
			eps[r], errs[r] = newEndpoint(r, size, c, o, hosts)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, e := range eps {
			wg.Add(1)
			go func() { defer wg.Done(); e.Close() }()
		}
		wg.Wait()
	})
	return eps
}

// BIP's own interface between hosts: short messages beyond a full queue
// wait for the receiver to return slots over the wire, and a long message
// lands in the posted buffer, through frames referencing the sender's
// buffer (cma=auto) or through the staging chunks (cma=off).
func TestEndpointAcrossHosts(t *testing.T) {
	t.Setenv(wire.EnvAddr, "127.0.0.1")
	for _, cma := range []bool{true, false} {
		t.Run(fmt.Sprintf("cma=%v", cma), func(t *testing.T) {
			o := DefaultOptions
			o.Queue, o.Chunk, o.CMA = 4, 4096, cma
			eps := pipeJob(t, []int{0, 1}, o)
			if !eps[0].Remote(1) || !eps[1].Remote(0) || eps[0].Remote(0) {
				t.Fatal("the ranks do not see each other on another host")
			}
			const shorts = 40
			long := make([]byte, 1<<20+3)
			for i := range long {
				long[i] = byte(i*7 + i>>12)
			}
			full := make(chan struct{})
			errc := make(chan error, 2)
			go func() {
				e := eps[0]
				i := 0
				for ; ; i++ { // fill the queue without blocking
					ok, err := e.TrySend(1, uint32(i), 3000, func(b []byte) { b[0], b[2999] = byte(i), byte(i) })
					if err != nil {
						errc <- err
						return
					}
					if !ok {
						break
					}
				}
				close(full)
				for ; i < shorts; i++ {
					msg := make([]byte, 1+i)
					msg[0] = byte(i)
					if err := e.SendShort(1, uint32(i), msg); err != nil {
						errc <- err
						return
					}
				}
				errc <- e.SendLong(1, 99, long)
			}()
			go func() {
				e := eps[1]
				<-full
				buf := make([]byte, 4096)
				for i := range shorts {
					from, tag, n, err := e.RecvShort(0, buf)
					if err != nil || from != 0 || tag != uint32(i) || buf[0] != byte(i) || (n != 3000 && n != 1+i) {
						errc <- fmt.Errorf("short message %d: from %d tag %d, %d bytes starting %d, err %v", i, from, tag, n, buf[0], err)
						return
					}
				}
				got := make([]byte, len(long)+10)
				n, err := e.RecvLong(0, 99, got)
				if err == nil && (n != len(long) || !bytes.Equal(got[:n], long)) {
					err = fmt.Errorf("long message: %d bytes, want %d, data equal %v", n, len(long), bytes.Equal(got[:n], long))
				}
				errc <- err
			}()
			for range 2 {
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			}
			s, r := eps[0].Stats, eps[1].Stats
			if s.QueueFull == 0 || s.ShortSent != shorts || r.ShortRecv != shorts || r.LongRecv != 1 {
				t.Errorf("sender %+v, receiver %+v: want a full queue met, %d short messages and one long", s, r, shorts)
			}
			if cma && s.RemoteWrites == 0 || !cma && s.Chunks == 0 {
				t.Errorf("sender %+v: the long message did not take the %s path", s, map[bool]string{true: "frame", false: "chunk"}[cma])
			}
			if c := eps[0].net.ep.Counters(); c.FramesOut == 0 {
				t.Errorf("wire counters %+v: nothing went over the wire", c)
			}
		})
	}
}

// A send that the device reports complete has left the process: the
// receiver gets it although the sender never calls Progress again (as in
// MPI_Finalize's PMI barrier). The first message to a peer waits in the
// endpoint while the connection opens, which made an eager send look
// complete before its frame had gone anywhere.
func TestCompleteSendHasLeft(t *testing.T) {
	t.Setenv(wire.EnvAddr, "127.0.0.1")
	for _, n := range []int{8, 2000, 300 << 10} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			j := aditest.Start(t, pretendHosts(func(r int) int { return r }), 2, nil)
			msg := bytes.Repeat([]byte{7}, n)
			send := &adi.Request{Op: adi.OpSend, Context: 1, Peer: 1, Tag: 3, Buf: adi.Bytes(msg)}
			got := make([]byte, n)
			recv := &adi.Request{Op: adi.OpRecv, Context: 1, Peer: 0, Tag: 3, Buf: adi.Bytes(got)}
			errc := make(chan error, 2)
			go func() {
				d := j.Devs[0]
				if err := d.Isend(send); err != nil {
					errc <- err
					return
				}
				errc <- pollUntil(d, send.Done)
				// Rank 0 calls its device no more.
			}()
			go func() {
				d := j.Devs[1]
				if err := d.Irecv(recv); err != nil {
					errc <- err
					return
				}
				errc <- pollUntil(d, recv.Done)
			}()
			for range 2 {
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			}
			if recv.Status.Err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("receive: %+v, data equal %v", recv.Status, bytes.Equal(got, msg))
			}
		})
	}
}

// pollUntil drives d until done holds, for at most 10 s.
func pollUntil(d adi.Device, done func() bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after 10 s")
		}
		if _, err := d.Progress(); err != nil {
			return err
		}
	}
	return nil
}

// The device's counters show the network's traffic, and a long message to
// a contiguous buffer is read straight into it (Placer).
func TestWireCounters(t *testing.T) {
	t.Setenv(wire.EnvAddr, "127.0.0.1")
	j := aditest.Start(t, pretendHosts(func(r int) int { return r }), 2, nil)
	msg := bytes.Repeat([]byte{9}, 1<<20)
	got := make([]byte, len(msg))
	send := &adi.Request{Op: adi.OpSend, Context: 1, Peer: 1, Tag: 3, Buf: adi.Bytes(msg)}
	recv := &adi.Request{Op: adi.OpRecv, Context: 1, Peer: 0, Tag: 3, Buf: adi.Bytes(got)}
	errc := make(chan error, 2)
	go func() {
		errc <- firstErr(j.Devs[0].Isend(send), func() error { return pollUntil(j.Devs[0], send.Done) })
	}()
	go func() {
		errc <- firstErr(j.Devs[1].Irecv(recv), func() error { return pollUntil(j.Devs[1], recv.Done) })
	}()
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("the long message arrived wrong")
	}
	s, r := j.Devs[0].Counters(), j.Devs[1].Counters()
	if s["wire_bytes_out"] < int64(len(msg)) || r["wire_bytes_in"] < int64(len(msg)) || r["wire_placed"] == 0 || s["bip_long_sent"] != 1 {
		t.Errorf("sender %v\nreceiver %v: want the message's bytes over the wire, placed", s, r)
	}
}

func firstErr(err error, then func() error) error {
	if err != nil {
		return err
	}
	return then()
}

// A short message from another host completes its posted receive in the
// Progress that reads its frame: the device looks at its queues again once
// the network has placed one there, instead of finding it a whole poll
// later (a poll of the network on every small message's path).
func TestShortFromNetSamePass(t *testing.T) {
	t.Setenv(wire.EnvAddr, "127.0.0.1")
	j := aditest.Start(t, pretendHosts(func(r int) int { return r }), 2, nil)
	msg := []byte("8 bytes!")
	got := make([]byte, len(msg))
	send := &adi.Request{Op: adi.OpSend, Context: 1, Peer: 1, Tag: 3, Buf: adi.Bytes(msg)}
	recv := &adi.Request{Op: adi.OpRecv, Context: 1, Peer: 0, Tag: 3, Buf: adi.Bytes(got)}
	d := j.Devs[1]
	if err := d.Irecv(recv); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		errc <- firstErr(j.Devs[0].Isend(send), func() error { return pollUntil(j.Devs[0], send.Done) })
	}()
	deadline := time.Now().Add(10 * time.Second)
	framesIn := d.Counters()["wire_frames_in"]
	for !recv.Done() {
		if time.Now().After(deadline) {
			t.Fatal("the receive is not done after 10 s")
		}
		if _, err := d.Progress(); err != nil {
			t.Fatal(err)
		}
		now := d.Counters()["wire_frames_in"]
		if recv.Done() && now == framesIn {
			t.Fatalf("the receive completed in a Progress that read no frame (frames in %d): its frame was read by an earlier one", now)
		}
		framesIn = now
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if recv.Status.Err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("receive: %+v, got %q", recv.Status, got)
	}
}

// Short messages both ways between hosts return each other's queue slots:
// each carries its sender's count of the messages it consumed, so a
// ping-pong of many queues' worth sends no fCredit frame (it sent one
// every half queue, a kick of its own on the path of every such message).
func TestShortCreditsRide(t *testing.T) {
	t.Setenv(wire.EnvAddr, "127.0.0.1")
	o := DefaultOptions
	o.Queue = 4
	eps := pipeJob(t, []int{0, 1}, o)
	const rounds = 40
	errc := make(chan error, 2)
	for r := range 2 {
		go func() {
			e, peer := eps[r], 1-r
			buf := make([]byte, 16)
			for i := range rounds {
				if r == 0 {
					if err := e.SendShort(peer, uint32(i), []byte{byte(i)}); err != nil {
						errc <- err
						return
					}
				}
				from, tag, n, err := e.RecvShort(peer, buf)
				if err != nil || from != peer || tag != uint32(i) || n != 1 || buf[0] != byte(i) {
					errc <- fmt.Errorf("rank %d, message %d: from %d tag %d, %d bytes starting %d, err %v", r, i, from, tag, n, buf[0], err)
					return
				}
				if r == 1 {
					if err := e.SendShort(peer, uint32(i), []byte{byte(i)}); err != nil {
						errc <- err
						return
					}
				}
			}
			errc <- nil
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for r, e := range eps {
		if c := e.net.ep.Counters(); c.FramesOut != rounds || e.Stats.QueueFull != 0 {
			t.Errorf("rank %d sent %d frames for %d short messages (queue full %d times): want no credit frames", r, c.FramesOut, rounds, e.Stats.QueueFull)
		}
	}
}

// The MPI device takes a short message from another host as its frame
// arrives, when nothing of its sender's waits in the queue: it reaches its
// receive without being written into the queue's slot and read back (the
// slots of the sender's block stay as they were), in order, and the
// endpoint counts it consumed.
func TestShortFromNetStraight(t *testing.T) {
	t.Setenv(wire.EnvAddr, "127.0.0.1")
	j := aditest.Start(t, pretendHosts(func(r int) int { return r }), 2, nil)
	const n = 5
	d := j.Devs[1]
	got := make([][]byte, n)
	recvs := make([]*adi.Request, n)
	for i := range n {
		got[i] = make([]byte, 8)
		recvs[i] = &adi.Request{Op: adi.OpRecv, Context: 1, Peer: 0, Tag: 3, Buf: adi.Bytes(got[i])}
		if err := d.Irecv(recvs[i]); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, 1)
	go func() {
		s := j.Devs[0]
		for i := range n {
			msg := []byte(fmt.Sprintf("msg %d!!!", i))
			send := &adi.Request{Op: adi.OpSend, Context: 1, Peer: 1, Tag: 3, Buf: adi.Bytes(msg)}
			if err := firstErr(s.Isend(send), func() error { return pollUntil(s, send.Done) }); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	if err := pollUntil(d, recvs[n-1].Done); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for i, r := range recvs {
		if !r.Done() || r.Status.Err != nil || string(got[i]) != fmt.Sprintf("msg %d!!!", i) {
			t.Fatalf("receive %d: done %v, %+v, got %q", i, r.Done(), r.Status, got[i])
		}
	}
	e := d.(*hostsDevice).ep
	p := e.peers[0]
	if p.head != n || p.net.arrived != n || e.Stats.ShortRecv != n {
		t.Errorf("head %d, arrived %d, received %d: want %d each", p.head, p.net.arrived, e.Stats.ShortRecv, n)
	}
	for k := range e.opt.Queue {
		if s := p.in[e.offQueue+k*e.slotBytes:][:e.slotBytes]; qSeq.Load(s) != 0 {
			t.Fatalf("slot %d of rank 0's block was written (sequence %d)", k, qSeq.Load(s))
		}
	}
}
