package board

import (
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
