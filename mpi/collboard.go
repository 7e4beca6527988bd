package mpi

import "github.com/adimpi/adimpi/adi"

// Small collectives on MPI_COMM_WORLD over the device's boards (adi.Board:
// netvm's reflective memory). Every process writes its contribution into
// its own board slot and posts a sequence number; the others read it where
// it lies. A collective runs here when the device has boards, native
// collectives are on, the communicator is MPI_COMM_WORLD and its data fit
// in a slot: conditions every rank evaluates alike, so all take the same
// path. Board collectives are numbered k = 1, 2, ... in the order the
// (blocking, hence never concurrent) world collectives are called, and
// collective k uses slot k%2. Before a process writes slot k%2 it waits for
// every process to have posted k-1, that is, to be done reading what the
// slot held for k-2.

// boardFor returns the device's board if a collective on c moving n bytes
// per process runs on it.
func (r *runtime) boardFor(c *Comm, n int) adi.Board {
	if c != r.world || !r.native {
		return nil
	}
	b, ok := r.dev.(adi.Board)
	if !ok || n > b.BoardSlotSize() {
		return nil
	}
	return b
}

// boardSpin is how many looks a board wait takes at the boards alone
// before it also drives the progress engine (r.waitFor): a peer's post is
// usually a cache miss away.
const boardSpin = 64

// boardWait waits until rank p has posted k, or with p < 0 until every
// rank has. A rank that is gone without posting fails the wait.
func (r *runtime) boardWait(b adi.Board, op string, p int, k uint64) error {
	var perr error
	next := 0 // ranks below next have posted k
	cond := func() bool {
		if p >= 0 {
			ok, err := b.BoardPosted(p, k)
			perr = err
			return ok || err != nil
		}
		for ; next < r.size; next++ {
			ok, err := b.BoardPosted(next, k)
			if err != nil {
				perr = err
				return true
			}
			if !ok {
				return false
			}
		}
		return true
	}
	done := false
	for i := 0; i < boardSpin && !done; i++ {
		done = cond()
	}
	if !done {
		if err := r.waitFor(cond); err != nil {
			return err
		}
	}
	if perr != nil {
		return errorf(ErrOther, op, "%v", perr)
	}
	return nil
}

// boardBarrier is MPI_Barrier: post, then wait for every post.
func (r *runtime) boardBarrier(b adi.Board) error {
	k := r.boardSeq.Add(1)
	b.BoardPost(k, false)
	return r.boardWait(b, "MPI_Barrier", -1, k)
}

// boardBcast copies root's data (packed) into every process's data.
func (r *runtime) boardBcast(b adi.Board, data []byte, root int) error {
	const op = "MPI_Bcast"
	if len(data) == 0 {
		return nil
	}
	k := r.boardSeq.Add(1)
	slot := int(k % 2)
	if r.rank == root {
		if err := r.boardWait(b, op, -1, k-1); err != nil {
			return err
		}
		copy(b.BoardSlot(root, slot), data)
		b.BoardPost(k, true)
		return nil
	}
	if err := r.boardWait(b, op, root, k); err != nil {
		return err
	}
	copy(data, b.BoardSlot(root, slot))
	b.BoardPost(k, false)
	return nil
}

// boardReduce folds every process's in (packed, n bytes) with red in rank
// order into out: at root for a Reduce (out is nil elsewhere), at every
// process for an Allreduce (all). Every process folds the same operands in
// the same order, so an Allreduce's results are bit-identical everywhere.
func (r *runtime) boardReduce(b adi.Board, op string, in, out []byte, red reducer, root int, all bool) error {
	n := len(in)
	if n == 0 {
		return nil // every rank has count 0: nothing to agree on
	}
	k := r.boardSeq.Add(1)
	slot := int(k % 2)
	if err := r.boardWait(b, op, -1, k-1); err != nil {
		return err
	}
	// Every process, the root too, folds from the slots, so out may be in
	// (in place).
	copy(b.BoardSlot(r.rank, slot), in)
	b.BoardPost(k, false)
	if !all && r.rank != root {
		return nil
	}
	if err := r.boardWait(b, op, -1, k); err != nil {
		return err
	}
	copy(out, b.BoardSlot(r.size-1, slot)[:n])
	for p := r.size - 2; p >= 0; p-- {
		red.apply(b.BoardSlot(p, slot)[:n], out)
	}
	return nil
}
