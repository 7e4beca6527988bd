package dmcs

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/adimpi/adimpi/internal/shm"
	"github.com/adimpi/adimpi/mpi"
)

// spinNs is how long a waiter polls before it starts to yield the CPU
// between polls, and yieldNs how long it then polls and yields before it
// sleeps on its doorbell. Sleeping costs a wake-up (a futex syscall for
// the waker, scheduling latency for the sleeper), so it waits for a gap
// longer than a request's round trip.
const (
	spinNs  = 20_000
	yieldNs = 50_000
)

// force rings the bell whether or not anyone sleeps: for conditions the
// sleeper checks beside the rings (a stop, a message, a finished MPI wait).
func (b *inbox) force() {
	atomic.AddUint32(b.bell, 1)
	if atomic.LoadUint32(b.sleepers) != 0 {
		_ = shm.FutexWake(b.bell, 1<<30)
	}
}

// wakeAll rings the bell and wakes whoever sleeps on it, counted or not
// (the parked poll thread).
func (b *inbox) wakeAll() {
	atomic.AddUint32(b.bell, 1)
	_ = shm.FutexWake(b.bell, 1<<30)
}

// privateInbox is a doorbell of this process alone (DMCS without shared
// memory): only its own watcher and Close ring it.
func privateInbox() *inbox {
	m := make([]uint64, 2*line/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&m[0])), 2*line)
	return &inbox{mem: mem, bell: (*uint32)(unsafe.Pointer(&mem[0])), sleepers: (*uint32)(unsafe.Pointer(&mem[line]))}
}

// pollOnce serves what has arrived: every ring up to its tail as it finds
// it, the message from another host the watcher holds, requests kept for
// handlers registered since; and it moves queued records into rings that
// have room again. Called with pollMu held; it returns how many requests
// it served.
func (d *DMCS) pollOnce() (int, error) {
	n := 0
	if s := d.shm; s != nil {
		s.flush()
		for _, r := range s.in {
			if atomic.LoadUint64(r.tail) == r.pos {
				continue
			}
			k, err := d.serveRing(r, 1<<30)
			n += k
			if err != nil {
				return n, err
			}
		}
	}
	if d.remote {
		var st mpi.Status
		var got bool
		var err error
		switch {
		case d.armed && d.p2pReady.Load():
			d.armed = false
			d.p2pReady.Store(false)
			st, got, err = d.p2pSt, true, d.p2pErr
		case !d.armed:
			m0 := d.clk.now()
			st, got, err = d.rreq.Test()
			d.clk.mpi.Add(d.clk.now() - m0)
		}
		if got || err != nil {
			n++
			if err := d.serveP2P(st, err); err != nil {
				return n, err
			}
		}
	}
	d.mu.Lock()
	kept := len(d.deferred) > 0
	d.mu.Unlock()
	if kept {
		d.runDeferred()
	}
	return n, nil
}

// serveP2P serves the message the posted receive got and posts the next.
func (d *DMCS) serveP2P(st mpi.Status, err error) error {
	if err == nil {
		h := &d.hdr
		h.get(d.rbuf)
		var payload []byte
		if h.flags&flagSeparate == 0 {
			payload = d.rbuf[hdrLen : hdrLen+int(h.n)]
		}
		err = d.handle(h, st.Source, payload)
	}
	m0 := d.clk.now()
	perr := d.post()
	d.clk.mpi.Add(d.clk.now() - m0)
	if err != nil {
		return err
	}
	return perr
}

// watch waits, each time the poll arms it, for the posted receive in MPI
// and hands the message to the poll, ringing this process's bell; it ends
// when Close stops it.
func (d *DMCS) watch() {
	defer close(d.watchDone)
	for range d.arm {
		st, err := d.rreq.Wait()
		if d.stop.Load() {
			return
		}
		d.p2pSt, d.p2pErr = st, err
		d.p2pReady.Store(true)
		d.me.force()
	}
}

// armWatcher has the watcher wait for the posted receive while this
// process sleeps (under pollMu).
func (d *DMCS) armWatcher() {
	if d.remote && !d.armed {
		d.armed = true
		d.arm <- struct{}{}
	}
}

// ready reports whether a poll would find something to do.
func (d *DMCS) ready() bool {
	if d.p2pReady.Load() || d.stop.Load() {
		return true
	}
	if s := d.shm; s != nil && s.pending() {
		return true
	}
	d.mu.Lock()
	kept := len(d.deferred) > 0 && int(d.deferred[0].h) < len(d.handlers)
	d.mu.Unlock()
	return kept
}

// waitLoop serves requests until done holds: it polls for d.spin, polls
// and yields the CPU for d.yield more, then sleeps on the doorbell, which
// every sender to this process rings when it finds it asleep. Called with
// pollMu held.
func (d *DMCS) waitLoop(done func() bool) error {
	var idleSince int64
	for i := 0; ; i++ {
		if done() {
			return nil
		}
		n, err := d.pollOnce()
		if err != nil {
			return err
		}
		if n > 0 {
			idleSince = 0
			continue
		}
		if i&15 != 0 {
			continue
		}
		now := nanotime()
		if idleSince == 0 {
			idleSince = now
		}
		idle := now - idleSince
		if idle < d.spin {
			continue
		}
		if idle < d.spin+d.yield {
			runtime.Gosched()
			osYield()
			continue
		}
		if err := d.sleep(done); err != nil {
			return err
		}
		idleSince = 0
	}
}

// sleep sleeps on the doorbell unless there is work or done holds. With
// MPI sends of this process still in flight it wakes now and then to
// drive them (their protocol may need this process's progress), as it
// does while its records wait for room in a ring.
func (d *DMCS) sleep(done func() bool) error {
	b := d.me
	seq := atomic.LoadUint32(b.bell)
	atomic.AddUint32(b.sleepers, 1)
	defer atomic.AddUint32(b.sleepers, ^uint32(0))
	if done() || d.ready() {
		return nil
	}
	d.armWatcher()
	// Records queued for want of room: a reader that freed room before
	// this process announced its sleep did not ring; look again.
	if d.shm != nil && d.shm.flush() {
		return nil
	}
	d.mu.Lock()
	inFlight := len(d.sends) > 0
	if inFlight {
		d.clk.mpi.Add(d.reap())
		inFlight = len(d.sends) > 0
	}
	err := d.err
	d.mu.Unlock()
	if err != nil {
		return err
	}
	var timeout time.Duration
	if inFlight {
		timeout = 200 * time.Microsecond
	}
	return shm.FutexWait(b.bell, seq, timeout)
}

//go:linkname nanotime runtime.nanotime
func nanotime() int64

// osYield gives the CPU to another runnable process, if there is one.
func osYield() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
