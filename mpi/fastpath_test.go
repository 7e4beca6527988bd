package mpi

import (
	"errors"
	"math"
	goruntime "runtime"
	"runtime/debug"
	"testing"

	"github.com/adimpi/adimpi/datatype"
)

// TestPlainArgsNeverAcceptsWhatP2PArgsRejects checks the blocking calls'
// cheap argument test against the full one over every kind of bad and
// special argument: whatever plainArgs accepts, p2pArgs must accept too, and
// it must name an ordinary peer (no ProcNull or wildcard); and plainArgs
// must accept the ordinary calls, or the fast path would never run.
func TestPlainArgsNeverAcceptsWhatP2PArgsRejects(t *testing.T) {
	w := World()
	freed, err := w.Dup()
	if err != nil {
		t.Fatal(err)
	}
	if err := freed.Free(); err != nil {
		t.Fatal(err)
	}
	vec, _ := datatype.Vector(2, 1, 2, datatype.Float64) // never committed
	gone, _ := datatype.Contiguous(2, datatype.Float64)
	gone.Commit()
	gone.Free()
	mem := make([]byte, 64)
	bufs := []Buffer{
		Typed(mem, 8, datatype.Float64), Typed(mem, 0, datatype.Float64), Typed(nil, 0, datatype.Byte),
		Typed(mem, 9, datatype.Float64), Typed(mem, -1, datatype.Float64), Typed(mem, 1, nil),
		Typed(mem, 1, vec), Typed(mem, 1, gone),
	}
	accepted := 0
	for _, c := range []*Comm{w, nil, freed} {
		for _, b := range bufs {
			for _, peer := range []int{0, 1, -5, ProcNull, AnySource, 1 << 40} {
				for _, tag := range []int{0, 7, TagUB, TagUB + 1, -3, AnyTag} {
					for _, recv := range []bool{false, true} {
						// The non-blocking calls' test: wildcards only on
						// receives, never ProcNull.
						if !plainNB(c, &b, peer, tag, recv) {
							continue
						}
						if _, err := p2pArgs("test", c, b, peer, tag, recv); err != nil {
							t.Errorf("plainNB accepted (comm %v, count %d of %v, peer %d, tag %d, recv %v), p2pArgs says %v", c, b.Count, b.Type, peer, tag, recv, err)
						}
						if peer == ProcNull || !recv && (peer < 0 || tag < 0) {
							t.Errorf("plainNB accepted peer %d, tag %d (recv %v)", peer, tag, recv)
						}
					}
					if !plainArgs(c, &b, peer, tag) {
						continue
					}
					accepted++
					for _, recv := range []bool{false, true} {
						if _, err := p2pArgs("test", c, b, peer, tag, recv); err != nil {
							t.Errorf("plainArgs accepted (comm %v, count %d of %v in %d bytes, peer %d, tag %d), p2pArgs says %v", c, b.Count, b.Type, len(b.Mem), peer, tag, err)
						}
					}
					if peer < 0 {
						t.Errorf("plainArgs accepted the special peer %d", peer)
					}
				}
			}
		}
	}
	// The world, three good buffers, peer 0, tags 0, 7 and TagUB.
	if accepted != 9 {
		t.Errorf("plainArgs accepted %d ordinary calls, want 9", accepted)
	}
}

// handleShare is the allocations a run of ops non-blocking operations may
// make: one handle slab per 64 handles (a handle is never reused, since
// the program may still hold it), and one more for a slab begun earlier.
func handleShare(ops int) float64 { return float64(ops/64 + 1) }

// allocsOf is the number of heap allocations fn makes, on average over
// runs calls, without AllocsPerRun's rounding down: a path that allocates
// once in every few calls must show it. The count is the process's, so
// the collector is off meanwhile (a collection allocates too), and the
// least of five rounds is taken: other goroutines of the process (the
// testing package's, the singleton's) allocate now and then.
func allocsOf(runs int, fn func()) float64 {
	fn() // warm up: pools, bins and slices reach their size
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	best := math.Inf(1)
	for round := 0; round < 5; round++ {
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		for i := 0; i < runs; i++ {
			fn()
		}
		goruntime.ReadMemStats(&after)
		best = min(best, float64(after.Mallocs-before.Mallocs)/float64(runs))
	}
	return best
}

