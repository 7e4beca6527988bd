package mpi

import (
	"encoding/binary"
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
	iboard "github.com/adimpi/adimpi/mpi/internal/board"
)

// An Allreduce of a few bytes on a core-built board in one arrival round
// (mpi/internal/board: PostQuiet, Arrive, Release): every process writes its
// count and data into its own line and posts it, then counts its arrival;
// the process whose arrival completes the round checks every count, folds
// every line in rank order into its result and publishes the result in the
// board's release line, and every other process waits for the release and
// copies the result from there. A waiter thus looks at one line, not at
// every process's line, and only one process folds: where ranks outnumber
// cores, each process's turn on a CPU then touches three cache lines (its
// own, the count, the release line) instead of a line per process, and
// the fold's work is done once instead of once per process. Every process
// reads the same result bytes, so results are bit-identical; the fold
// order (rank size-1 first, each lower rank's operand applied on the left)
// is boardReduce's, which keeps a non-commutative operation's order.

// arriving reports whether b's Barrier and small Allreduce take arrival
// rounds: on a core-built board, when the job's ranks outnumber its cores
// (an agreed answer, crowded, so every rank takes the same path). With a
// core per rank a waiter polls on its own core, where reading every line
// costs little and a round's chain of hand-offs (the count, the last
// arriver's fold, the release) would add to the latency.
func (r *runtime) arriving(b *board) bool { return b.own != nil && r.crowded(b) }

// arriveMax is the most bytes per process an Allreduce passes in one
// arrival round: what a member's line holds after the count word, and the
// release line holds.
const arriveMax = min(iboard.LineData-boardCountLen, iboard.ReleaseSize)

// arriveLooks is how many looks a waiter takes at the release line alone
// before it also looks at every process's post at each look: a process
// gone (BoardPosted fails) or one that took another path with another
// count (an erroneous program: every process reports the mismatch,
// boardCheck) then ends the wait.
const arriveLooks = 64

// The statuses of a release.
const (
	arriveDone   = 1 // the result is in the release line
	arriveCounts = 2 // the counts differ: every process reports it (boardCheck)
)

// boardAllreduceArrive is MPI_Allreduce of in (at most arriveMax bytes)
// into out on core-built board b; out may be in.
func (r *runtime) boardAllreduceArrive(b *board, op string, in, out []byte, red reducer) error {
	n, own := len(in), b.own
	k := b.seq.Add(1)
	slot := int(k % 2)
	// The line is free once every process has posted the round before:
	// the folder of the round that last used it has read it then.
	if err := r.boardWait(b, op, -1, k-1); err != nil {
		return err
	}
	line := own.BoardLine(b.rank, slot)
	binary.NativeEndian.PutUint64(line, uint64(n))
	copy(line[boardCountLen:], in)
	own.PostQuiet(k)
	if own.Arrive(k) {
		return r.arriveFold(b, op, k, out, red)
	}
	if err := r.arriveWait(b, op, k, n); err != nil {
		return err
	}
	_, status := own.Released(k)
	b.allPosted.Store(k)
	if status != arriveDone {
		return r.boardCheck(b, op, slot, n)
	}
	copy(out, own.ReleaseData()[:n])
	return nil
}

// arriveWait waits until round k is released. After arriveLooks looks it
// also looks at every process's post: the wait fails when a process is
// gone, or, with n ≥ 0, when every process has posted k with counts that
// differ from n (a process with another count may have taken another
// path, and never arrive).
func (r *runtime) arriveWait(b *board, op string, k uint64, n int) error {
	own := b.own
	var perr, cerr error
	looks, next := 0, 0 // processes below next have posted k
	checked := false    // every count has been found equal to n
	cond := func() bool {
		if ok, _ := own.Released(k); ok {
			return true
		}
		if looks++; looks < arriveLooks || checked {
			return false
		}
		for ; next < b.size; next++ {
			ok, err := own.BoardPosted(next, k)
			if err != nil {
				perr = err
				return true
			}
			if !ok {
				return false
			}
		}
		// Every process has posted k: the round is released soon,
		// unless a process with another count took another path.
		if n >= 0 {
			cerr = r.boardCheck(b, op, int(k%2), n)
		}
		checked = cerr == nil
		return cerr != nil
	}
	if err := r.boardAwait(b, cond); err != nil {
		return err
	}
	if perr != nil {
		return named(op, perr)
	}
	return cerr
}

// arriveBarrier is MPI_Barrier on core-built board b in one arrival
// round: post, arrive, and wait for the release unless this process's
// arrival completes the round.
func (r *runtime) arriveBarrier(b *board) error {
	k := b.seq.Add(1)
	b.own.PostQuiet(k)
	if b.own.Arrive(k) {
		b.own.Release(k, arriveDone)
	} else if err := r.arriveWait(b, "MPI_Barrier", k, -1); err != nil {
		return err
	}
	b.allPosted.Store(k)
	return nil
}

// arriveFold is the part of boardAllreduceArrive that the process whose
// arrival completed round k plays: check every count, fold every line
// into out and release the round with the result.
func (r *runtime) arriveFold(b *board, op string, k uint64, out []byte, red reducer) error {
	own, n, slot := b.own, len(out), int(k%2)
	for p := range b.size {
		if int(binary.NativeEndian.Uint64(own.BoardLine(p, slot))) != n {
			own.Release(k, arriveCounts)
			b.allPosted.Store(k)
			return r.boardCheck(b, op, slot, n)
		}
	}
	area := func(p int) []byte { return own.BoardLine(p, slot)[boardCountLen : boardCountLen+n : boardCountLen+n] }
	copy(out, area(b.size-1))
	for p := b.size - 2; p >= 0; p-- {
		red.apply(area(p), out)
	}
	copy(own.ReleaseData(), out)
	own.Release(k, arriveDone)
	b.allPosted.Store(k)
	return nil
}

// allreduceSmall is Allreduce's way in to an arrival round for a small
// vector of a predefined operation on a communicator whose board takes
// arrival rounds: it leaves out the Buffer checks, the reducer look-up and
// the packing that the general path (allreduceBuf) makes, each a few
// cache misses on a turn that a context switch began cold. false: the
// call is not one it serves (unchecked arguments included), and the
// general path runs it.
func allreduceSmall[T Numeric](c *Comm, send, recv []T, o *Op) (bool, error) {
	r := live.Load()
	if r == nil || c == nil || c.freed || o == nil || o.freed || o.user != nil || o.code == opMinloc || o.code == opMaxloc {
		return false, nil
	}
	b := c.board
	if b == nil || b.tail != nil || !r.native || len(send) == 0 || len(send) != len(recv) || !b.agreed || !r.arriving(b) {
		return false, nil
	}
	t := datatype.Of[T]()
	n := len(send) * t.Size()
	if n > arriveMax {
		return false, nil
	}
	fn := o.kernelFor(t)
	if fn == nil {
		return false, nil
	}
	in := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(send))), n)
	out := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(recv))), n)
	return true, r.boardAllreduceArrive(b, "MPI_Allreduce", in, out, reducer{o.commute, fn})
}
