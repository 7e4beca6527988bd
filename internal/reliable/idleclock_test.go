package reliable

import (
	"encoding/binary"
	"testing"
	"time"
)

// idleNow brings a to an idle turn that has just read the clock, then
// dates that reading 1 (long ago) and sets the next timer to due, so that
// what the following turns compare with shows whether they read the clock.
func idleNow(t *testing.T, a *Transport, due int64) {
	t.Helper()
	for i := 0; !a.idle || a.stale != idleReads-1; i++ {
		if i > 10*idleReads {
			t.Fatalf("no idle turn that read the clock: idle %v, stale %d", a.idle, a.stale)
		}
		a.Poll()
	}
	a.now = 1
	a.deadline.Store(due)
}

// TestIdleTurnsReuseClock: of idleReads idle turns one reads the clock;
// the others compare the next timer with the last reading, so a timer due
// since that reading fires at the latest idleReads-1 turns late, and the
// turns that reuse the reading do not fire it.
func TestIdleTurnsReuseClock(t *testing.T) {
	a, _, _, _, _, _ := pair(t, 0, 0, 0, 1)
	idleNow(t, a, 2) // due just after the reading
	for i := range idleReads - 1 {
		a.Poll()
		if a.now != 1 || a.deadline.Load() != 2 {
			t.Fatalf("idle turn %d read the clock (now %d) or ran the timers (next %d)", i+1, a.now, a.deadline.Load())
		}
	}
	a.Poll()
	if a.now <= 2 || a.deadline.Load() == 2 {
		t.Fatalf("turn %d still compares with the old reading (now %d, next %d)", idleReads, a.now, a.deadline.Load())
	}
}

// TestFreshClockAfterSleepTickAndFrame: the turn after Refresh (the wire
// calls it after a sleep), a Tick, and a turn that takes a frame in read
// the clock, whatever the idle turns before them read.
func TestFreshClockAfterSleepTickAndFrame(t *testing.T) {
	a, b, _, _, ab, ba := pair(t, 0, 0, 0, 1)
	ab.full, ba.full = 0, 0

	idleNow(t, a, 2)
	a.Refresh()
	a.Poll()
	if a.now <= 2 || a.deadline.Load() == 2 {
		t.Fatalf("the turn after Refresh compared with the old reading (now %d)", a.now)
	}

	idleNow(t, a, 2)
	a.Tick()
	if a.now <= 2 {
		t.Fatalf("Tick compared with the old reading (now %d)", a.now)
	}

	// Rank 1's second message, once the first made rank 0 know it.
	far := clock() + at(time.Hour)
	for i := range 2 {
		if i == 1 {
			idleNow(t, a, far)
		}
		head := make([]byte, 8)
		binary.LittleEndian.PutUint64(head, uint64(i))
		if ok, err := b.Send(0, head, content(1, i), nil); err != nil || !ok {
			t.Fatalf("Send: %v %v", ok, err)
		}
		if len(ba.q) == 0 {
			t.Fatal("the frame did not reach the pipe")
		}
		a.Poll()
	}
	if p := a.peers[1]; p == nil || p.heard <= 2 || a.now <= 2 {
		t.Fatal("a turn that took a frame in dated it with the old reading")
	}
}