// TestFlatPathAllocations: Isend, Irecv, Wait, Test, Waitall(Into) and the
// blocking calls allocate nothing per call beyond the handles' share of
// their slabs, over a device that allocates nothing itself.
func TestFlatPathAllocations(t *testing.T) {
	withNullRuntime(t, func(w *Comm) {
		buf := make([]byte, 8)
		const win = 64
		rr, sr := make([]*Request, win), make([]*Request, win)
		sts := make([]Status, win)
		rp, _ := RecvInit(w, buf, 0, 1)
		sp, _ := SendInit(w, buf, 0, 1)
		pers := []*Request{rp, sp}
		own := make([]Request, win)
		ownp := make([]*Request, win)
		for k := range own {
			ownp[k] = &own[k]
		}
		cases := []struct {
			name string
			ops  int // non-blocking operations (handles) per call of fn
			fn   func()
		}{
			{"Isend+Irecv+Wait", 2, func() {
				rq, _ := Irecv(w, buf, 0, 1)
				sq, _ := Isend(w, buf, 0, 1)
				sq.Wait()
				rq.Wait()
			}},
			{"Irecv(AnySource, AnyTag)+Issend+Test", 2, func() {
				rq, _ := Irecv(w, buf, AnySource, AnyTag)
				sq, _ := Issend(w, buf, 0, 1)
				sq.Test()
				rq.Test()
			}},
			{"window of 64 + WaitallInto", 2 * win, func() {
				for k := range rr {
					rr[k], _ = Irecv(w, buf, 0, 1)
					sr[k], _ = Isend(w, buf, 0, 1)
				}
				WaitallInto(sr, nil)
				WaitallInto(rr, sts)
			}},
			{"Testall, Testany, Testsome, Waitany, Waitsome", 5, func() {
				rr[0], _ = Irecv(w, buf, 0, 1)
				Testall(rr[:1])
				rr[0], _ = Irecv(w, buf, 0, 1)
				Testany(rr[:1])
				rr[0], _ = Irecv(w, buf, 0, 1)
				Waitany(rr[:1])
				rr[0], _ = Irecv(w, buf, 0, 1)
				Testsome(rr[:1])
				rr[0], _ = Irecv(w, buf, 0, 1)
				Waitsome(rr[:1])
			}},
			{"IrecvIn+IsendIn window + WaitallInto", 0, func() {
				for k := range own {
					if k%2 == 0 {
						IrecvIn(&own[k], w, buf, 0, 1)
					} else {
						IsendIn(&own[k], w, buf, 0, 1)
					}
				}
				WaitallInto(ownp, sts)
			}},
			{"Startall+WaitallInto of persistent requests", 0, func() {
				Startall(pers)
				WaitallInto(pers, sts[:2])
			}},
			{"Send+Recv", 0, func() {
				Send(w, buf, 0, 1)
				Recv(w, buf, 0, 1)
			}},
		}
		for _, c := range cases {
			const runs = 640
			got := allocsOf(runs, c.fn)
			want := handleShare(c.ops*runs) / runs
			if c.name == "Testall, Testany, Testsome, Waitany, Waitsome" {
				// Testall returns its statuses in a new slice, and
				// Testsome and Waitsome their indices and statuses.
				want += 5
			}
			if got > want {
				t.Errorf("%s: %.3f allocations per call, want at most %.3f", c.name, got, want)
			}
		}
	})
}

