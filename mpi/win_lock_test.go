package mpi

import (
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/shm"
)

// TestWinLockCounters: the lock's words hold more than 2³² shared tickets
// without the shared count carrying into the exclusive one (a shared
// locker after the carry waited for an exclusive count that never came:
// beside a long-held shared lock, forever), and the exclusive count wraps
// around its field with turns still granted in order.
func TestWinLockCounters(t *testing.T) {
	var mu, rel, sleepers uint32
	var req, done uint64
	c := &winCtl{mu: &mu, rel: &rel, sleepers: &sleepers, req: &req, done: &done}

	req, done = 1<<32-1, 1<<32-1 // 2³²-1 shared locks taken and released
	held := c.ticket(LockShared)
	next := c.ticket(LockShared)
	if !c.turn(LockShared, held) || !c.turn(LockShared, next) {
		t.Fatalf("after 2³² shared locks a shared lock is not granted beside a held one (req %#x, done %#x)", req, done)
	}
	c.release(LockShared)
	c.release(LockShared)

	req, done = ^uint64(exclTicket-1), ^uint64(exclTicket-1) // the exclusive field full
	x := c.ticket(LockExclusive)
	if !c.turn(LockExclusive, x) {
		t.Fatal("an exclusive lock is not granted on a free lock whose exclusive count is about to wrap")
	}
	s := c.ticket(LockShared)
	if c.turn(LockShared, s) {
		t.Fatal("a shared lock is granted beside an exclusive one across the exclusive count's wrap")
	}
	c.release(LockExclusive)
	if !c.turn(LockShared, s) {
		t.Fatalf("a shared lock is not granted after the exclusive count wrapped (req %#x, done %#x, ticket %#x)", req, done, s)
	}
	x2 := c.ticket(LockExclusive)
	if c.turn(LockExclusive, x2) {
		t.Fatal("an exclusive lock is granted while a shared one is held, after the wrap")
	}
	c.release(LockShared)
	if !c.turn(LockExclusive, x2) {
		t.Fatal("an exclusive lock is not granted once the shared one is released, after the wrap")
	}
}

// TestWinLockFair: a shared lock asked for after an exclusive one that
// waits behind a shared holder is not granted before the exclusive one (a
// stream of shared lockers cannot starve an exclusive locker), while
// shared lockers with no exclusive one between them share the lock.
func TestWinLockFair(t *testing.T) {
	seg, err := shm.Export("adimpi-test-winctl", ctlSize)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	c := ctlOf(seg)

	a := c.ticket(LockShared)
	if !c.turn(LockShared, a) {
		t.Fatal("the first shared lock is not granted on a free lock")
	}
	a2 := c.ticket(LockShared)
	if !c.turn(LockShared, a2) {
		t.Fatal("a second shared lock is not granted beside the first")
	}
	x := c.ticket(LockExclusive)
	if c.turn(LockExclusive, x) {
		t.Fatal("an exclusive lock is granted while shared locks are held")
	}
	b := c.ticket(LockShared)
	if c.turn(LockShared, b) {
		t.Fatal("a shared lock asked for after a waiting exclusive one is granted before it: shared lockers can starve exclusive ones")
	}
	c.release(LockShared)
	if c.turn(LockExclusive, x) {
		t.Fatal("an exclusive lock is granted while one shared lock is still held")
	}
	c.release(LockShared)
	if !c.turn(LockExclusive, x) {
		t.Fatal("the exclusive lock is not granted once the shared holders released")
	}
	if c.turn(LockShared, b) {
		t.Fatal("a shared lock is granted while the exclusive lock is held")
	}
	x2 := c.ticket(LockExclusive)
	c.release(LockExclusive)
	if !c.turn(LockShared, b) {
		t.Fatal("the shared lock is not granted after the exclusive one before it released")
	}
	if c.turn(LockExclusive, x2) {
		t.Fatal("a second exclusive lock is granted while a shared one is held")
	}
	c.release(LockShared)
	if !c.turn(LockExclusive, x2) {
		t.Fatal("the second exclusive lock is not granted on a free lock")
	}
	c.release(LockExclusive)
}

// rmDevice is a device with remote memory access (the rest of adi.Device
// is never called).
type rmDevice struct{ adi.Device }

func (rmDevice) RemoteAccess(int) bool                          { return true }
func (rmDevice) ExposeMemory([]byte) (uint64, error)            { return 0, nil }
func (rmDevice) UnexposeMemory(uint64) error                    { return nil }
func (rmDevice) RemoteWrite(int, uint64, uintptr, []byte) error { return nil }
func (rmDevice) RemoteRead(int, uint64, uintptr, []byte) error  { return nil }

// TestRemoteMemoryUnderJoin: windows find the device's remote memory
// access under the core's wrapper for communicators across jobs, which
// does not itself implement adi.RemoteMemory.
func TestRemoteMemoryUnderJoin(t *testing.T) {
	r := &runtime{}
	r.dev, r.short, r.join = wrapJoin(r, rmDevice{}, nil)
	if remoteMemory(r) == nil {
		t.Fatal("a device with adi.RemoteMemory under the join wrapper is not seen as having it: Put and Get on WinCreate windows lose the device's remote write")
	}
}

// TestSleepBoundWhileLockWaits: while an agent of this process holds a
// lock request of another host, whose turn comes with a release that rings
// no doorbell, a waiter sleeps at most rmaNap; otherwise as long as asked.
func TestSleepBoundWhileLockWaits(t *testing.T) {
	const long = 100 * time.Millisecond
	if got := sleepBound(long); got != long {
		t.Fatalf("no lock request waits, yet a sleep of %v is cut to %v", long, got)
	}
	lockWaits.Add(1)
	defer lockWaits.Add(-1)
	if got := sleepBound(long); got > rmaNap {
		t.Fatalf("an agent waits for a lock turn, yet a waiter may sleep %v (more than %v): the grant waits for the sleep's timeout", got, rmaNap)
	}
}
