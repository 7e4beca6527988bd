package wire

import "time"

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
		s.wake()
	}
}