// TestRequestIn: a request the caller owns starts an operation only while
// inactive, completes like a handle from Isend (status, then the empty
// status and inactive), and starts the next operation once completed;
// special arguments (ProcNull) go through the ordinary path into it.
func TestRequestIn(t *testing.T) {
	withNullRuntime(t, func(w *Comm) {
		buf := []int32{5, 6}
		var q Request
		if st, err := q.Wait(); err != nil || st != emptyStatus || q.Active() {
			t.Fatalf("Wait on a zero Request: %+v, %v, active %v; want the empty status", st, err, q.Active())
		}
		if err := IrecvIn(&q, w, buf, 0, 3); err != nil {
			t.Fatal(err)
		}
		if !q.Active() {
			t.Fatal("IrecvIn left the request inactive")
		}
		if err := IsendIn(&q, w, buf, 0, 3); !errors.Is(err, ErrRequest) {
			t.Fatalf("IsendIn into an active request: %v, want ErrRequest", err)
		}
		st, err := q.Wait()
		if err != nil || st.Source != 0 || st.Tag != 3 || q.Active() {
			t.Fatalf("Wait: %+v, %v, active %v", st, err, q.Active())
		}
		if st, err := q.Wait(); err != nil || st != emptyStatus {
			t.Fatalf("second Wait: %+v, %v; want the empty status", st, err)
		}
		if err := IsendIn(&q, w, buf, ProcNull, 3); err != nil {
			t.Fatal(err)
		}
		if st, done, err := q.Test(); err != nil || !done || st.Source != ProcNull {
			t.Fatalf("Test of a send to ProcNull: %+v, %v, %v", st, done, err)
		}
		if err := IsendIn(&q, w, buf, 7, 3); !errors.Is(err, ErrRank) {
			t.Fatalf("IsendIn to rank 7 of 1: %v, want ErrRank", err)
		}
		if err := IrecvIn(nil, w, buf, 0, 3); !errors.Is(err, ErrRequest) {
			t.Fatalf("IrecvIn into nil: %v, want ErrRequest", err)
		}
	})
}

// TestShortIsend checks the non-blocking sends that the device takes whole
// when they start (startFlatIn's SendShort path), on the process's real
// device against itself: such a send is complete at once, Wait reports its
// byte count, and it keeps its place behind a larger send to the same peer
// that is still in flight.
func TestShortIsend(t *testing.T) {
	w := World()
	r := live.Load()
	if r.short == nil {
		t.Skipf("SKIP: device %s has no adi.ShortSender, so no send takes the short path", r.devName)
	}
	big := make([]byte, 1<<20) // above every device's eager limit
	for i := range big {
		big[i] = byte(i)
	}
	small := []int64{42}
	gotBig, gotSmall := make([]byte, len(big)), make([]int64, 1)
	var rq [2]Request
	if err := IrecvIn(&rq[0], w, gotBig, 0, 9); err != nil {
		t.Fatal(err)
	}
	if err := IrecvIn(&rq[1], w, gotSmall, 0, 9); err != nil {
		t.Fatal(err)
	}
	var sq [2]Request
	if err := IsendIn(&sq[0], w, big, 0, 9); err != nil {
		t.Fatal(err)
	}
	if err := IsendIn(&sq[1], w, small, 0, 9); err != nil {
		t.Fatal(err)
	}
	if sq[1].ar != &r.sentShort {
		t.Fatalf("a send of 8 B on %s did not complete when it started", r.devName)
	}
	st, done, err := sq[1].Test()
	if err != nil || !done || st.Bytes() != 8 || st.Source != 0 || st.Tag != 9 {
		t.Fatalf("Test of the short send: %+v (bytes %d), done %v, %v; want done, 8 bytes to 0 with tag 9", st, st.Bytes(), done, err)
	}
	if err := WaitallInto([]*Request{&sq[0], &rq[0], &rq[1]}, nil); err != nil {
		t.Fatal(err)
	}
	if gotSmall[0] != 42 {
		t.Errorf("the second receive got %d, want the short send's 42 (it overtook the large send)", gotSmall[0])
	}
	for i := range gotBig {
		if gotBig[i] != byte(i) {
			t.Fatalf("the first receive's byte %d is %d, want %d", i, gotBig[i], byte(i))
		}
	}
}

