package via

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/wire"
)

// hostPair opens two NICs as if on two hosts: each has a wire endpoint on
// loopback, and one VI of each is connected to the other's with
// ConnectRemote, each VI's queues reporting to a CQ of its NIC.
func hostPair(t *testing.T, o Options) (na, nb *NIC, a, b *VI, ca, cb *CQ) {
	na, nb, a, b, ca, cb = hostPairUnconnected(t, o)
	connectPair(t, a, b)
	return
}

// connectPair connects a (rank 0) and b (rank 1) to each other.
func connectPair(t *testing.T, a, b *VI) {
	t.Helper()
	if err := a.ConnectRemote(1, b.ID(), "rank 1 on host h2"); err != nil {
		t.Fatal(err)
	}
	if err := b.ConnectRemote(0, a.ID(), "rank 0 on host h1"); err != nil {
		t.Fatal(err)
	}
}

// hostPairUnconnected is hostPair without the connection.
func hostPairUnconnected(t *testing.T, o Options) (na, nb *NIC, a, b *VI, ca, cb *CQ) {
	t.Helper()
	return hostPairResolving(t, o, nil)
}

// resolver is how rank r's endpoint learns a peer's address, given the
// plain look-up (hostPairResolving).
type resolver func(r int, lookup func(p int) (string, error)) func(p int) (string, error)

// hostPairResolving is hostPairUnconnected with each rank's address
// look-up made by wrap (nil: the plain one).
func hostPairResolving(t *testing.T, o Options, wrap resolver) (na, nb *NIC, a, b *VI, ca, cb *CQ) {
	t.Helper()
	nics := make([]*NIC, 2)
	eps := make([]*wire.Endpoint, 2)
	lookup := func(p int) (string, error) { return eps[p].Addr(), nil }
	for r := range nics {
		n, err := OpenNIC(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		resolve := lookup
		if wrap != nil {
			resolve = wrap(r, lookup)
		}
		ep, err := wire.Open(wire.Config{Rank: r, Job: 7, Secret: bytes.Repeat([]byte{9}, 32), Listen: "127.0.0.1:0",
			Handler: n.WireHandler(), Logf: t.Logf, Resolve: resolve})
		if err != nil {
			t.Fatal(err)
		}
		nics[r], eps[r] = n, ep
	}
	for r, n := range nics {
		n.UseWire(eps[r])
	}
	var vis [2]*VI
	var cqs [2]*CQ
	for r, n := range nics {
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
	return nics[0], nics[1], vis[0], vis[1], cqs[0], cqs[1]
}

// cqWait waits for the next completion of cq and checks it is vi's queue.
func cqWait(t *testing.T, cq *CQ, vi *VI, recv bool) *Descriptor {
	t.Helper()
	got, r, err := cq.Wait(10 * time.Second)
	if err != nil {
		t.Fatalf("CQ wait (want vi %d recv=%v): %v", vi.ID(), recv, err)
	}
	if got != vi || r != recv {
		t.Fatalf("CQ reported vi %d recv=%v, want vi %d recv=%v", got.ID(), r, vi.ID(), recv)
	}
	if recv {
		return vi.RecvDone()
	}
	return vi.SendDone()
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed)
	}
	return b
}

// TestNetVI checks a VI pair across hosts in every doorbell and CQ design
// (and the other translation and descriptor designs): sends with immediate
// data from a gather list into a scatter list, a send that arrives before
// its receive descriptor, RDMA writes and reads of a MiB, and the errors
// that complete descriptors on both sides: a bad memory handle, a range
// outside the region, a send longer than the receive descriptor.
func TestNetVI(t *testing.T) {
	designs := map[string]map[string]string{
		"d1-cq1":          {},
		"d2-cq2":          {"doorbell": "d2", "cq": "cq2"},
		"d1-cq2-at1":      {"cq": "cq2", "at": "at1"},
		"d2-cq1-at2-nodc": {"doorbell": "d2", "at": "at2", "desccache": "off"},
	}
	for name, kv := range designs {
		t.Run(name, func(t *testing.T) {
			o, _, err := ParseOptions(DefaultOptions(), kv)
			if err != nil {
				t.Fatal(err)
			}
			na, nb, a, b, ca, cb := hostPair(t, o)
			netVICases(t, na, nb, a, b, ca, cb)
			if c := nb.Counters(); c["wire_frames_in"] == 0 || c["wire_held_frames"] == 0 {
				t.Errorf("counters %v: want frames received and one held", c)
			}
		})
	}
}

