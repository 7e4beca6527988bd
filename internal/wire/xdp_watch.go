package wire

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// watch puts a socket in an epoll set only while a waiter sleeps there.
//
// A socket in an epoll set carries a wait-queue entry, and every frame the
// kernel puts on an AF_XDP socket's RX ring then runs epoll's callback
// (locks taken with interrupts off, the ready list) — in copy mode inside
// the sending host's kick, on the path of every message (docs/xdp.md has
// the measurement). A rank that spins
// on the rings needs no callback, so the socket joins the set when a
// waiter is about to sleep (sleep) and leaves it at the next idle poll
// after the last waiter woke (idle), off the path of a message. Joining
// reports the socket ready if a frame came meanwhile, so no wake-up is
// lost between the last poll and the sleep.
type watch struct {
	ep, fd   int
	mu       sync.Mutex
	sleepers int         // waiters between sleep and wake
	in       atomic.Bool // the socket is in the set
}

// sleep is called by a waiter before it sleeps in the set; false means the
// socket could not join it (the waiter should not sleep long). Every call
// is paired with wake.
func (w *watch) sleep() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sleepers++
	if w.in.Load() {
		return true
	}
	if err := unix.EpollCtl(w.ep, unix.EPOLL_CTL_ADD, w.fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(w.fd)}); err != nil {
		return false
	}
	w.in.Store(true)
	return true
}

// wake is called by a waiter when its sleep ended.
func (w *watch) wake() {
	w.mu.Lock()
	w.sleepers--
	w.mu.Unlock()
}

// idle takes the socket out of the set if it is in it and no waiter
// sleeps: the poller calls it when a poll found nothing, so that the
// syscall is not on the path of a message. It costs a load otherwise.
func (w *watch) idle() {
	if !w.in.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sleepers == 0 && w.in.Load() {
		_ = unix.EpollCtl(w.ep, unix.EPOLL_CTL_DEL, w.fd, nil)
		w.in.Store(false)
	}
}
