package dmcs

import (
	"sync/atomic"
	"time"
)

// clock splits, when Options.Timing is set, the time spent in DMCS into
// its own work (headers, pools, dispatch), the MPI calls it makes, and the
// handlers it runs — the split of the seed's "DMCS overhead" and "MPI
// overhead". Off, each of its calls is a branch.
type clock struct {
	on                          bool
	own, mpi, handlers, inSends atomic.Int64
}

var epoch = time.Now()

// now is a monotonic time in nanoseconds, or 0 when the clock is off.
func (k *clock) now() int64 {
	if !k.on {
		return 0
	}
	return int64(time.Since(epoch))
}

// sent accounts a send that began at t0 and spent m in MPI.
func (k *clock) sent(t0, m int64) {
	if !k.on {
		return
	}
	total := k.now() - t0
	k.mpi.Add(m)
	k.own.Add(total - m)
	k.inSends.Add(total)
}

// handled accounts a request's service that began at t0, when inSends was
// s0, and spent m in MPI and h in its handler; the sends it made are
// accounted by sent already.
func (k *clock) handled(t0, s0, m, h int64) {
	if !k.on {
		return
	}
	total := k.now() - t0
	nested := k.inSends.Load() - s0
	k.mpi.Add(m)
	k.handlers.Add(h)
	k.own.Add(total - m - h - nested)
}

// Times reports, with Options.Timing, the time spent in DMCS's own work,
// in the MPI calls it made, and in handlers, since Init. Waiting (in
// WaitCounter, Barrier, Close) counts as none of them. With a poll thread
// the split is approximate: sends of other goroutines may overlap a
// service.
func (d *DMCS) Times() (own, mpiTime, handlers time.Duration) {
	return time.Duration(d.clk.own.Load()), time.Duration(d.clk.mpi.Load()), time.Duration(d.clk.handlers.Load())
}