func netVICases(t *testing.T, na, nb *NIC, a, b *VI, ca, cb *CQ) {
	const big = 1<<20 + 3
	src := pattern(big, 1)
	dst := make([]byte, big+100)
	hs, hd := reg(t, na, src), reg(t, nb, dst)

	// A send of a gather list (three pieces) into a scatter list (two).
	rd := &Descriptor{DS: []DataSegment{Seg(hd, dst[:10]), Seg(hd, dst[5000:5000+40000])}}
	if err := b.PostRecv(rd); err != nil {
		t.Fatal(err)
	}
	sd := &Descriptor{Control: OpSend | FlagImmediate, Imm: 77, DS: []DataSegment{Seg(hs, src[:3]), Seg(hs, src[100:20100]), Seg(hs, src[30000:30007])}}
	if err := a.PostSend(sd); err != nil {
		t.Fatal(err)
	}
	if d := cqWait(t, cb, b, true); d != rd || d.Err() != nil || d.Length != 20010 || d.Imm != 77 {
		t.Fatalf("receive: %v, err %v, length %d, imm %d", d == rd, d.Err(), d.Length, d.Imm)
	}
	want := append(append(append([]byte(nil), src[:3]...), src[100:20100]...), src[30000:30007]...)
	got := append(append([]byte(nil), dst[:10]...), dst[5000:5000+20000]...)
	if !bytes.Equal(got, want) {
		t.Fatal("send: the data differ")
	}
	if d := cqWait(t, ca, a, false); d != sd || d.Err() != nil {
		t.Fatalf("send completion: %v", d.Err())
	}

	// A send before its receive descriptor waits at the target NIC.
	sd = &Descriptor{Control: OpSend, DS: []DataSegment{Seg(hs, src[:500])}}
	if err := a.PostSend(sd); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // let it arrive first (either order is correct)
	rd = &Descriptor{DS: []DataSegment{Seg(hd, dst[:1000])}}
	if err := b.PostRecv(rd); err != nil {
		t.Fatal(err)
	}
	if d := cqWait(t, cb, b, true); d.Err() != nil || d.Length != 500 || !bytes.Equal(dst[:500], src[:500]) {
		t.Fatalf("late receive: %v, length %d", d.Err(), d.Length)
	}
	cqWait(t, ca, a, false)

	// RDMA write of a MiB, then read it back into another buffer.
	clear(dst)
	wd := &Descriptor{Control: OpRDMAWrite, RemoteHandle: hd, RemoteAddr: Addr(dst[50:]), DS: []DataSegment{Seg(hs, src)}}
	if err := a.PostSend(wd); err != nil {
		t.Fatal(err)
	}
	if d := cqWait(t, ca, a, false); d.Err() != nil {
		t.Fatalf("RDMA write: %v", d.Err())
	}
	if !bytes.Equal(dst[50:50+big], src) || dst[49] != 0 || dst[50+big] != 0 {
		t.Fatal("RDMA write: the target's memory differs")
	}
	back := make([]byte, big)
	hb := reg(t, na, back)
	rdd := &Descriptor{Control: OpRDMARead, RemoteHandle: hd, RemoteAddr: Addr(dst[50:]), DS: []DataSegment{Seg(hb, back[:1000]), Seg(hb, back[1000:])}}
	if err := a.PostSend(rdd); err != nil {
		t.Fatal(err)
	}
	if d := cqWait(t, ca, a, false); d.Err() != nil || d.Length != big || !bytes.Equal(back, src) {
		t.Fatalf("RDMA read: %v, length %d, equal %v", d.Err(), d.Length, bytes.Equal(back, src))
	}

	// Errors: a handle the target does not have, a range past the region
	// (write and read), a send longer than the receive descriptor (both
	// sides complete with a length error).
	for _, c := range []struct {
		name string
		d    *Descriptor
	}{
		{"bad handle", &Descriptor{Control: OpRDMAWrite, RemoteHandle: 999, RemoteAddr: Addr(dst), DS: []DataSegment{Seg(hs, src[:8])}}},
		{"out of bounds", &Descriptor{Control: OpRDMAWrite, RemoteHandle: hd, RemoteAddr: Addr(dst[len(dst)-4:]), DS: []DataSegment{Seg(hs, src[:8])}}},
		{"read out of bounds", &Descriptor{Control: OpRDMARead, RemoteHandle: hd, RemoteAddr: Addr(dst[len(dst)-4:]), DS: []DataSegment{Seg(hb, back[:8])}}},
	} {
		if err := a.PostSend(c.d); err != nil {
			t.Fatal(err)
		}
		if d := cqWait(t, ca, a, false); d.Status&StatusProtectionError == 0 {
			t.Errorf("%s: status %#x, want a protection error", c.name, d.Status)
		}
	}
	rd = &Descriptor{DS: []DataSegment{Seg(hd, dst[:10])}}
	if err := b.PostRecv(rd); err != nil {
		t.Fatal(err)
	}
	if err := a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(hs, src[:11])}}); err != nil {
		t.Fatal(err)
	}
	if d := cqWait(t, cb, b, true); d.Status&StatusLengthError == 0 {
		t.Errorf("receive of a longer send: status %#x, want a length error", d.Status)
	}
	if d := cqWait(t, ca, a, false); d.Status&StatusLengthError == 0 {
		t.Errorf("send longer than the receive: status %#x, want a length error", d.Status)
	}
}

