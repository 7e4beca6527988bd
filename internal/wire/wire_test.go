package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/internal/shm"
)

// recorder is a Handler that keeps what it is given.
type recorder struct {
	frames []got
	sent   []any
	lost   map[int]error
	check  func(peer int, head, body []byte) // called on each frame, if set
}

type got struct {
	peer int
	head []byte
	n    int
}

func (r *recorder) Frame(peer int, head, body []byte) {
	if r.check != nil {
		r.check(peer, head, body)
	}
	r.frames = append(r.frames, got{peer, append([]byte(nil), head...), len(body)})
}
func (r *recorder) Sent(tok any) { r.sent = append(r.sent, tok) }
func (r *recorder) Lost(peer int, err error) {
	if r.lost == nil {
		r.lost = map[int]error{}
	}
	r.lost[peer] = err
}

// job is n endpoints on loopback that resolve each other.
type job struct {
	eps  []*Endpoint
	recs []*recorder
}

var testSecret = []byte("0123456789abcdef-test-secret")

func newJob(t testing.TB, n int, secrets ...[]byte) *job {
	t.Helper()
	j := &job{}
	for r := 0; r < n; r++ {
		sec := testSecret
		if r < len(secrets) && secrets[r] != nil {
			sec = secrets[r]
		}
		rec := &recorder{}
		ep, err := Open(Config{Rank: r, Job: 42, Secret: sec, Listen: "127.0.0.1:0", Handler: rec,
			Resolve: func(p int) (string, error) {
				if p < 0 || p >= len(j.eps) {
					return "", fmt.Errorf("no rank %d", p)
				}
				return j.eps[p].Addr(), nil
			},
			Logf: func(string, ...any) {}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ep.Close() })
		j.eps = append(j.eps, ep)
		j.recs = append(j.recs, rec)
	}
	return j
}

// pollUntil polls every endpoint until done reports true, failing the test
// after a generous bound.
func (j *job) pollUntil(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		idle := true
		for _, ep := range j.eps {
			if ep.Poll() {
				idle = false
			}
		}
		if idle {
			j.eps[0].Wait(time.Millisecond)
		}
	}
}

// fillBody writes the pattern of frame (src, seq) into b.
func fillBody(b []byte, src, seq int) {
	x := uint32(src*1_000_003 + seq*7919 + 1)
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
}

// TestOrderedAndIntact sends thousands of frames of random sizes (from
// empty to several times the input buffer) between three endpoints in
// every direction at once, reusing each body buffer as soon as the
// endpoint releases it, and checks that every frame arrives once, in order
// per sender, with its bytes intact.
func TestOrderedAndIntact(t *testing.T) {
	const n, perPeer = 3, 600
	j := newJob(t, n)
	next := make([][]int, n) // next[dst][src]: the sequence number expected
	for d := range next {
		next[d] = make([]int, n)
		d := d
		j.recs[d].check = func(src int, head, body []byte) {
			seq := int(binary.LittleEndian.Uint32(head))
			if seq != next[d][src] {
				t.Fatalf("rank %d: frame %d from rank %d arrived when %d was due", d, seq, src, next[d][src])
			}
			next[d][src]++
			want := make([]byte, len(body))
			fillBody(want, src, seq)
			if !bytes.Equal(body, want) {
				t.Fatalf("rank %d: frame %d from rank %d (%d bytes) corrupted", d, seq, src, len(body))
			}
		}
	}
	rng := rand.New(rand.NewSource(1))
	size := func() int {
		switch k := rng.Intn(100); {
		case k < 60:
			return rng.Intn(64)
		case k < 95:
			return rng.Intn(64 << 10)
		default:
			return inCap + rng.Intn(3*inCap)
		}
	}
	// bufs[src] are the body buffers of src still held by its endpoint.
	held := make([]map[*[]byte]bool, n)
	for s := range held {
		held[s] = map[*[]byte]bool{}
	}
	var free [][]byte
	seq := make([][]int, n)
	for s := range seq {
		seq[s] = make([]int, n)
	}
	var head [4]byte
	sent := 0
	for round := 0; round < perPeer; round++ {
		for s := 0; s < n; s++ {
			for d := 0; d < n; d++ {
				if s == d {
					continue
				}
				k := size()
				var b []byte
				if len(free) > 0 && cap(free[len(free)-1]) >= k {
					b, free = free[len(free)-1][:k], free[:len(free)-1]
				} else {
					b = make([]byte, k)
				}
				fillBody(b, s, seq[s][d])
				binary.LittleEndian.PutUint32(head[:], uint32(seq[s][d]))
				seq[s][d]++
				tok := &b
				now, err := j.eps[s].Send(d, head[:], b, tok)
				if err != nil {
					t.Fatal(err)
				}
				sent++
				if now {
					free = append(free, b)
				} else {
					held[s][tok] = true
				}
			}
			// Release what the endpoints are done with, scribbling over it
			// so that a body released too early shows up as corruption.
			j.eps[s].Poll()
			for _, tok := range j.recs[s].sent {
				p := tok.(*[]byte)
				if !held[s][p] {
					t.Fatalf("rank %d: Sent for a frame it did not queue", s)
				}
				delete(held[s], p)
				for i := range *p {
					(*p)[i] = 0xee
				}
				free = append(free, *p)
			}
			j.recs[s].sent = j.recs[s].sent[:0]
		}
	}
	total := func() int {
		c := 0
		for _, r := range j.recs {
			c += len(r.frames)
		}
		return c
	}
	j.pollUntil(t, "every frame", func() bool { return total() == sent })
	for s := range held {
		for len(held[s]) > 0 {
			j.pollUntil(t, "the last releases", func() bool { return len(j.recs[s].sent) > 0 })
			for _, tok := range j.recs[s].sent {
				delete(held[s], tok.(*[]byte))
			}
			j.recs[s].sent = nil
		}
	}
	for d, r := range j.recs {
		if len(r.lost) != 0 {
			t.Errorf("rank %d lost peers: %v", d, r.lost)
		}
	}
	// Both sides dialled at once: at most two connections per pair.
	for r, ep := range j.eps {
		if c := ep.Counters(); c.Dials > n-1 || c.Refused != 0 {
			t.Errorf("rank %d: %+v", r, c)
		}
	}
}

