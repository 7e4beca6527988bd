package via

import (
	"sync/atomic"
	_ "unsafe" // go:linkname
)

// nanotime is the runtime's monotonic clock in nanoseconds (time.Now reads
// the wall clock as well).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// sampleEvery is how often the design-study timers (host_post_ns,
// nic_exec_ns, cq_done_ns) read the clock: they time one operation in
// sampleEvery and count it sampleEvery times, since reading the clock
// costs about as much as the operations they time.
const sampleEvery = 16

// sampler times one operation in sampleEvery into a counter, when on
// (Options.Timers).
type sampler struct {
	on bool
	n  atomic.Uint32
}

// start returns the clock when this operation is sampled, else 0.
func (s *sampler) start() int64 {
	if !s.on || s.n.Add(1)%sampleEvery != 0 {
		return 0
	}
	return nanotime()
}

// stop adds a sampled operation's time, scaled, to c.
func (s *sampler) stop(t0 int64, c *atomic.Int64) {
	if t0 != 0 {
		c.Add((nanotime() - t0) * sampleEvery)
	}
}