// TestNetEarlyFrames: a NIC whose peer connected and sent before it
// connected its own VI keeps the frames until it does (MPI's Init connects
// the ranks one after the other, so a fast peer sends at once).
func TestNetEarlyFrames(t *testing.T) {
	na, nb, a, b, _, cb := hostPairUnconnected(t, DefaultOptions())
	if err := a.ConnectRemote(1, b.ID(), "rank 1 on host h2"); err != nil {
		t.Fatal(err)
	}
	src, dst := pattern(100, 3), make([]byte, 100)
	hs, hd := reg(t, na, src), reg(t, nb, dst)
	if err := b.PostRecv(&Descriptor{DS: []DataSegment{Seg(hd, dst)}}); err != nil {
		t.Fatal(err)
	}
	if err := a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(hs, src)}}); err != nil {
		t.Fatal(err)
	}
	for nb.Counters()["wire_frames_in"] == 0 {
		time.Sleep(time.Millisecond) // the frame is to arrive before the connection
	}
	if err := b.ConnectRemote(0, a.ID(), "rank 0 on host h1"); err != nil {
		t.Fatal(err)
	}
	if d := cqWait(t, cb, b, true); d.Err() != nil || !bytes.Equal(dst, src) {
		t.Fatalf("receive: %v, data equal %v", d.Err(), bytes.Equal(dst, src))
	}
}

