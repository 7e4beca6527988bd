//go:build amd64 && !race

package mpi

import (
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/internal/order"
)

// devLock is the runtime's lock around every call into the device (r.mu),
// which every message takes at least once. sync.Mutex's Unlock is an
// atomic add, which on amd64 waits until every store of the critical
// section has reached the cache (the request set up, the ring slot
// written); devLock's Unlock is a release store, which does not wait,
// followed by a plain load of the count of sleeping waiters, which is
// zero unless the lock is contended: only then does Unlock wake one
// (futex). Lock is a compare-and-swap as sync.Mutex's. The first waiter
// spins on the lock, yields the CPU, then sleeps on the state word's
// futex until an Unlock wakes it; the others queue behind it on a
// sync.Mutex. Holds are short (a device call), and contention needs a
// program calling MPI from several goroutines at once (THREAD_MULTIPLE,
// or the runtime's own goroutines beside the program's).
//
// A release store is not a fence: Unlock's load of sleepers may run
// before its store of state is seen, and a waiter that announced itself
// just then and read state as still taken would sleep with nobody to wake
// it. So the waiter, after announcing itself, fences every thread of the
// process at once (membarrier: each CPU running one of them drains its
// stores): an Unlock whose store it then still cannot see will load the
// announcement. Where membarrier is missing, the sleep's bound
// (devLockNap) is the backstop: that rare case costs one nap, where
// without the wake-up every contended Lock cost one.
type devLock struct {
	state    uint32     // 1: taken; the futex a sleeping waiter waits on
	sleepers uint32     // waiters asleep on state, or about to be
	queue    sync.Mutex // waiters after the first
	timeouts uint32     // sleeps that ended by their bound, not a wake-up (tests)
}

// devLockNap bounds one sleep of a waiter: the backstop for a wake-up that
// the fence-less Unlock missed (see devLock). A variable for the tests.
var devLockNap = time.Millisecond

// Lock takes the lock.
func (l *devLock) Lock() {
	if atomic.CompareAndSwapUint32(&l.state, 0, 1) {
		return
	}
	l.lockSlow()
}

// Unlock releases the lock (taken by any goroutine, as sync.Mutex's) and
// wakes a waiter if one sleeps.
func (l *devLock) Unlock() {
	order.StoreRelease32(&l.state, 0)
	if atomic.LoadUint32(&l.sleepers) != 0 { // a plain load on amd64
		futex(&l.state, futexWakePrivate, 1, nil)
	}
}

// lockSlow waits for the lock: a short spin, then yields to other
// goroutines and processes, then sleeps on the futex until Unlock wakes it.
func (l *devLock) lockSlow() {
	l.queue.Lock()
	defer l.queue.Unlock()
	for i := 0; ; i++ {
		if atomic.LoadUint32(&l.state) == 0 && atomic.CompareAndSwapUint32(&l.state, 0, 1) {
			return
		}
		switch {
		case i < 64:
		case i < 1024:
			if i%16 == 0 {
				osYield()
			} else {
				goruntime.Gosched()
			}
		default:
			l.sleep()
		}
	}
}

// sleep waits on the futex while the lock is taken, until an Unlock wakes
// it or devLockNap passes. The announcement comes before the process-wide
// fence and the kernel's look at state (see devLock).
func (l *devLock) sleep() {
	atomic.AddUint32(&l.sleepers, 1)
	if fenceOK() {
		unix.Syscall(unix.SYS_MEMBARRIER, membarrierPrivateExpedited, 0, 0)
	}
	ts := unix.NsecToTimespec(devLockNap.Nanoseconds())
	if futex(&l.state, futexWaitPrivate, 1, &ts) == unix.ETIMEDOUT {
		atomic.AddUint32(&l.timeouts, 1)
	}
	atomic.AddUint32(&l.sleepers, ^uint32(0))
}

// membarrier commands (linux/membarrier.h).
const (
	membarrierQuery                    = 0
	membarrierPrivateExpedited         = 1 << 3
	membarrierRegisterPrivateExpedited = 1 << 4
)

// fenceOK reports whether this process may fence all its threads with
// membarrier, registering it for that on the first call.
var fenceOK = sync.OnceValue(func() bool {
	cmds, _, e := unix.Syscall(unix.SYS_MEMBARRIER, membarrierQuery, 0, 0)
	if e != 0 || cmds&membarrierPrivateExpedited == 0 {
		return false
	}
	_, _, e = unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterPrivateExpedited, 0, 0)
	return e == 0
})

// Futex operations on memory private to this process (linux/futex.h).
const (
	futexWaitPrivate = 0 | 128
	futexWakePrivate = 1 | 128
)

// futex is the futex system call: FUTEX_WAIT sleeps while *addr == val
// (for at most ts), FUTEX_WAKE wakes up to val sleepers.
func futex(addr *uint32, op, val uintptr, ts *unix.Timespec) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), op, val, uintptr(unsafe.Pointer(ts)), 0, 0)
	return e
}