// TestWrongSecretRefused: a rank with another secret can neither deliver a
// frame nor be believed; both sides see the failure.
func TestWrongSecretRefused(t *testing.T) {
	j := newJob(t, 2, nil, []byte("another-secret-of-16+bytes"))
	if _, err := j.eps[1].Send(0, []byte("hi"), nil, nil); err != nil {
		t.Fatal(err)
	}
	j.pollUntil(t, "the refusal", func() bool { return j.eps[0].Counters().Refused == 1 && j.recs[1].lost[0] != nil })
	if len(j.recs[0].frames) != 0 {
		t.Fatalf("rank 0 took %d frames from a rank without the secret", len(j.recs[0].frames))
	}
	if !strings.Contains(j.recs[1].lost[0].Error(), "authentication") {
		t.Fatalf("rank 1's failure does not say why: %v", j.recs[1].lost[0])
	}
	if _, err := j.eps[1].Send(0, []byte("again"), nil, nil); err == nil {
		t.Fatal("Send to a peer that failed authentication succeeded")
	}
}

// TestStrangerCannotInject: a raw TCP client that knows the protocol but
// not the secret sends a hello, a forged proof and a frame; nothing is
// delivered and the connection is refused.
func TestStrangerCannotInject(t *testing.T) {
	j := newJob(t, 1)
	nc, err := net.Dial("tcp", j.eps[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	h := hello{job: 42, from: 7, to: 0, nonce: newNonce()}
	msg := make([]byte, helloLen+proofLen+headerLen+3)
	h.encode(msg)
	putHeader(msg[helloLen+proofLen:], 3, 0)
	copy(msg[helloLen+proofLen+headerLen:], "bad")
	if _, err := nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	j.pollUntil(t, "the refusal", func() bool { return j.eps[0].Counters().Refused == 1 })
	if len(j.recs[0].frames) != 0 {
		t.Fatal("a frame from a connection without the secret was delivered")
	}
	// Garbage instead of a hello is refused too.
	nc2, err := net.Dial("tcp", j.eps[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	nc2.Write([]byte(strings.Repeat("GET / HTTP/1.0\r\n", 4)))
	j.pollUntil(t, "the second refusal", func() bool { return j.eps[0].Counters().Refused == 2 })
}

// TestCloseIsNotLoss and TestAbruptLoss: a peer that closes its endpoint
// is not reported lost; one whose sockets vanish without a word is, once,
// and sends to it fail.
func TestCloseIsNotLoss(t *testing.T) {
	j := newJob(t, 2)
	j.eps[0].Send(1, []byte("x"), nil, nil)
	j.pollUntil(t, "a frame", func() bool { return len(j.recs[1].frames) == 1 })
	j.eps[1].Close()
	j.eps = j.eps[:1]
	// Rank 0 reads the bye and then the end of the stream.
	j.pollUntil(t, "the close", func() bool { _, gone := j.eps[0].lost[1]; return gone })
	if len(j.recs[0].lost) != 0 {
		t.Fatalf("an orderly close was reported as a loss: %v", j.recs[0].lost)
	}
}

func TestAbruptLoss(t *testing.T) {
	j := newJob(t, 2)
	j.eps[0].Send(1, []byte("x"), nil, nil)
	j.pollUntil(t, "a frame", func() bool { return len(j.recs[1].frames) == 1 })
	for fd := range j.eps[1].conns { // the process dies: its sockets close with no bye
		unix.Close(fd)
	}
	j.eps[1].conns = map[int]*conn{}
	j.eps = j.eps[:1]
	j.pollUntil(t, "the loss", func() bool { return j.recs[0].lost[1] != nil })
	if _, err := j.eps[0].Send(1, []byte("y"), nil, nil); err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("Send to a lost peer: %v", err)
	}
}

// TestWaitWakes: Wait sleeps until data arrives or Wake is called.
func TestWaitWakes(t *testing.T) {
	j := newJob(t, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		j.eps[0].Wake()
	}()
	start := time.Now()
	j.eps[0].Wait(time.Minute)
	wg.Wait()
	if el := time.Since(start); el > 30*time.Second {
		t.Fatalf("Wait ignored Wake for %v", el)
	}
	// Data: rank 1 connects and sends; rank 0's Wait returns for it.
	j.eps[1].Send(0, []byte("x"), nil, nil)
	done := make(chan struct{})
	go func() {
		for len(j.recs[0].frames) == 0 {
			j.eps[0].Wait(time.Minute)
			j.eps[0].Poll()
		}
		close(done)
	}()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-done:
			return
		case <-deadline:
			t.Fatal("Wait did not return for arriving data")
		default:
			j.eps[1].Poll() // rank 1 finishes its handshake
			j.eps[1].Wait(time.Millisecond)
		}
	}
}

// BenchmarkPingPong times a round trip of a frame of each size between two
// endpoints of one process over loopback (both polled by one goroutine).
func BenchmarkPingPong(b *testing.B) {
	for _, size := range []int{8, 64 << 10, 4 << 20} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			j := newJob(b, 2)
			body := make([]byte, size)
			b.SetBytes(int64(2 * size))
			for i := 0; i < b.N; i++ {
				for r := 0; r < 2; r++ {
					want := len(j.recs[1-r].frames) + 1
					j.eps[r].Send(1-r, []byte("p"), body, nil)
					for len(j.recs[1-r].frames) < want {
						j.eps[r].Poll()
						j.eps[1-r].Poll()
					}
					j.recs[1-r].frames = j.recs[1-r].frames[:0]
				}
			}
		})
	}
}

