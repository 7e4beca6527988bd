package mpi

import "github.com/adimpi/adimpi/adi"

// This file holds what a fast path outside the core (the C library's, in
// cmd/libmpich) needs to know before it touches the device behind the
// core's back.

// QuietDevice returns the device under the core when nothing but the
// program's own MPI calls reaches into it: MPI runs, without the progress
// goroutine, without a communicator across jobs (whose channel the core
// serves), and with no buffered send in flight (which the core completes
// later). It returns nil otherwise. The caller must also exclude its own
// sources of concurrency (threads, requests whose operations run on in
// goroutines: non-blocking collectives, Isendrecv).
func QuietDevice() adi.Device {
	r := live.Load()
	if r == nil || r.asyncOn.Load() || !r.bsend.idle() {
		return nil
	}
	if j := r.join; j != nil {
		if j.ctxs.Load() != nil {
			return nil
		}
		return j.Device
	}
	return r.dev
}

// PointToPointContext is the context id that c's point-to-point messages
// carry in their envelopes.
func (c *Comm) PointToPointContext() uint32 { return c.ctx }