// TestNetRepostRace: under cq=cq2 the application sees a receive complete
// as soon as its status is written and may repost it at once, into the
// slot the NIC is just leaving (the receive queue is full); the NIC must
// not lose that posting. Thousands of messages through a 2-deep queue.
func TestNetRepostRace(t *testing.T) {
	o := DefaultOptions()
	o.CQ, o.RecvQueue = CQ2, 2
	na, nb, a, b, _, cb := hostPair(t, o)
	const msgs = 20000
	src, dst := make([]byte, 8), make([]byte, 8*o.RecvQueue)
	hs, hd := reg(t, na, src), reg(t, nb, dst)
	for k := 0; k < o.RecvQueue; k++ {
		if err := b.PostRecv(&Descriptor{DS: []DataSegment{Seg(hd, dst[k*8:k*8+8])}}); err != nil {
			t.Fatal(err)
		}
	}
	done, stop := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-done }() // the sender is out of PostSend before the NICs close
	go func() {
		defer close(done)
		sent := 0
		for sent < msgs {
			select {
			case <-stop:
				return
			default:
			}
			if d := a.SendDone(); d != nil {
				continue
			}
			if s, _ := a.Pending(); s >= 8 {
				na.Yield()
				continue
			}
			if err := a.PostSend(&Descriptor{Control: OpSend | FlagImmediate, Imm: uint32(sent), DS: []DataSegment{Seg(hs, src)}}); err != nil {
				t.Error(err)
				return
			}
			sent++
		}
	}()
	for got := 0; got < msgs; got++ {
		vi, recv, err := cb.Wait(10 * time.Second)
		if err != nil {
			t.Fatalf("message %d of %d never arrived: %v", got, msgs, err)
		}
		if vi != b || !recv {
			t.Fatalf("CQ reported vi %d recv=%v", vi.ID(), recv)
		}
		d := b.RecvDone()
		if d.Err() != nil || d.Imm != uint32(got) {
			t.Fatalf("message %d: %v, imm %d", got, d.Err(), d.Imm)
		}
		if err := b.PostRecv(d); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNetAssist checks that applications waiting for their completions
// carry the frames of a ping-pong across hosts themselves (NIC.Assist):
// the engines, which would otherwise wake from epoll for every frame,
// stay asleep.
func TestNetAssist(t *testing.T) {
	na, nb, a, b, ca, cb := hostPair(t, DefaultOptions())
	const rounds = 400
	bufA, bufB := make([]byte, 8), make([]byte, 8)
	ha, hb := reg(t, na, bufA), reg(t, nb, bufB)
	// exchange posts a receive, optionally sends first, and waits for
	// both of its completions (the send's comes with the peer's answer).
	exchange := func(vi *VI, cq *CQ, h MemHandle, buf []byte, sendFirst bool) error {
		rd := &Descriptor{DS: []DataSegment{Seg(h, buf)}}
		if err := vi.PostRecv(rd); err != nil {
			return err
		}
		send := func() error {
			return vi.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(h, buf)}})
		}
		if sendFirst {
			if err := send(); err != nil {
				return err
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for sent, got := !sendFirst, false; !sent || !got; {
			// Poll as a waiting application does (the device's
			// Progress): completions, and the NIC's pass.
			_, recv, ok := cq.Done()
			if !ok {
				if time.Now().After(deadline) {
					return errors.New("no completion in 10 s")
				}
				vi.nic.Assist()
				continue
			}
			if recv {
				vi.RecvDone()
				got = true
				if !sendFirst {
					if err := send(); err != nil {
						return err
					}
					sendFirst = true // its completion is still to come
					sent = false
				}
			} else {
				vi.SendDone()
				sent = true
			}
		}
		return nil
	}
	echo := make(chan error, 1)
	go func() {
		for i := 0; i < rounds; i++ {
			if err := exchange(b, cb, hb, bufB, false); err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	s0 := na.Counters()["nic_sleeps"] + nb.Counters()["nic_sleeps"]
	start := time.Now()
	for i := 0; i < rounds; i++ {
		if err := exchange(a, ca, ha, bufA, true); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	if err := <-echo; err != nil {
		t.Fatal(err)
	}
	sleeps := na.Counters()["nic_sleeps"] + nb.Counters()["nic_sleeps"] - s0
	// An assisted engine's sleep ends at its timeout (assistedFor) too,
	// and a loaded machine stretches the run: those sleeps are allowed;
	// a frame's wake-up per round trip is not.
	elapsed := time.Since(start)
	allowed := int64(rounds/2) + 2*int64(elapsed/assistedFor+1)
	t.Logf("%d round trips in %v: the engines slept %d times (allowed %d)", rounds, elapsed, sleeps, allowed)
	if sleeps > allowed {
		t.Errorf("the engines slept %d times in %d round trips (%v; allowed %d): the frames woke them instead of being carried by the waiting applications", sleeps, rounds, elapsed, allowed)
	}
}

// TestNetEngineOffWhileAssisted: while the application assists, the engine
// of a NIC on the wire that wakes at its sleep's timeout goes back to sleep
// without a pass of its own (nic_engine_passes): a pass, and the spin
// after it, would take a core from the ranks and the lock from the
// waiter's next pass. Before, every timeout (assistedFor) ran a pass and
// the spin after it.
func TestNetEngineOffWhileAssisted(t *testing.T) {
	na, _, _, _, _, _ := hostPair(t, DefaultOptions())
	// The engine's passes after the connection are over once it sleeps in
	// the mode the assists set.
	deadline := time.Now().Add(10 * time.Second)
	for atomic.LoadUint32(na.self.u32(offNICSleep)) != sleepAssisted {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not go to sleep leaving the network to the assists in 10 s")
		}
		na.Assist()
	}
	// The last assist is dated ahead, so that the engine sees the
	// application assisting for the whole span however this goroutine is
	// scheduled; the span is the engine's to wake up in, 20 times.
	const span = 20 * assistedFor
	p0 := na.Counters()["nic_engine_passes"]
	na.eng.lastAssist.Store(time.Now().Add(time.Hour).UnixNano())
	time.Sleep(span)
	na.eng.lastAssist.Store(time.Now().UnixNano())
	passes := na.Counters()["nic_engine_passes"] - p0
	t.Logf("%v of assists: the engine ran %d passes", span, passes)
	if passes != 0 {
		t.Errorf("the engine ran %d passes of its own in %v while the application assisted", passes, span)
	}
}

// TestNetEngineFewWakeups: while the application keeps assisting, the
// engine of a NIC on the wire wakes up ever more rarely (its sleep doubles
// up to assistedMax), each wake-up being a thread that takes a core from a
// spinning rank; before, it woke every assistedFor. When the application
// sleeps (NIC.Sleep) the engine is woken at once and takes the network.
func TestNetEngineFewWakeups(t *testing.T) {
	na, _, _, _, _, _ := hostPair(t, DefaultOptions())
	deadline := time.Now().Add(10 * time.Second)
	for atomic.LoadUint32(na.self.u32(offNICSleep)) != sleepAssisted {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not go to sleep leaving the network to the assists in 10 s")
		}
		na.Assist()
	}
	const span = 40 * assistedFor
	s0 := na.Counters()["nic_sleeps"]
	na.eng.lastAssist.Store(time.Now().Add(time.Hour).UnixNano())
	time.Sleep(span)
	wakes := na.Counters()["nic_sleeps"] - s0
	t.Logf("%v of assists: the engine slept %d times", span, wakes)
	if wakes > int64(span/assistedMax)+5 {
		t.Errorf("the engine woke %d times in %v of assists (every assistedFor: %d; want at most %d)", wakes, span, span/assistedFor, int64(span/assistedMax)+5)
	}
	// The application sleeps: the engine leaves its long sleep at once
	// and sleeps in the endpoint's epoll.
	seq := na.Seq()
	slept := make(chan struct{})
	defer func() { <-slept }() // out of Sleep before the NIC closes
	go func() {
		defer close(slept)
		na.Sleep(seq, 10*time.Millisecond)
	}()
	for atomic.LoadUint32(na.self.u32(offNICSleep)) != sleepEpoll {
		if time.Now().After(deadline.Add(span)) {
			t.Fatal("the engine did not take the network after the application slept")
		}
		runtime.Gosched()
	}
}

// TestNetEngineSleepNoSyscall: the engine sleeping while the application
// assists is parked in the Go scheduler, not blocked in a system call: the
// runtime's monitor takes the processor of a goroutine in a system call
// and then polls every 20 µs, so a futex sleep renewed every assistedFor
// kept it waking up beside the spinning ranks (the 90th percentile of
// via's ping-pong across hosts). The goroutine dump shows each goroutine's
// state.
func TestNetEngineSleepNoSyscall(t *testing.T) {
	na, _, _, _, _, _ := hostPair(t, DefaultOptions())
	deadline := time.Now().Add(10 * time.Second)
	for atomic.LoadUint32(na.self.u32(offNICSleep)) != sleepAssisted {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not go to sleep leaving the network to the assists in 10 s")
		}
		na.Assist()
	}
	na.eng.lastAssist.Store(time.Now().Add(time.Hour).UnixNano())
	defer na.eng.lastAssist.Store(time.Now().UnixNano())
	// Its state over a few of its wake-ups (between two sleeps it runs).
	// Neither NIC's engine sleeps in a futex: both have a network port,
	// and the other's, not assisted, sleeps in the endpoint's epoll.
	buf := make([]byte, 1<<20)
	seen := 0
	for start := time.Now(); time.Since(start) < 5*assistedFor; {
		dump := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(dump, "\n\n") {
			if !strings.Contains(g, "(*NIC).engine(") {
				continue
			}
			if strings.Contains(g, "FutexWait") {
				t.Fatalf("the engine sleeps in a system call while the application assists:\n%s", g)
			}
			if strings.Contains(g, "(*NIC).assistedSleep(") {
				seen++
			}
		}
		runtime.Gosched()
	}
	if seen == 0 {
		t.Fatal("the engine was never seen in its sleep while assisted in 5 assistedFor")
	}
}

