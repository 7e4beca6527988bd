package wire

import (
	"math"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/internal/shm"
)

// Sleeper lets a device whose waiters sleep on its own futex wake them for
// the network too: while a waiter is armed, a goroutine sleeps in epoll on
// the endpoint's sockets and calls wake (which bumps the device's sequence
// word and wakes its futex) when one has something to do. Nothing runs on
// the path of a message while no waiter sleeps.
type Sleeper struct {
	ep   *Endpoint
	wake func()
	arm  chan struct{}
	stop chan struct{}
	done chan struct{}
}

// NewSleeper starts the goroutine; Stop ends it.
func (e *Endpoint) NewSleeper(wake func()) *Sleeper {
	s := &Sleeper{ep: e, wake: wake, arm: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

// Arm tells the goroutine that a waiter is about to sleep: the next socket
// event (or one already pending) calls wake once.
func (s *Sleeper) Arm() {
	select {
	case s.arm <- struct{}{}:
	default:
	}
}

// Stop ends the goroutine and waits for it.
func (s *Sleeper) Stop() {
	close(s.stop)
	s.ep.Wake()
	<-s.done
}

func (s *Sleeper) run() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.arm:
		}
		s.ep.Wait(time.Second)
		select {
		case <-s.stop:
			return
		default:
		}
		s.ep.relayed.Add(1)
		s.wake()
	}
}

// DirectSleeper is the other arrangement, for a process none of whose peers
// shares its host: the waiter sleeps in the endpoint itself, so that a
// frame wakes the sleeping thread with no goroutine in between (a Sleeper
// costs a wake-up of its goroutine to arm it, one of its thread when the
// frame comes and one of the waiter's from there, and under load each
// waits for a CPU). The device's doorbell word, which then only this
// process rings (a send to itself, the device's Wake), is watched by a
// goroutine parked on its futex that passes every move on to Wake.
type DirectSleeper struct {
	ep       *Endpoint
	word     *uint32
	sleepers *uint32
	stop     atomic.Bool
	done     chan struct{}
}

// NewDirectSleeper starts the watcher of word, a doorbell rung by bumping
// it and waking its futex when *sleepers > 0 (the watcher counts itself
// in sleepers while it runs); Stop ends it.
func (e *Endpoint) NewDirectSleeper(word, sleepers *uint32) *DirectSleeper {
	s := &DirectSleeper{ep: e, word: word, sleepers: sleepers, done: make(chan struct{})}
	atomic.AddUint32(sleepers, 1)
	go s.watch(atomic.LoadUint32(word))
	return s
}

// Sleep waits until a socket of the endpoint has something to do, the
// doorbell moves from seq, or d passes.
func (s *DirectSleeper) Sleep(seq uint32, d time.Duration) {
	if atomic.LoadUint32(s.word) != seq {
		return
	}
	var evs [4]unix.EpollEvent
	if s.ep.wait(d, evs[:]) {
		s.ep.woken.Add(1)
	}
}

// Stop ends the watcher and waits for it.
func (s *DirectSleeper) Stop() {
	s.stop.Store(true)
	atomic.AddUint32(s.word, 1)
	_ = shm.FutexWake(s.word, math.MaxInt32)
	<-s.done
}

// watch calls Wake after every move of the word from last: a move between
// its read and the next futex wait makes that wait return at once.
func (s *DirectSleeper) watch(last uint32) {
	defer close(s.done)
	defer atomic.AddUint32(s.sleepers, ^uint32(0))
	for !s.stop.Load() {
		_ = shm.FutexWait(s.word, last, time.Second)
		if cur := atomic.LoadUint32(s.word); cur != last && !s.stop.Load() {
			last = cur
			s.ep.relayed.Add(1)
			s.ep.Wake()
		}
	}
}
