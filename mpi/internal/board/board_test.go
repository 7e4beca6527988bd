package board

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/internal/shm"
)

// pair makes two members' views of one board segment in this process, as
// two processes would map it.
func pair(t *testing.T) (*Board, *Board) {
	t.Helper()
	m := members(t, 2)
	return m[0], m[1]
}

// members makes n members' views of one board segment in this process.
func members(t *testing.T, n int) []*Board {
	t.Helper()
	seg, err := Export("test-board", n)
	if err != nil {
		t.Fatal(err)
	}
	m := make([]*Board, n)
	for p := range m {
		s := seg
		if p > 0 {
			if s, err = shm.Import(os.Getpid(), seg.FD, seg.Key); err != nil {
				t.Fatal(err)
			}
		}
		if m[p], err = New(s, p, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range m {
		if err := b.Ready(); err != nil {
			t.Fatal(err)
		}
	}
	if err := m[0].CloseFD(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, b := range m {
			b.Close()
		}
	})
	return m
}

// TestPostAndRead: a member's post of round k shows at the other with the
// line and slot data written before it, lines of the two parities apart.
func TestPostAndRead(t *testing.T) {
	a, b := pair(t)
	if ok, err := b.BoardPosted(0, 1); ok || err != nil {
		t.Fatalf("before any post: posted %v err %v", ok, err)
	}
	copy(a.BoardLine(0, 1), "line one")
	copy(a.BoardSlot(0, 1), "slot one")
	a.BoardPost(1, false)
	if ok, err := b.BoardPosted(0, 1); !ok || err != nil {
		t.Fatalf("after post 1: posted %v err %v", ok, err)
	}
	if ok, _ := b.BoardPosted(0, 2); ok {
		t.Fatal("round 2 shows as posted after round 1 only")
	}
	if got := string(b.BoardLine(0, 1)[:8]); got != "line one" {
		t.Errorf("line 1 reads %q", got)
	}
	if got := string(b.BoardSlot(0, 1)[:8]); got != "slot one" {
		t.Errorf("slot 1 reads %q", got)
	}
	if got := b.BoardLine(0, 0)[0]; got != 0 {
		t.Errorf("line 0 was written through line 1: %d", got)
	}
	if !a.BoardReadable() {
		t.Error("a process cannot read its own memory")
	}
}

// TestWakeOnRoundComplete: a member asleep with its flag up wakes when the
// post that completes the round it waits for comes.
func TestWakeOnRoundComplete(t *testing.T) {
	a, b := pair(t)
	var woke atomic.Bool
	done := make(chan struct{})
	b.BoardPost(1, false) // b has posted; it waits for a
	go func() {
		defer close(done)
		b.BoardWaiting(true)
		for {
			bell := b.Bell()
			if ok, _ := b.BoardPosted(0, 1); ok {
				break
			}
			b.Sleep(bell, 10*time.Second)
		}
		b.BoardWaiting(false)
		woke.Store(true)
	}()
	for atomic.LoadUint32(b.flag(1, 1)) == 0 {
		time.Sleep(time.Millisecond) // until b has raised its flag
	}
	t0 := time.Now()
	a.BoardPost(1, false)
	<-done
	if d := time.Since(t0); !woke.Load() || d > 5*time.Second {
		t.Fatalf("woke %v after %v", woke.Load(), d)
	}
}

// TestOneRingWakesAll: the post that completes a round wakes every member
// asleep on it with one ring of the board's doorbell (one system call),
// not one per sleeper.
func TestOneRingWakesAll(t *testing.T) {
	const n = 4
	m := members(t, n)
	var wg sync.WaitGroup
	for p := 1; p < n; p++ {
		m[p].BoardPost(1, false)
		m[p].BoardWaiting(true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				bell := m[p].Bell()
				if ok, _ := m[p].BoardPosted(0, 1); ok {
					break
				}
				m[p].Sleep(bell, 10*time.Second)
			}
			m[p].BoardWaiting(false)
		}()
	}
	before := m[0].Bell()
	t0 := time.Now()
	m[0].BoardPost(1, false)
	wg.Wait()
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("the sleepers woke after %v", d)
	}
	if rings := m[0].Bell() - before; rings != 1 {
		t.Fatalf("the completing post rang the doorbell %d times, want once for %d sleepers", rings, n-1)
	}
}