// TestEngineNeverWaitsForLock: an engine woken while the application
// holds the engine's lock (it runs the pass itself: Help, Assist, the
// doorbell) does not park on the lock, whose Unlock would then wake it
// (a futex call and a thread put on a core, on the application's path);
// it leaves the pass to the holder, and runs its own once the lock is free.
func TestEngineNeverWaitsForLock(t *testing.T) {
	na, _, _, _, _, _ := hostPair(t, DefaultOptions())
	deadline := time.Now().Add(10 * time.Second)
	for atomic.LoadUint32(na.self.u32(offNICSleep)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not go to sleep in 10 s")
		}
		runtime.Gosched()
	}
	na.eng.mu.Lock() // the application in its pass
	na.eng.lastAssist.Store(0)
	busy0, passes0 := na.cnt.lockBusy.Load(), na.cnt.enginePasses.Load()
	na.self.ringNIC()
	buf := make([]byte, 1<<20)
	for na.cnt.lockBusy.Load() < busy0+3 {
		if time.Now().After(deadline) {
			na.eng.mu.Unlock()
			t.Fatal("the engine, rung, did not come to the lock in 10 s")
		}
		dump := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(dump, "\n\n") {
			if strings.Contains(g, "(*NIC).engine(") && (strings.Contains(g, "lockSlow") || strings.Contains(g, "SemacquireMutex")) {
				na.eng.mu.Unlock()
				t.Fatalf("the engine waits on the lock the application holds:\n%s", g)
			}
		}
		runtime.Gosched()
	}
	na.eng.mu.Unlock()
	na.self.ringNIC()
	for na.cnt.enginePasses.Load() == passes0 {
		if time.Now().After(deadline) {
			t.Fatal("the engine ran no pass of its own in 10 s once the lock was free")
		}
		runtime.Gosched()
	}
}