// memKVS is a key-value space in memory, shared by in-process "ranks".
type memKVS struct {
	mu sync.Mutex
	m  map[string]string
}

func (k *memKVS) Put(key, v string) error { k.mu.Lock(); k.m[key] = v; k.mu.Unlock(); return nil }
func (k *memKVS) Barrier() error          { return nil }
func (k *memKVS) Get(key string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[key]
	if !ok {
		return "", fmt.Errorf("no key %s", key)
	}
	return v, nil
}

// TestSetup: one host opens nothing; ranks on two hosts publish addresses,
// share rank 0's secret through the key-value space, and reach each other.
func TestSetup(t *testing.T) {
	t.Setenv(EnvSecret, "")
	t.Setenv(EnvAddr, "127.0.0.1")
	kvs := &memKVS{m: map[string]string{}}
	if ep, err := Setup(Job{Rank: 0, Size: 2, Hosts: []int{0, 0}, KVS: kvs, Prefix: "t", Handler: &recorder{}}); ep != nil || err != nil {
		t.Fatalf("one host: %v, %v", ep, err)
	}
	recs := []*recorder{{}, {}}
	var eps []*Endpoint
	for r := 0; r < 2; r++ {
		ep, err := Setup(Job{Rank: r, Size: 2, Hosts: []int{0, 1}, KVS: kvs, Prefix: "t", Handler: recs[r]})
		if err != nil || ep == nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		defer ep.Close()
		eps = append(eps, ep)
	}
	if _, err := eps[1].Send(0, []byte("hello"), []byte("body"), nil); err != nil {
		t.Fatal(err)
	}
	j := &job{eps: eps, recs: recs}
	j.pollUntil(t, "the frame", func() bool { return len(recs[0].frames) == 1 })
	if f := recs[0].frames[0]; f.peer != 1 || string(f.head) != "hello" || f.n != 4 {
		t.Fatalf("got %+v", f)
	}
}