// TestGoneMember: a wait on a member whose process has exited fails
// within livenessLooks looks.
func TestGoneMember(t *testing.T) {
	a, _ := pair(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	a.pids[1] = cmd.Process.Pid // reaped: kill(pid, 0) fails
	for i := 0; i <= livenessLooks; i++ {
		if ok, err := a.BoardPosted(1, 1); ok {
			t.Fatal("a gone member's round shows as posted")
		} else if err != nil {
			return
		}
	}
	t.Fatalf("no error after %d looks at a gone member", livenessLooks+1)
}

// TestLinesShareAPage: the lines a wait for every member's post reads lie
// in one page for 16 members (a waiter whose TLB a context switch emptied
// misses once, not once per member), each member's pair of lines is
// 128-byte aligned in the mapping (an adjacent-line prefetch stays within
// one member's lines), and nothing a member writes overlaps another's:
// every line, identity line and slot is disjoint, the slots a header past
// a page boundary (not 4 KiB-aliased with page-aligned user buffers),
// and no two members' slots 64 KiB-aligned to each other (the same offset
// in each, read one member after another, would share a cache set).
func TestLinesShareAPage(t *testing.T) {
	const n = 16
	m := members(t, n)
	b := m[0]
	base := uintptr(unsafe.Pointer(&b.seg.Mem[0]))
	addr := func(s []byte) uintptr { return uintptr(unsafe.Pointer(&s[0])) }
	firstPage := (addr(b.BoardLine(0, 0)) - uintptr(dataOff)) / pageSize
	type span struct {
		what   string
		lo, hi uintptr
	}
	var spans []span
	for p := range n {
		for i := range 2 {
			a := addr(b.BoardLine(p, i)) - uintptr(dataOff)
			if a/pageSize != firstPage {
				t.Errorf("member %d's line %d lies in page %d of the mapping, member 0's in page %d", p, i, (a-base)/pageSize, (firstPage*pageSize-base)/pageSize)
			}
			if i == 0 && (a-base)%(2*lineSize) != 0 {
				t.Errorf("member %d's lines start at offset %d of the mapping, not 128-byte aligned", p, a-base)
			}
			spans = append(spans, span{fmt.Sprintf("line %d of %d", i, p), a, a + lineSize})
			s := addr(b.BoardSlot(p, i))
			if (s-base)%pageSize != shm.HeaderSize%pageSize || s%lineSize != 0 {
				t.Errorf("member %d's slot %d starts at offset %d of the mapping, not %d past a page boundary", p, i, s-base, shm.HeaderSize)
			}
			spans = append(spans, span{fmt.Sprintf("slot %d of %d", i, p), s, s + SlotSize})
		}
		id := uintptr(unsafe.Pointer(&b.mem[b.ident(p)]))
		spans = append(spans, span{fmt.Sprintf("identity of %d", p), id, id + lineSize})
	}
	for p := range n {
		for q := range p {
			if d := addr(b.BoardSlot(p, 0)) - addr(b.BoardSlot(q, 0)); d%(64<<10) == 0 {
				t.Errorf("members %d's and %d's slots lie %d bytes apart, a multiple of 64 KiB", p, q, d)
			}
		}
	}
	bell := uintptr(unsafe.Pointer(b.bell()))
	spans = append(spans, span{"doorbell", bell, bell + lineSize})
	rel := addr(b.ReleaseData()) - relDataOff
	spans = append(spans, span{"release line", rel, rel + lineSize})
	if arrive := uintptr(unsafe.Pointer(u64(b.mem, offArrive))); arrive < bell || arrive+8 > bell+lineSize || arrive%8 != 0 {
		t.Errorf("the arrival count at offset %d is not an aligned word of the doorbell's line", arrive-base)
	}
	for i, x := range spans {
		if x.lo < base+shm.HeaderSize || x.hi > base+uintptr(len(b.seg.Mem)) {
			t.Errorf("%s lies outside the board [%d, %d)", x.what, x.lo-base, x.hi-base)
		}
		for _, y := range spans[:i] {
			if x.lo < y.hi && y.lo < x.hi {
				t.Errorf("%s [%d, %d) overlaps %s [%d, %d)", x.what, x.lo-base, x.hi-base, y.what, y.lo-base, y.hi-base)
			}
		}
	}
}

// TestArriveOneLast: of n members arriving at once at a round, exactly one
// learns that it completes it, and only once all n have arrived, round
// after round; a round that some members left (an error) leaves no count
// for the next. Every member then sees the release and its data.
func TestArriveOneLast(t *testing.T) {
	const n = 5
	m := members(t, n)
	k := uint64(0)
	for range 300 {
		k++
		var lasts, arrived atomic.Int32
		var wg sync.WaitGroup
		for p := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m[p].PostQuiet(k)
				arrived.Add(1)
				if !m[p].Arrive(k) {
					for ok, _ := m[p].Released(k); !ok; ok, _ = m[p].Released(k) {
						runtime.Gosched()
					}
					ok, st := m[p].Released(k)
					if got := m[p].ReleaseData()[0]; !ok || st != 7 || got != byte(k) {
						t.Errorf("round %d, member %d: released %v status %d data %d, want status 7 data %d", k, p, ok, st, got, byte(k))
					}
					return
				}
				lasts.Add(1)
				// Every member adds to arrived before its Arrive.
				if got := arrived.Load(); got != n {
					t.Errorf("round %d: member %d completed the round with %d of %d arrived", k, p, got, n)
				}
				for q := range n {
					if ok, _ := m[p].BoardPosted(q, k); !ok {
						t.Errorf("round %d: member %d completed it before member %d posted", k, p, q)
					}
				}
				m[p].ReleaseData()[0] = byte(k)
				m[p].Release(k, 7)
			}()
		}
		wg.Wait()
		if got := lasts.Load(); got != 1 {
			t.Fatalf("round %d: %d members completed it, want 1", k, got)
		}
		if k%50 == 0 {
			// A round that n-1 members reached and one never did.
			k++
			for p := range n - 1 {
				if m[p].Arrive(k) {
					t.Fatalf("round %d completed with %d of %d members", k, p+1, n)
				}
			}
		}
	}
}

// TestReleaseWakesSleeper: a member asleep on the doorbell with its flag
// up wakes at the release of the round it waits for.
func TestReleaseWakesSleeper(t *testing.T) {
	a, b := pair(t)
	done := make(chan struct{})
	b.BoardWaiting(true)
	go func() {
		defer close(done)
		for {
			bell := b.Bell()
			if ok, _ := b.Released(1); ok {
				break
			}
			b.Sleep(bell, 10*time.Second)
		}
		b.BoardWaiting(false)
	}()
	before := a.Bell()
	t0 := time.Now()
	a.Release(1, 1)
	<-done
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("the sleeper woke after %v", d)
	}
	if a.Bell() == before {
		t.Fatal("the release did not ring the doorbell with a member's flag up")
	}
}