// TestNetEngineTakesPostedWhileAssisted: a send posted while the
// application assists, whose doorbell leaves the engine asleep (doorbell=d2
// is never executed at the post), is taken up by the engine at its next
// wake-up (NIC.Busy turns false) even if the application does not poll
// again, as before the engine stayed asleep through its wake-ups while
// assisted; then it arrives whole.
func TestNetEngineTakesPostedWhileAssisted(t *testing.T) {
	o := DefaultOptions()
	o.Doorbell = D2
	na, nb, a, b, _, _ := hostPair(t, o)
	src, dst := pattern(8, 9), make([]byte, 8)
	ha, hb := reg(t, na, src), reg(t, nb, dst)
	r := &Descriptor{DS: []DataSegment{Seg(hb, dst)}}
	if err := b.PostRecv(r); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for atomic.LoadUint32(na.self.u32(offNICSleep)) != sleepAssisted {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not go to sleep leaving the network to the assists in 10 s")
		}
		na.Assist()
	}
	// The application counts as assisting throughout (its last assist
	// dated ahead), and polls no more.
	na.eng.lastAssist.Store(time.Now().Add(time.Hour).UnixNano())
	defer na.eng.lastAssist.Store(time.Now().UnixNano())
	if err := a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(ha, src)}}); err != nil {
		t.Fatal(err)
	}
	for na.Busy() {
		if time.Now().After(deadline) {
			t.Fatal("the send posted while the application assisted was not taken up in 10 s without its polls")
		}
		runtime.Gosched()
	}
	// The endpoints' connection may still need their polls.
	for b.RecvDone() == nil {
		na.Assist()
		nb.Assist()
		if time.Now().After(deadline) {
			t.Fatal("no receive completion in 10 s")
		}
	}
	if !bytes.Equal(dst, src) {
		t.Fatalf("received %v, want %v", dst, src)
	}
}

// TestNetAssistOnePoll: the waiter's pass whose endpoint poll completes
// its receive descriptor returns with it, without polling the endpoint
// again (wire_polls), and an 8-byte ping-pong's round trips do so too.
func TestNetAssistOnePoll(t *testing.T) {
	na, nb, a, b, _, _ := hostPair(t, DefaultOptions())
	src, dst := pattern(8, 5), make([]byte, 8)
	ha, hb := reg(t, na, src), reg(t, nb, dst)
	const rounds = 50
	for i := 0; i < rounds; i++ {
		r := &Descriptor{DS: []DataSegment{Seg(hb, dst)}}
		if err := b.PostRecv(r); err != nil {
			t.Fatal(err)
		}
		if err := a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(ha, src)}}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			c0 := nb.Counters()
			nb.Assist()
			c1 := nb.Counters()
			if got := b.RecvDone(); got != nil {
				// The engine's own pass may have taken the frame (it
				// runs until it sees the first assist; the waiter's
				// pass then found the lock taken and polled nothing):
				// only the waiter's pass is judged; and not in the
				// first round, whose polls also accept the peer's
				// connection.
				if i > 0 && c1["nic_engine_passes"] == c0["nic_engine_passes"] && c1["wire_frames_in"] > c0["wire_frames_in"] {
					if polls := c1["wire_polls"] - c0["wire_polls"]; polls > 1 {
						t.Fatalf("round %d: the pass that completed the receive polled the endpoint %d times, want 1", i, polls)
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no receive completion in 10 s", i)
			}
		}
		for d := a.SendDone(); d == nil; d = a.SendDone() {
			na.Assist()
			nb.Assist() // the acknowledgement leaves with b's idle pass
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no send completion in 10 s", i)
			}
		}
		if !bytes.Equal(dst, src) {
			t.Fatalf("round %d: received %v, want %v", i, dst, src)
		}
	}
}

// TestNetEarlyFramesConnectRace: frames that came before the VI was
// connected go first even when the application connects the VI while the
// NIC is handling the next frame (between its look for the frame's VI and
// its replay of the kept frames: "frame"), or while it replays the kept
// frames (after it has kept the first: "replay"). Before the fix the frames
// looked at after the connection overtook those kept before it and took
// the oldest receive descriptors, so rank 0's MPI receive posted for a
// sender on another host matched a later message (the p2p check
// anysource-race on via, docs/xdp.md).
func TestNetEarlyFramesConnectRace(t *testing.T) {
	for _, where := range []string{"frame", "replay"} {
		t.Run(where, func(t *testing.T) { earlyConnectRace(t, where) })
	}
}