// TestSleeperWakes: an armed sleeper calls wake when a frame arrives.
func TestSleeperWakes(t *testing.T) {
	j := newJob(t, 2)
	woke := make(chan struct{}, 1)
	s := j.eps[0].NewSleeper(func() { woke <- struct{}{} })
	defer s.Stop()
	s.Arm()
	j.eps[1].Send(0, []byte("x"), nil, nil)
	deadline := time.After(30 * time.Second)
	for {
		j.eps[1].Poll() // rank 1's side of the handshake
		select {
		case <-woke:
			return
		case <-deadline:
			t.Fatal("an armed sleeper did not wake for an arriving connection")
		case <-time.After(time.Millisecond):
		}
	}
}

// placer is a recorder that places the body of every frame whose head
// starts with 'P' into dst at the offset the head gives.
type placer struct {
	recorder
	dst []byte
}

func (p *placer) Place(peer int, head []byte, n int) []byte {
	if head[0] != 'P' {
		return nil
	}
	off := int(binary.LittleEndian.Uint32(head[1:]))
	return p.dst[off : off+n]
}

// TestPlaced: bodies a Placer asks for land in its memory (delivered as
// that memory, intact, around frames it does not place and frames too
// small to ask about); the others arrive as before.
func TestPlaced(t *testing.T) {
	j := newJob(t, 2)
	pl := &placer{dst: make([]byte, 8<<20)}
	j.eps[1].cfg.Handler, j.eps[1].placer = pl, pl
	sizes := []int{PlaceMin - 1, PlaceMin, 100 << 10, 5, inCap + 5000, 3 * inCap, PlaceMin + 1}
	want := 0
	off := 0
	var bodies [][]byte
	pl.check = func(peer int, h, body []byte) {
		k := len(pl.frames)
		if !bytes.Equal(body, bodies[k]) {
			t.Fatalf("frame %d (%d bytes) arrived corrupted", k, len(body))
		}
		placed := len(body) > 0 && &body[0] == &pl.dst[binary.LittleEndian.Uint32(h[1:])]
		if placed != (h[0] == 'P' && len(body) >= PlaceMin) {
			t.Fatalf("frame %d (%d bytes, head %q): placed %v", k, len(body), h[0], placed)
		}
	}
	for i, n := range sizes {
		b := make([]byte, n)
		fillBody(b, 0, i)
		bodies = append(bodies, b)
		head := make([]byte, 5)
		head[0] = 'N'
		if i%2 == 1 || n >= inCap {
			head[0] = 'P'
			binary.LittleEndian.PutUint32(head[1:], uint32(off))
			if n >= PlaceMin {
				want++
			}
		}
		if _, err := j.eps[0].Send(1, head, b, nil); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	j.recs[1] = &pl.recorder
	j.pollUntil(t, "every frame", func() bool { return len(pl.frames) == len(sizes) })
	if got := j.eps[1].Counters().Placed; got != int64(want) {
		t.Fatalf("%d frames placed, want %d", got, want)
	}
}

// TestAcceptWhileDirect: an endpoint whose few connections are all open
// reads them directly instead of asking epoll (Poll), yet still accepts a
// new peer: the first Poll after a Wait that saw the connection arrive
// accepts it, and frames from the new peer and the old one both arrive.
func TestAcceptWhileDirect(t *testing.T) {
	j := newJob(t, 3)
	frames := func(r, from int) int {
		n := 0
		for _, f := range j.recs[r].frames {
			if f.peer == from {
				n++
			}
		}
		return n
	}
	// Ranks 0 and 1 connect: rank 0 then polls its one open connection
	// directly.
	j.eps[1].Send(0, []byte("a"), nil, nil)
	j.pollUntil(t, "rank 1's first frame", func() bool { return frames(0, 1) == 1 })
	for i := 0; i < 3*epollEvery; i++ {
		j.eps[0].Poll()
		j.eps[1].Poll()
	}
	if got := len(j.eps[0].ready); got != 1 {
		t.Fatalf("rank 0 has %d open connections, want 1", got)
	}
	accepts := j.eps[0].Counters().Accepts
	// Rank 2 dials rank 0; rank 0 waits until its listening socket is
	// ready, and one Poll then accepts.
	j.eps[2].Send(0, []byte("b"), nil, nil)
	j.eps[0].Wait(30 * time.Second)
	j.eps[0].Poll()
	if got := j.eps[0].Counters().Accepts; got != accepts+1 {
		t.Errorf("the Poll after a Wait that saw a connection arrive accepted %d, want 1", got-accepts)
	}
	j.eps[1].Send(0, []byte("c"), nil, nil)
	j.pollUntil(t, "frames from both peers", func() bool { return frames(0, 2) == 1 && frames(0, 1) == 2 })
}

// TestDirectSleeperWakes: a DirectSleeper's Sleep is ended by a frame
// arriving, with the wire waking the sleeping thread itself (Woken, not
// Relayed), and by the doorbell moving, which its watcher passes on
// (Relayed); a doorbell that moved before the Sleep makes it return at
// once. Each Sleep has a minute's timeout, which only a lost wake-up
// would reach.
func TestDirectSleeperWakes(t *testing.T) {
	j := newJob(t, 2)
	// Connect first, so that the frame below finds an open connection
	// rather than a connection to accept.
	j.eps[1].Send(0, []byte("hello"), nil, nil)
	j.pollUntil(t, "the connection", func() bool { return len(j.recs[0].frames) == 1 })
	var word, sleepers uint32
	s := j.eps[0].NewDirectSleeper(&word, &sleepers)
	defer s.Stop()
	sleep := func(what string, act func()) Counters {
		t.Helper()
		done := make(chan struct{})
		go func() { s.Sleep(atomic.LoadUint32(&word), time.Minute); close(done) }()
		act()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("a DirectSleeper slept through %s", what)
		}
		return j.eps[0].Counters()
	}
	c := sleep("a frame", func() { j.eps[1].Send(0, []byte("x"), nil, nil) })
	if c.Woken < 1 || c.Relayed != 0 {
		t.Fatalf("after a frame: Woken %d, Relayed %d; want the wire to wake the sleeper itself (Woken ≥ 1, Relayed 0)", c.Woken, c.Relayed)
	}
	j.pollUntil(t, "the frame", func() bool { return len(j.recs[0].frames) == 2 })
	ring := func() {
		atomic.AddUint32(&word, 1)
		if atomic.LoadUint32(&sleepers) > 0 {
			_ = shm.FutexWake(&word, 1)
		}
	}
	c = sleep("a doorbell", ring)
	if c.Relayed < 1 {
		t.Fatalf("after a doorbell: Relayed %d; want the watcher to pass it on", c.Relayed)
	}
	seq := atomic.LoadUint32(&word)
	ring()
	s.Sleep(seq, time.Minute) // returns at once: the doorbell moved
}

// SendNow hands frames over only on the XDP wire: to a peer reached over
// TCP it sends nothing and reports false (its caller takes the path that
// waits), and frames sent then with Send arrive in order.
func TestSendNowTCP(t *testing.T) {
	j := newJob(t, 2)
	if ok, err := j.eps[0].SendNow(1, []byte("first"), nil); ok || err != nil {
		t.Fatalf("SendNow over TCP: %v, %v; want false and no error", ok, err)
	}
	for _, h := range []string{"one", "two"} {
		if _, err := j.eps[0].Send(1, []byte(h), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	j.pollUntil(t, "two frames", func() bool { return len(j.recs[1].frames) >= 2 })
	if f := j.recs[1].frames; len(f) != 2 || string(f[0].head) != "one" || string(f[1].head) != "two" {
		t.Fatalf("frames %+v: want one and two only", f)
	}
}