// TestWaitallIntoStatuses checks the statuses that WaitallInto writes
// straight into the caller's array (statusInto), on the process's real
// device against itself: whatever the array held before, each entry
// becomes its operation's source, tag, byte count, no error and not
// cancelled, for receives by source and by wildcard and for sends, while
// a truncated receive still reports its error.
func TestWaitallIntoStatuses(t *testing.T) {
	w := World()
	const n = 6
	var rq, sq [n]Request
	got := make([][]int32, n)
	for k := range n {
		got[k] = make([]int32, 4)
		src, tag := 0, 20+k
		if k%2 == 1 {
			src, tag = AnySource, AnyTag
		}
		if err := IrecvIn(&rq[k], w, got[k], src, tag); err != nil {
			t.Fatal(err)
		}
	}
	for k := range n {
		if err := IsendIn(&sq[k], w, make([]int32, k%4+1), 0, 20+k); err != nil {
			t.Fatal(err)
		}
	}
	stale := Status{Source: 99, Tag: 99, Cancelled: true, Err: ErrTruncate}
	sts := make([]Status, n)
	for _, ps := range [][]Request{sq[:], rq[:]} {
		ptrs := make([]*Request, n)
		for k := range ps {
			ptrs[k] = &ps[k]
			sts[k] = stale
		}
		if err := WaitallInto(ptrs, sts); err != nil {
			t.Fatal(err)
		}
		for k, st := range sts {
			if st.Source != 0 || st.Tag != 20+k || st.Cancelled || st.Err != nil || st.Bytes() != 4*(k%4+1) {
				t.Errorf("status %d: %+v (bytes %d); want source 0, tag %d, %d bytes, no error", k, st, st.Bytes(), 20+k, 4*(k%4+1))
			}
		}
	}
	var q Request
	short := make([]int32, 1)
	if err := IrecvIn(&q, w, short, 0, 30); err != nil {
		t.Fatal(err)
	}
	if err := Send(w, []int32{1, 2}, 0, 30); err != nil {
		t.Fatal(err)
	}
	sts[0] = Status{}
	if err := WaitallInto([]*Request{&q}, sts[:1]); !errors.Is(err, ErrInStatus) || !errors.Is(sts[0].Err, ErrTruncate) {
		t.Fatalf("WaitallInto of a truncated receive: %v, status error %v; want ErrInStatus and ErrTruncate", err, sts[0].Err)
	}
	// Wait writes its status in place as well (waitInto): the same for a
	// receive that ends well and for a truncated one.
	for _, n := range []int{1, 2} {
		if err := IrecvIn(&q, w, short, AnySource, AnyTag); err != nil {
			t.Fatal(err)
		}
		if err := Send(w, make([]int32, n), 0, 31); err != nil {
			t.Fatal(err)
		}
		st, err := q.Wait()
		if st.Source != 0 || st.Tag != 31 || st.Bytes() != 4 || (n == 1) != (err == nil) || (n == 2) != errors.Is(st.Err, ErrTruncate) {
			t.Errorf("Wait of a receive of %d elements into 1: %+v (bytes %d), %v", n, st, st.Bytes(), err)
		}
	}
}