// earlyConnectRace keeps 6 frames at the receiving NIC, then connects its
// VI from raceHook at where, and checks the 7 messages fill the receive
// descriptors in order.
func earlyConnectRace(t *testing.T, where string) {
	var armed atomic.Bool
	var hookNIC atomic.Pointer[NIC]
	var hookVI atomic.Pointer[VI]
	var connectErr atomic.Pointer[error]
	raceHook = func(n *NIC, at string) {
		if at == where && n == hookNIC.Load() && armed.CompareAndSwap(true, false) {
			if err := hookVI.Load().ConnectRemote(0, 0, "rank 0 on host h1"); err != nil {
				connectErr.Store(&err)
			}
		}
	}
	t.Cleanup(func() { raceHook = nil }) // runs after the NICs' Close (cleanups run last first)
	na, nb, a, b, _, cb := hostPairUnconnected(t, DefaultOptions())
	hookNIC.Store(nb)
	hookVI.Store(b)
	if a.ID() != 0 {
		t.Fatalf("VI id %d, the hook connects to VI 0", a.ID())
	}
	if err := a.ConnectRemote(1, b.ID(), "rank 1 on host h2"); err != nil {
		t.Fatal(err)
	}
	const early = 6
	src, dst := make([]byte, 8), make([]byte, 8*(early+1))
	hs, hd := reg(t, na, src), reg(t, nb, dst)
	for k := 0; k <= early; k++ {
		if err := b.PostRecv(&Descriptor{DS: []DataSegment{Seg(hd, dst[k*8:k*8+8])}}); err != nil {
			t.Fatal(err)
		}
	}
	send := func(k int) {
		if err := a.PostSend(&Descriptor{Control: OpSend | FlagImmediate, Imm: uint32(k), DS: []DataSegment{Seg(hs, src)}}); err != nil {
			t.Fatal(err)
		}
	}
	for k := 0; k < early; k++ {
		send(k)
	}
	for deadline := time.Now().Add(10 * time.Second); nb.Counters()["wire_frames_in"] < early; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d frames arrived before the connection", nb.Counters()["wire_frames_in"], early)
		}
		time.Sleep(time.Millisecond) // waiting for the peer's frames to arrive, not synchronising threads
	}
	// "frame": the next frame (message early) connects b while it is
	// handled; "replay": the next replay of the kept frames does, after
	// keeping the first.
	armed.Store(true)
	send(early)
	for k := 0; k <= early; k++ {
		d := cqWait(t, cb, b, true)
		if p := connectErr.Load(); p != nil {
			t.Fatal(*p)
		}
		if d.Err() != nil || d.Imm != uint32(k) {
			t.Fatalf("receive descriptor %d got message %d (%v), want message %d: a frame overtook those kept before the connection", k, d.Imm, d.Err(), k)
		}
	}
}

// TestNetInline: a send posted on a VI connected to another host while no
// engine pass runs goes to the wire from PostSend itself (nic_inline, and
// the frame counted out before PostSend returns), not at the next pass,
// and arrives whole; its completion comes with the peer's acknowledgement.
func TestNetInline(t *testing.T) {
	na, nb, a, b, ca, cb := hostPair(t, DefaultOptions())
	// An engine that wakes on its own (a timer) and runs a pass at the
	// post takes the send itself: such a try is repeated, and only a send
	// that neither the doorbell nor an engine pass took fails the test.
	for try := 0; ; try++ {
		src, dst := pattern(64, 3+try), make([]byte, 64)
		ha, hb := reg(t, na, src), reg(t, nb, dst)
		r := &Descriptor{DS: []DataSegment{Seg(hb, dst)}}
		if err := b.PostRecv(r); err != nil {
			t.Fatal(err)
		}
		// The engine's passes after the connection are over once it sleeps;
		// a pass running at the post would take the send itself.
		deadline := time.Now().Add(10 * time.Second)
		for atomic.LoadUint32(na.self.u32(offNICSleep)) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the engine did not go to sleep in 10 s")
			}
			runtime.Gosched()
		}
		c0 := na.Counters()
		if err := a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(ha, src)}}); err != nil {
			t.Fatal(err)
		}
		c1 := na.Counters()
		if got := cqWait(t, cb, b, true); got != r || r.Length != 64 || !bytes.Equal(dst, src) {
			t.Fatalf("receive: descriptor %p (want %p), length %d, data equal %v", got, r, r.Length, bytes.Equal(dst, src))
		}
		if d := cqWait(t, ca, a, false); d == nil || d.Err() != nil {
			t.Fatalf("send completion: %v", d)
		}
		inline, frames := c1["nic_inline"]-c0["nic_inline"], c1["wire_frames_out"]-c0["wire_frames_out"]
		if inline == 1 && frames == 1 {
			return
		}
		engine := c1["nic_engine_passes"] - c0["nic_engine_passes"] + c1["nic_engine_lock_busy"] - c0["nic_engine_lock_busy"]
		if engine == 0 || try == 9 {
			t.Fatalf("PostSend (try %d): nic_inline +%d, wire_frames_out +%d, engine passes +%d; want the send's frame sent by the doorbell (+1, +1)",
				try, inline, frames, engine)
		}
		t.Logf("try %d: the engine woke and took the send (%d passes); again", try, engine)
	}
}

