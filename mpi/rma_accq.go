package mpi

import (
	"slices"

	"github.com/adimpi/adimpi/adi"
)

// Queued accumulates. An Accumulate on a window of the program's memory
// (WinCreate) of a rank of this host that this process reaches with the
// device's remote memory access is, carried out at the call, a turn of the
// target's accumulate lock, a remote read and a remote write (two system
// calls on netvm, two RDMA descriptors on via). Nothing needs it done
// before the next synchronisation that completes it at the target, so the
// origin keeps it, with a copy of its data (the origin buffer is free at
// once), until then: a Flush, Unlock, Fence or Complete, or an operation
// of another kind to the same target (which keeps every sequence of one
// origin's operations on a target in call order). The queue is carried
// out under one turn of the lock, reading and writing each range of bytes
// it touches once.

// queuedAcc is an Accumulate kept for later (drainAccs).
type queuedAcc struct {
	h      header
	off    int64 // in the target's window memory
	blocks []blk // the target datatype's blocks, from off
	data   []byte
}

// Bounds of one target's queue: past them the next Accumulate carries the
// queue out first, so that a program accumulating without synchronising
// does not grow it without end.
const (
	accQueueOps   = 4096
	accQueueBytes = 1 << 20
)

// queues reports whether accumulates to rank t are queued: t's memory is
// reached with remote memory access under its accumulate lock, not mapped.
func (w *Win) queues(t int) bool {
	return t != w.comm.rank && w.ctls[t] != nil && w.direct[t] == nil && w.remote[t]
}

// queueAcc keeps an Accumulate to the queue of its target; called with the
// core's lock held. The returned request is complete: the data are copied.
func (w *Win) queueAcc(a *rmaArgs, h header, off int64, blocks []blk, size int) (*adi.Request, error) {
	t := a.target
	o := &w.origin
	if len(o.accs[t]) >= accQueueOps || o.accBytes[t]+size > accQueueBytes {
		if err := w.drainAccs(a.op, t); err != nil {
			return nil, err
		}
	}
	if blocks == nil {
		blocks = []blk{{0, size}}
	}
	data := append([]byte(nil), packIn(a.origin)...)
	o.accs[t] = append(o.accs[t], queuedAcc{h: h, off: off, blocks: blocks, data: data})
	o.accBytes[t] += size
	return completed, nil
}

// drainAccs carries out the accumulates queued to rank t (every rank for
// t < 0), in call order, and reports a failure as call op's. Called with
// the core's lock held.
func (w *Win) drainAccs(op string, t int) error {
	if t < 0 {
		for i := range w.origin.accs {
			if err := w.drainAccs(op, i); err != nil {
				return err
			}
		}
		return nil
	}
	q := w.origin.accs[t]
	if len(q) == 0 {
		return nil
	}
	w.origin.accs[t], w.origin.accBytes[t] = nil, 0
	spans := touched(q)
	bufs := make([][]byte, len(spans))
	for i, s := range spans {
		bufs[i] = make([]byte, s.n)
	}
	var why string
	var err error
	w.atomically(t, func() {
		if err = w.remoteCopy(t, 0, spans, bufs, false); err != nil {
			return
		}
		for _, x := range q {
			pieces := make([][]byte, len(x.blocks))
			for i, b := range x.blocks {
				at := int(x.off) + b.off
				k, _ := slices.BinarySearchFunc(spans, at, func(s blk, at int) int {
					if s.off+s.n <= at {
						return -1
					}
					if s.off > at {
						return 1
					}
					return 0
				})
				pieces[i] = bufs[k][at-spans[k].off : at-spans[k].off+b.n]
			}
			if _, why = combine(x.h, pieces, x.data); why != "" {
				return
			}
		}
		err = w.remoteCopy(t, 0, spans, bufs, true)
	})
	if err != nil {
		return errorf(ErrOther, op, "accumulates to rank %d of window %s: %v", t, w.name, err)
	}
	if why != "" {
		return errorf(ErrOp, op, "accumulates to rank %d of window %s: %s", t, w.name, why)
	}
	return nil
}

// touched is the bytes of the target's memory the queued operations q
// touch, as disjoint ranges in address order (overlapping and adjacent
// blocks merged): the ranges the queue reads and writes back, and no byte
// more (another origin may Put to the bytes between them meanwhile).
func touched(q []queuedAcc) []blk {
	var all []blk
	for _, x := range q {
		for _, b := range x.blocks {
			if b.n > 0 {
				all = append(all, blk{int(x.off) + b.off, b.n})
			}
		}
	}
	slices.SortFunc(all, func(a, b blk) int { return a.off - b.off })
	out := all[:0]
	for _, b := range all {
		if k := len(out) - 1; k >= 0 && b.off <= out[k].off+out[k].n {
			out[k].n = max(out[k].n, b.off+b.n-out[k].off)
			continue
		}
		out = append(out, b)
	}
	return out
}
