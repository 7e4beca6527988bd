//go:build amd64 && !race

package mpi

import (
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/internal/order"
)

// devLock is the runtime's lock around every call into the device (r.mu),
// which every message takes at least once. sync.Mutex's Unlock is an
// atomic add, which on amd64 waits until every store of the critical
// section has reached the cache (the request set up, the ring slot
// written); devLock's Unlock is a release store, which does not wait.
// Lock is a compare-and-swap as sync.Mutex's. A release store cannot see
// whether anybody waits, so a waiter never sleeps on the lock: the first
// one spins on it (yielding the CPU, then sleeping in growing steps,
// while it stays taken), the others queue behind it on a sync.Mutex.
// Holds are short (a device call), and contention needs a program
// calling MPI from several goroutines at once.
type devLock struct {
	state uint32     // 1: taken
	queue sync.Mutex // waiters after the first
}

// Lock takes the lock.
func (l *devLock) Lock() {
	if atomic.CompareAndSwapUint32(&l.state, 0, 1) {
		return
	}
	l.lockSlow()
}

// Unlock releases the lock (taken by any goroutine, as sync.Mutex's).
func (l *devLock) Unlock() { order.StoreRelease32(&l.state, 0) }

// lockSlow waits for the lock: a short spin, then yields to other
// goroutines and processes, then sleeps of 1 µs doubling to 1 ms.
func (l *devLock) lockSlow() {
	l.queue.Lock()
	defer l.queue.Unlock()
	nap := time.Microsecond
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
			time.Sleep(nap)
			nap = min(2*nap, time.Millisecond)
		}
	}
}
