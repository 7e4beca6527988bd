// Package liveness watches the processes of a job's other ranks, so that a
// device fails the operations that wait on a rank whose process has exited
// instead of waiting for ever, with errors that name the rank and its pid.
//
// A device calls Idle from a Progress that found nothing to do and Scan
// when Idle says a scan is due: a scan (one kill(pid, 0) per peer) costs
// microseconds, so it runs only on an idle poll, at most once per Interval.
//
// A rank on another host (SetHost) has no process to look at from here:
// Scan skips it, the device judges it by its connection and reports its
// loss with MarkLost, and errors name its host instead of a pid.
package liveness

import (
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/shm"
)

// Interval is the least time between two scans.
const Interval = 200 * time.Millisecond

// Peers is the liveness of every rank of a job, as seen by rank Self.
type Peers struct {
	self  int
	pids  []int
	hosts []string      // the host of a rank on another host, else ""
	lost  []error       // the error MarkLost was given for a rank, else nil
	alive []atomic.Bool // read without the device's lock (netvm's BoardPosted)
	every int           // idle polls between two scans, when nobody slept
	idle  int
	last  time.Time
	slept atomic.Bool
}

// New watches size ranks, all alive, this process being rank self; every
// is the number of idle polls after which a scan is due (a Sleep makes one
// due at once). Set the peers' pids with SetPid before the first scan.
func New(self, size, every int) *Peers {
	p := &Peers{self: self, pids: make([]int, size), hosts: make([]string, size), lost: make([]error, size), alive: make([]atomic.Bool, size), every: every, last: time.Now()}
	for r := range p.alive {
		p.alive[r].Store(true)
	}
	return p
}

// SetPid records rank's process id.
func (p *Peers) SetPid(rank, pid int) { p.pids[rank] = pid }

// SetHost records that rank runs on another host, named host: Scan leaves
// it to the device, which reports its loss with MarkLost.
func (p *Peers) SetHost(rank int, host string) { p.hosts[rank] = host }

// MarkLost marks rank not alive for a reason the device found itself (its
// connection broke), with err the error that completes what waited on it
// (Lost). It reports whether rank was alive until now, so that the device
// fails what depends on it once.
func (p *Peers) MarkLost(rank int, err error) bool {
	if !p.alive[rank].Load() {
		return false
	}
	p.lost[rank] = err
	p.alive[rank].Store(false)
	return true
}

// Pid is rank's process id.
func (p *Peers) Pid(rank int) int { return p.pids[rank] }

// Alive reports whether rank's process was alive at the last scan. It may
// be called without the device's lock.
func (p *Peers) Alive(rank int) bool { return p.alive[rank].Load() }

// Busy records a poll that did something.
func (p *Peers) Busy() { p.idle = 0 }

// Slept records that the process slept waiting for its peers; it may be
// called without the device's lock.
func (p *Peers) Slept() { p.slept.Store(true) }

// Idle records a poll that found nothing to do and reports whether a scan
// is due: every `every` idle polls, or after a sleep, once Interval has
// passed since the last scan.
func (p *Peers) Idle() bool {
	// A count that restarts, rather than a division, on every idle poll
	// (the waiting loop's).
	p.idle++
	tick := p.idle >= p.every
	if tick {
		p.idle = 0
	}
	return (tick || (p.slept.Load() && p.slept.Swap(false))) && p.Due()
}

// Due reports whether Interval has passed since the last scan (for loops
// that block inside the device).
func (p *Peers) Due() bool { return time.Since(p.last) > Interval }

// Scan looks at every peer's process and returns the ranks found gone since
// the last scan, which are from now on not Alive.
func (p *Peers) Scan() []int {
	p.last = time.Now()
	var gone []int
	for r, pid := range p.pids {
		if r != p.self && p.hosts[r] == "" && p.alive[r].Load() && !shm.Alive(pid) {
			p.alive[r].Store(false)
			gone = append(gone, r)
		}
	}
	return gone
}

// Exited is the error of an operation started (op: "send", "receive")
// towards rank once its process is known to be gone.
func (p *Peers) Exited(op string, rank int) error {
	if h := p.hosts[rank]; h != "" {
		return adi.Errorf(adi.ErrOther, op, "rank %d (on host %s) has exited or is unreachable", rank, h)
	}
	return adi.Errorf(adi.ErrOther, op, "rank %d (pid %d) has exited", rank, p.pids[rank])
}

// Lost is the error that completes a pending operation whose peer rank
// died while the operation waited on it: the one MarkLost was given, if it
// was.
func (p *Peers) Lost(rank int) error {
	if err := p.lost[rank]; err != nil {
		return err
	}
	return adi.Errorf(adi.ErrOther, "progress", "rank %d (pid %d) exited while a request depended on it", rank, p.pids[rank])
}