// TestOwnedRequestKeepsBody: a Request the program owns (IsendIn,
// IrecvIn) keeps its operation's body from one operation to the next,
// whatever the buffer, size or direction, and each operation still gets
// its own data and status; a Free of the inactive request gives the body
// back, and an operation that leaves the flat path (ProcNull) does not
// leave the request holding a stale body.
func TestOwnedRequestKeepsBody(t *testing.T) {
	w := World()
	var q Request
	small, big := make([]byte, 8), make([]int64, 4)
	if err := IrecvIn(&q, w, small, 0, 41); err != nil {
		t.Fatal(err)
	}
	body := q.body
	if err := Send(w, []byte("abcdefgh"), 0, 41); err != nil {
		t.Fatal(err)
	}
	if st, err := q.Wait(); err != nil || st.Bytes() != 8 || string(small) != "abcdefgh" {
		t.Fatalf("first receive: %+v, %v, %q", st, err, small)
	}
	if q.body != body || body == nil {
		t.Fatalf("after Wait the owned request holds body %p, want %p", q.body, body)
	}
	if err := IrecvIn(&q, w, big, AnySource, AnyTag); err != nil {
		t.Fatal(err)
	}
	if q.ar != body {
		t.Fatalf("the second receive runs on %p, want the kept body %p", q.ar, body)
	}
	if err := Send(w, []int64{1, 2, 3}, 0, 42); err != nil {
		t.Fatal(err)
	}
	if st, err := q.Wait(); err != nil || st.Bytes() != 24 || st.Tag != 42 || st.Source != 0 || big[2] != 3 || big[3] != 0 {
		t.Fatalf("second receive: %+v (bytes %d), %v, %v", st, st.Bytes(), err, big)
	}
	// A send to ProcNull takes startNB's path; its own handle's body goes
	// back when it completes.
	if err := IsendIn(&q, w, small, ProcNull, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Wait(); err != nil {
		t.Fatal(err)
	}
	if q.body != nil && q.owned {
		t.Fatalf("after a ProcNull send the request holds body %p as its own", q.body)
	}
	if err := IrecvIn(&q, w, small, 0, 43); err != nil {
		t.Fatal(err)
	}
	if err := Send(w, []byte("12345678"), 0, 43); err != nil {
		t.Fatal(err)
	}
	if st, err := q.Wait(); err != nil || st.Bytes() != 8 || string(small) != "12345678" {
		t.Fatalf("receive after the ProcNull send: %+v, %v, %q", st, err, small)
	}
	r := live.Load()
	r.mu.Lock()
	n := len(r.bodies)
	r.mu.Unlock()
	kept := q.body
	if err := q.Free(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	back := len(r.bodies) == n+1 && r.bodies[n] == kept
	r.mu.Unlock()
	if kept == nil || !back {
		t.Fatalf("Free of an inactive owned request did not give its body %p back", kept)
	}
}

// TestTestallInto: TestallInto reports false and writes no status while a
// request is still pending, and once all have completed it completes them
// and writes each status into place, as WaitallInto does; a window of
// owned requests tested to completion allocates nothing.
func TestTestallInto(t *testing.T) {
	w := World()
	const n = 4
	var rq [n]Request
	ptrs := make([]*Request, n)
	got := make([]int32, n)
	for k := range n {
		ptrs[k] = &rq[k]
		if err := IrecvIn(&rq[k], w, got[k:k+1], 0, 50+k); err != nil {
			t.Fatal(err)
		}
	}
	stale := Status{Source: 99, Tag: 99}
	sts := []Status{stale, stale, stale, stale}
	for k := range n - 1 {
		if err := Send(w, []int32{int32(10 + k)}, 0, 50+k); err != nil {
			t.Fatal(err)
		}
	}
	if done, err := TestallInto(ptrs, sts); err != nil || done {
		t.Fatalf("TestallInto with a receive still pending: done %v, %v", done, err)
	}
	if sts[0] != stale || !rq[0].Active() {
		t.Fatalf("TestallInto that reports false changed status 0 to %+v or completed request 0", sts[0])
	}
	if err := Send(w, []int32{13}, 0, 53); err != nil {
		t.Fatal(err)
	}
	done := false
	for i := 0; i < 1000 && !done; i++ {
		var err error
		if done, err = TestallInto(ptrs, sts); err != nil {
			t.Fatal(err)
		}
	}
	if !done {
		t.Fatal("TestallInto never reported the four receives of messages sent to self as done")
	}
	for k, st := range sts {
		if st.Source != 0 || st.Tag != 50+k || st.Bytes() != 4 || got[k] != int32(10+k) || rq[k].Active() {
			t.Errorf("receive %d: status %+v, data %d, active %v", k, st, got[k], rq[k].Active())
		}
	}
	if done, err := TestallInto(ptrs, nil); err != nil || !done {
		t.Fatalf("TestallInto of inactive requests: %v, %v; want true", done, err)
	}
	var sq [n]Request
	all := make([]*Request, 0, 2*n)
	for k := range n {
		all = append(all, &rq[k], &sq[k])
	}
	allocs := testing.AllocsPerRun(50, func() {
		for k := range n {
			IrecvIn(&rq[k], w, got[k:k+1], 0, 60)
			IsendIn(&sq[k], w, got[k:k+1], 0, 60)
		}
		for i := 0; i < 1000; i++ {
			if done, err := TestallInto(all, nil); err != nil || done {
				return
			}
		}
		t.Error("a window of messages to self never tested done")
	})
	if allocs != 0 {
		t.Errorf("a window of owned requests tested to completion made %v allocations, want 0", allocs)
	}
}

// shortCounter is nullDevice with immediate small sends (adi.ShortSender),
// which it counts.
type shortCounter struct {
	nullDevice
	sends, empty int
}

func (s *shortCounter) SendShort(_ uint32, _, _ int, _ uint32, data []byte) bool {
	s.sends++
	if len(data) == 0 {
		s.empty++
	}
	return true
}

// TestEmptyMessagesTakeShortPath: a 0-byte Send and Recv (pingpong's 0 B
// latency) take the same per-message path as an 8-byte one: the send is
// handed to the device's SendShort whether the slice is nil or empty, the
// receive's buffer passes the blocking calls' cheap argument test (no
// p2pArgs), and neither allocates.
func TestEmptyMessagesTakeShortPath(t *testing.T) {
	dev := &shortCounter{}
	r := &runtime{dev: dev, short: dev, devName: "null", size: 1, poll: 1, spin: 1}
	r.world = newComm("MPI_COMM_WORLD", 0, 0, identity(1))
	r.resume = make(chan struct{}, 1)
	prev := live.Swap(r)
	defer live.Store(prev)
	w := r.world
	for _, buf := range [][]byte{nil, {}, make([]byte, 8)[:0]} {
		var b Buffer
		sliceInto(&b, buf)
		if !plainArgs(w, &b, 0, 1) {
			t.Errorf("a receive into %#v is not plain: it takes p2pArgs", buf)
		}
		if err := Send(w, buf, 0, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := Recv(w, buf, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range [][]float64{nil, {}} {
		if err := Send(w, f, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	if dev.sends != 5 || dev.empty != 5 {
		t.Errorf("SendShort took %d sends (%d empty), want all 5 empty ones", dev.sends, dev.empty)
	}
	empty := []byte{}
	if a := testing.AllocsPerRun(100, func() {
		_ = Send(w, empty, 0, 1)
		_, _ = Recv(w, empty, 0, 1)
	}); a != 0 {
		t.Errorf("a 0-byte Send and Recv allocate %v times, want 0", a)
	}
}

// shortRefuser is nullDevice whose SendShort refuses every message, as a
// device does for a peer on another host; it counts the refusals.
type shortRefuser struct {
	nullDevice
	asked int
}

func (s *shortRefuser) SendShort(uint32, int, int, uint32, []byte) bool {
	s.asked++
	return false
}

// TestSendAsksShortOnce: a Send that the device's SendShort refuses goes
// to a request at once; it asks SendShort once, not again on the way (each
// ask a hold of the lock before the message leaves).
func TestSendAsksShortOnce(t *testing.T) {
	dev := &shortRefuser{}
	r := &runtime{dev: dev, short: dev, devName: "null", size: 1, poll: 1, spin: 1}
	r.world = newComm("MPI_COMM_WORLD", 0, 0, identity(1))
	r.resume = make(chan struct{}, 1)
	prev := live.Swap(r)
	defer live.Store(prev)
	if err := Send(r.world, []float64{1}, 0, 1); err != nil {
		t.Fatal(err)
	}
	if dev.asked != 1 {
		t.Errorf("Send asked SendShort %d times, want 1", dev.asked)
	}
}