// TestNetRoundTripAllocs: an 8-byte round trip between VIs on two hosts,
// posted, carried by the waiters' assists and completed, allocates
// nothing in the NICs once their queues have gone round: the operation
// record of a send descriptor is reused once the peer acknowledged it,
// the in-flight list keeps its array, and the frame head is the NIC's.
func TestNetRoundTripAllocs(t *testing.T) {
	na, nb, a, b, _, _ := hostPair(t, DefaultOptions())
	src, dst, back := pattern(8, 5), make([]byte, 8), make([]byte, 8)
	ha, hb, hback := reg(t, na, src), reg(t, nb, dst), reg(t, na, back)
	rb := &Descriptor{DS: []DataSegment{Seg(hb, dst)}}
	ra := &Descriptor{DS: []DataSegment{Seg(hback, back)}}
	sa := &Descriptor{Control: OpSend, DS: []DataSegment{Seg(ha, src)}}
	sb := &Descriptor{Control: OpSend, DS: []DataSegment{Seg(hb, dst)}}
	var err error
	post := func(vi *VI, d *Descriptor, send bool) {
		if err == nil && send {
			err = vi.PostSend(d)
		} else if err == nil {
			err = vi.PostRecv(d)
		}
	}
	wait := func(done func() bool) {
		for deadline := time.Now().Add(10 * time.Second); err == nil && !done(); {
			na.Assist()
			nb.Assist()
			if time.Now().After(deadline) {
				err = errors.New("no completion in 10 s")
			}
		}
	}
	round := func() {
		post(b, rb, false)
		post(a, ra, false)
		post(a, sa, true)
		wait(func() bool { return b.RecvDone() != nil })
		post(b, sb, true)
		wait(func() bool { return a.RecvDone() != nil })
		wait(func() bool { return a.SendDone() != nil })
		wait(func() bool { return b.SendDone() != nil })
	}
	// Every send-queue slot is used once first (its segment list is
	// allocated at its first post).
	for i := 0; i < DefaultOptions().SendQueue+10; i++ {
		round()
	}
	allocs := testing.AllocsPerRun(100, round)
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("a round trip across hosts allocated %v times", allocs)
	}
}

// TestNetRecvTranslatesUsed: a message across hosts translates only the
// part of the receive descriptor it fills: 8 bytes into a five-page buffer
// look up one page in the receiving NIC's translation cache, not five;
// a message longer than the buffer still completes with a length error.
func TestNetRecvTranslatesUsed(t *testing.T) {
	na, nb, a, b, ca, cb := hostPair(t, DefaultOptions())
	src, dst := pattern(8, 1), make([]byte, 5*pageSize)
	ha, hb := reg(t, na, src), reg(t, nb, dst)
	for i := 0; i < 2; i++ {
		c0 := nb.Counters()
		r := &Descriptor{DS: []DataSegment{Seg(hb, dst[:2*pageSize]), Seg(hb, dst[2*pageSize:])}}
		if err := b.PostRecv(r); err != nil {
			t.Fatal(err)
		}
		if err := a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(ha, src)}}); err != nil {
			t.Fatal(err)
		}
		if got := cqWait(t, cb, b, true); got != r || r.Err() != nil || r.Length != 8 || !bytes.Equal(dst[:8], src) {
			t.Fatalf("receive %d: descriptor %p (want %p), err %v, length %d", i, got, r, r.Err(), r.Length)
		}
		cqWait(t, ca, a, false)
		c1 := nb.Counters()
		if looks := c1["tlb_hits"] + c1["tlb_misses"] - c0["tlb_hits"] - c0["tlb_misses"]; looks != 1 {
			t.Fatalf("receive %d: %d translation lookups for an 8-byte message, want 1", i, looks)
		}
	}
	big := pattern(3*pageSize, 2)
	hbig := reg(t, na, big)
	r := &Descriptor{DS: []DataSegment{Seg(hb, dst[:2*pageSize])}}
	if err := b.PostRecv(r); err != nil {
		t.Fatal(err)
	}
	if err := a.PostSend(&Descriptor{Control: OpSend, DS: []DataSegment{Seg(hbig, big)}}); err != nil {
		t.Fatal(err)
	}
	if got := cqWait(t, cb, b, true); got != r || r.Status&StatusLengthError == 0 {
		t.Fatalf("a message longer than the buffer: status %#x, want a length error", r.Status)
	}
}
