package via

import (
	"sync/atomic"
	"time"
)

// With one Go processor (GOMAXPROCS 1, the runtime's default for a process
// bound to one CPU, as batch systems bind ranks) the application's waiter
// must not hand the network to the engine and sleep in the futex, as Sleep
// otherwise does: a goroutine blocked in a system call keeps the only
// processor until the runtime's monitor takes it back, which it does late
// (up to 10 ms) once it has had nothing to do for a while, and the engine
// that would receive the frame ending the sleep waits for that processor.
// Ranks on two one-CPU hosts stalled so for milliseconds now and then and
// ran a ping-pong at twice its latency. Such a waiter sleeps in the network
// port's epoll instead, which a frame from another host or a doorbell of
// this process ends, and counts as assisting, so that the engine stays in
// its assisted sleep. A peer on this host rings the futex, which that
// sleep does not see: it lasts at most portNap. (A second Go processor
// instead let the engine's thread take turns with the application's on
// the one CPU, which halved a 4 MiB stream.)

// portNap bounds a sleep on the port: the delay a ring from a peer on this
// host may see, and shorter than assistedFor, so that the engine's
// assisted sleep outlasts it.
const portNap = assistedFor / 2

// sleepOnPort is Sleep for a process with one Go processor and a network
// port.
func (n *NIC) sleepOnPort(port *netPort, seq uint32, timeout time.Duration) {
	d := portNap
	if timeout > 0 {
		d = min(d, timeout)
	}
	n.eng.lastAssist.Store(time.Now().UnixNano())
	sl := n.self.u32(offAppSleep)
	atomic.AddUint32(sl, 1)
	if !n.completed() && atomic.LoadUint32(n.self.u32(offAppBell)) == seq {
		n.cnt.portSleeps.Add(1)
		port.app.Wait(d)
	}
	atomic.AddUint32(sl, ^uint32(0))
}
