package mpi

import (
	"encoding/binary"
	"math"
	"math/bits"
	goruntime "runtime"
	"unsafe"
)

// Small and large collectives over a communicator's board (adi.Board:
// netvm's reflective memory for MPI_COMM_WORLD, or a board the core builds
// in a shared segment for any communicator on one host, collboards.go).
// Every process writes its contribution into its own board slot and posts a
// sequence number; the others read it where it lies. A collective runs here
// when the communicator has a board, native collectives are on and its data
// fit the path: conditions every rank evaluates alike, so all take the same
// path. A board's collectives are numbered k = 1, 2, ... in the order they
// are called on the communicator (a non-blocking one waits for the one
// before it, collboards.go), and collective k uses slot k%2. Before a
// process writes slot k%2 it waits for every process to have posted k-1,
// that is, to be done reading what the slot held for k-2. Ranks are the
// board's: the communicator's ranks.

// boardFor returns c's board if a blocking collective on c moving n bytes
// per process runs on it through the slots: up to boardStageIdle bytes,
// and up to a whole slot when ranks outnumber cores (crowded). There a
// user copy out of a peer's mapped slot is several times faster than
// process_vm_readv (docs/performance.md), and a broadcast through the
// root's slot needs neither a tree (every process copies from the root's
// slot, one wake-up) nor the root to stay until the others are done. The
// first blocking collective on a communicator builds its board
// (attachBoard), and a blocking collective first waits for the
// non-blocking board collectives started before it.
func (r *runtime) boardFor(c *Comm, n int) *board {
	b := c.board
	if b == nil {
		if c.boardTried || !r.native {
			return nil
		}
		if b = r.attachBoard(c); b == nil {
			return nil
		}
	}
	if t := b.tail; t != nil {
		<-t
		b.tail = nil
	}
	if n > b.BoardSlotSize() || (n > boardStageIdle && !r.crowded(b)) {
		return nil
	}
	return b
}

// crowded reports whether the job's ranks outnumber the cores they share.
// Ranks may see different runtime.NumCPU (each pinned to its own core by a
// launcher, say), and a collective's algorithm must not differ between
// them, so the answer comes from the board's agreement (boardAgree): false
// while no agreement could be made (the caller's own boardAgree reports
// why). It counts the job's ranks, not the communicator's: a Split half
// still shares the cores with the other half.
func (r *runtime) crowded(b *board) bool {
	return r.boardAgree(b) == nil && r.size > b.cores
}

// boardStageIdle is the most bytes a collective passes through the slots
// when every rank has a core: larger data are read where they lie
// (process_vm_readv: boardBcastSplit, boardAlltoallRead), one copy
// that the ranks make in parallel on their own cores.
const boardStageIdle = 8 << 10

// stagePiece bounds the copies into and out of board slots: Go's copy
// switches to non-temporal stores from 1 MiB on, which would push staged
// data out of the cache just before the peers read them (and a received
// buffer just before its owner reads it).
const stagePiece = 512 << 10

// cachedCopy is copy in pieces that keep dst in the cache.
func cachedCopy(dst, src []byte) {
	for off := 0; off < len(src); off += stagePiece {
		copy(dst[off:], src[off:min(len(src), off+stagePiece)])
	}
}

// boardReduceMax is the most bytes per process that a Reduce or
// Allreduce folds from the board slots: every process folds every
// process's slot, np times the work of one share, which pays off for small
// vectors only (larger ones reduce-scatter, boardAllreduceStaged).
const boardReduceMax = 8 << 10

// boardArea is where n bytes of round-parity slot go on p's board: the
// line that carries the sequence word when they fit there (one cache miss
// brings a peer both), else the slot. Every rank passes the same n. The
// line's first boardCountLen bytes are the count word (boardSetCount).
func boardArea(b *board, p, slot, n int) []byte {
	if l := b.BoardLine(p, slot)[boardCountLen:]; n <= len(l) {
		return l[:n:n]
	}
	return b.BoardSlot(p, slot)[:n:n]
}

// boardCountLen is the size of the count word at the start of a board
// line: the bytes a process passes to the collective whose round it posts
// (the root's for a Bcast), so that every peer can check its own count
// against it before it reads the data. It shares the cache line with the
// sequence word and inline data, so the check costs no extra miss.
const boardCountLen = 8

// boardSetCount writes this process's count word for the round of parity
// slot; the post that follows publishes it.
func (r *runtime) boardSetCount(b *board, slot, n int) {
	binary.NativeEndian.PutUint64(b.BoardLine(b.rank, slot), uint64(n))
}

// boardCount reads p's count word for the round of parity slot (after
// p has posted it).
func boardCount(b *board, p, slot int) int {
	return int(binary.NativeEndian.Uint64(b.BoardLine(p, slot)))
}

// boardCheck compares every process's count word of the round of parity
// slot, all posted, with n, this process's count. Counts that differ make
// the collective erroneous (MPI requires equal type signatures): ErrTruncate
// when a peer passes more bytes than this process (its result could not
// hold theirs), ErrCount when peers pass fewer.
func (r *runtime) boardCheck(b *board, op string, slot, n int) error {
	if b.size == 1 {
		return nil
	}
	lo, hi := b.rank, b.rank
	for p := range b.size {
		m := boardCount(b, p, slot)
		if m < n {
			lo = p
		} else if m > n {
			hi = p
		}
	}
	if hi != b.rank {
		return errorf(ErrTruncate, op, "rank %d passes %d bytes, more than this rank's %d: every rank must pass the same count", hi, boardCount(b, hi, slot), n)
	}
	if lo != b.rank {
		return errorf(ErrCount, op, "rank %d passes %d bytes, fewer than this rank's %d: every rank must pass the same count", lo, boardCount(b, lo, slot), n)
	}
	return nil
}

// countMismatch is the error of a non-root process whose buffer of have
// bytes differs from the root's count of sent bytes: ErrTruncate when the
// buffer is too short (it got the first have bytes), ErrCount when the
// root sent fewer (it got them all, and the rest of its buffer is
// untouched). nil when they agree.
func countMismatch(op string, root, sent, have int) error {
	switch {
	case sent > have:
		return errorf(ErrTruncate, op, "message of %d bytes from rank %d is longer than the receive buffer (%d bytes)", sent, root, have)
	case sent < have:
		return errorf(ErrCount, op, "message of %d bytes from rank %d is shorter than the receive buffer (%d bytes): every rank must pass the root's count", sent, root, have)
	}
	return nil
}

// boardHeader is a round that only publishes every process's count, for
// the collectives that then move their data by messages: every process
// checks the counts before any message is sent, so processes that disagree
// fail alike instead of waiting for messages of the wrong size.
func (r *runtime) boardHeader(b *board, op string, n int) error {
	k := b.seq.Add(1)
	slot := int(k % 2)
	if err := r.boardWait(b, op, -1, k-1); err != nil {
		return err
	}
	r.boardSetCount(b, slot, n)
	b.BoardPost(k, false)
	if err := r.boardWait(b, op, -1, k); err != nil {
		return err
	}
	return r.boardCheck(b, op, slot, n)
}

// boardSpin is how many looks a board wait takes at the boards alone
// before it also drives the progress engine (r.waitFor): a peer's post is
// usually a cache miss away.
const boardSpin = 64

// boardWait waits until rank p has posted k, or with p < 0 until every
// rank has. A rank that is gone without posting fails the wait.
func (r *runtime) boardWait(b *board, op string, p int, k uint64) error {
	if k <= b.allPosted.Load() {
		return nil
	}
	var perr error
	next := 0 // ranks below next have posted k
	cond := func() bool {
		if p >= 0 {
			ok, err := b.BoardPosted(p, k)
			perr = err
			return ok || err != nil
		}
		for ; next < b.size; next++ {
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
	if err := r.boardAwait(b, cond); err != nil {
		return err
	}
	if perr != nil {
		return named(op, perr)
	}
	if p < 0 {
		b.allPosted.Store(k)
	}
	return nil
}

// boardAwait polls cond, then sleeps on b until cond holds, or the
// progress engine fails.
func (r *runtime) boardAwait(b *board, cond func() bool) error {
	// When ranks outnumber cores one look does: the ranks it waits for
	// are likely queued for this CPU (boardYield).
	done := cond()
	for i := 1; i < boardSpin && !done && r.poll > 0; i++ {
		done = cond()
	}
	if done {
		return nil
	}
	// The waiting flag goes up only before the first sleep: a poster that
	// sees it rings this process's doorbell, a cache miss and perhaps a
	// system call on its way, which a waiter that is still polling does
	// not need.
	if b.own != nil {
		return r.boardSleep(b, cond)
	}
	raised := false
	err := r.waitSleeping(cond, func() { b.BoardWaiting(true); raised = true })
	if raised {
		b.BoardWaiting(false)
	}
	return err
}

// boardBarrier is MPI_Barrier: post, then wait for every post.
func (r *runtime) boardBarrier(b *board) error {
	if r.arriving(b) {
		return r.arriveBarrier(b)
	}
	k := b.seq.Add(1)
	b.BoardPost(k, false)
	return r.boardWait(b, "MPI_Barrier", -1, k)
}

// boardBcastAny is MPI_Bcast on the board, for data of any size: the
// root's first round publishes its count (boardCountLen), every other
// process reads it there before it chooses the path (boardBcastPath) from
// it, so that all take the same one whatever their own counts. A process
// whose buffer is shorter than the root's data takes part through a scratch
// buffer of the root's size (it may have to pass the data on) and gets the
// prefix that fits and ErrTruncate; one whose buffer is longer gets the
// root's data and ErrCount (countMismatch). msg runs a broadcast of its
// argument by messages (the path when boards cannot carry it).
func (r *runtime) boardBcastAny(b *board, data []byte, root int, msg func([]byte) error) error {
	const op = "MPI_Bcast"
	if err := r.boardAgree(b); err != nil {
		return err
	}
	n := len(data)
	if b.rank != root {
		k := b.seq.Load() + 1 // the root posts this Bcast's first round
		if err := r.boardWait(b, op, root, k); err != nil {
			return err
		}
		n = boardCount(b, root, int(k%2))
	}
	work := data
	if n > len(data) {
		work = scratch(n)
		defer release(work)
	}
	work = work[:n]
	var err error
	switch r.boardBcastPath(b, n) {
	case bcastBoardSlot:
		err = r.boardBcast(b, work, root, n)
	case bcastBoardStaged:
		err = r.boardBcastStaged(b, work, root)
	case bcastBoardSplit:
		err = r.boardBcastSplit(b, work, root)
	case bcastBoardRead:
		err = r.boardBcastLarge(b, work, root)
	default:
		err = r.boardHeadBcast(b, root, n)
		if err == nil {
			err = msg(work)
		}
	}
	if err != nil || b.rank == root {
		return err
	}
	if n > len(data) {
		copy(data, work)
	}
	return countMismatch(op, root, n, len(data))
}

// The paths of a board Bcast (boardBcastPath).
const (
	bcastBoardSlot   = iota // boardBcast: through the root's line or slot
	bcastBoardStaged        // boardBcastStaged: a slot at a time
	bcastBoardSplit         // boardBcastSplit: shared copies down a tree
	bcastBoardRead          // boardBcastLarge: reads down a tree
	bcastMessages           // a count round (boardHeadBcast), then messages
)

// boardBcastPath chooses a board Bcast's path from the root's count n
// (every process chooses alike, after boardAgree). Ranks that outnumber
// cores pass a broadcast of any size through the board slots
// (boardBcastStaged); otherwise data over 8 KiB are read where they lie,
// or, where peers' memory cannot be read, sent by messages.
func (r *runtime) boardBcastPath(b *board, n int) int {
	crowded := r.crowded(b)
	switch {
	case n <= boardStageIdle || (crowded && n <= b.BoardSlotSize()):
		return bcastBoardSlot
	case crowded:
		return bcastBoardStaged
	case !b.readable:
		return bcastMessages
	case n >= splitBcast:
		return bcastBoardSplit
	}
	return bcastBoardRead
}

// boardHeadBcast is the round in which the root of a Bcast that then goes
// by messages publishes its count (the others read it in boardBcastAny).
func (r *runtime) boardHeadBcast(b *board, root, n int) error {
	k := b.seq.Add(1)
	slot := int(k % 2)
	if b.rank == root {
		if err := r.boardWait(b, "MPI_Bcast", -1, k-1); err != nil {
			return err
		}
		r.boardSetCount(b, slot, n)
	}
	b.BoardPost(k, b.rank == root)
	return nil
}

// boardBcast copies root's data (packed) into every process's data; the
// root's count word says total (the whole Bcast's bytes when data are one
// segment of it).
func (r *runtime) boardBcast(b *board, data []byte, root, total int) error {
	const op = "MPI_Bcast"
	k := b.seq.Add(1)
	slot := int(k % 2)
	if b.rank == root {
		if err := r.boardWait(b, op, -1, k-1); err != nil {
			return err
		}
		r.boardSetCount(b, slot, total)
		cachedCopy(boardArea(b, root, slot, len(data)), data)
		b.BoardPost(k, true)
		return nil
	}
	if err := r.boardWait(b, op, root, k); err != nil {
		return err
	}
	cachedCopy(data, boardArea(b, root, slot, len(data)))
	b.BoardPost(k, false)
	return nil
}

// boardReduce folds every process's in (packed, n bytes) with red in rank
// order into out: at root for a Reduce (out is nil elsewhere), at every
// process for an Allreduce (all). Every process folds the same operands in
// the same order, so an Allreduce's results are bit-identical everywhere.
func (r *runtime) boardReduce(b *board, op string, in, out []byte, red reducer, root int, all bool) error {
	n := len(in)
	if all && n <= arriveMax && r.arriving(b) {
		return r.boardAllreduceArrive(b, op, in, out, red)
	}
	k := b.seq.Add(1)
	slot := int(k % 2)
	if err := r.boardWait(b, op, -1, k-1); err != nil {
		return err
	}
	// Every process, the root too, folds from the slots, so out may be in
	// (in place).
	r.boardSetCount(b, slot, n)
	copy(boardArea(b, b.rank, slot, n), in)
	b.BoardPost(k, false)
	if !all && b.rank != root {
		return nil
	}
	if err := r.boardWait(b, op, -1, k); err != nil {
		return err
	}
	if err := r.boardCheck(b, op, slot, n); err != nil {
		return err
	}
	copy(out, boardArea(b, b.size-1, slot, n))
	for p := b.size - 2; p >= 0; p-- {
		red.apply(boardArea(b, p, slot, n), out)
	}
	return nil
}

// Larger collectives either pass through the slots in slot-sized
// segments (a large commutative Allreduce always; a Bcast when ranks
// outnumber cores), or read each other's buffers in place (adi.Board's
// BoardRead: netvm's process_vm_readv): a board slot then carries buffer
// addresses, not data, and every byte is copied once, by the process that
// needs it, with no hand-off per piece. The reads pay off when every rank
// has a core of its own; the slots when ranks queue for cores (fewer
// rounds, user copies, and senders that need not stay until the data are
// read).

// boardAgree runs, once, the board round in which the processes agree on
// what the large board collectives depend on, so that every rank decides
// alike: whether every process can read every other's memory
// (BoardReadable), and how many cores the job has (the least NumCPU of
// any process). The first collective that needs either runs it, on every
// rank at the same point.
func (r *runtime) boardAgree(b *board) error {
	if b.agreed {
		return nil
	}
	k := b.seq.Add(1)
	slot := int(k % 2)
	if err := r.boardWait(b, "MPI_Init", -1, k-1); err != nil {
		return err
	}
	mine := boardArea(b, b.rank, slot, 8)
	mine[0] = 0
	if b.BoardReadable() {
		mine[0] = 1
	}
	binary.LittleEndian.PutUint32(mine[4:], uint32(goruntime.NumCPU()))
	b.BoardPost(k, false)
	if err := r.boardWait(b, "MPI_Init", -1, k); err != nil {
		return err
	}
	b.readable, b.cores = true, math.MaxInt
	for p := 0; p < b.size; p++ {
		theirs := boardArea(b, p, slot, 8)
		b.readable = b.readable && theirs[0] == 1
		b.cores = min(b.cores, int(binary.LittleEndian.Uint32(theirs[4:])))
	}
	b.agreed = true
	return nil
}

// addrOf is the address of b's first byte (0 when b is empty).
func addrOf(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

// boardBcastLarge (ranks that all have a core, 8 KiB to 64 KiB) reads
// the data down a binomial tree: every process
// posts its buffer's address, reads the data from its parent's buffer once
// the parent has posted the round (it has the data then), posts the round
// itself, and returns once its children have posted theirs (they are done
// reading its buffer). Each buffer is read by at most log2(n) processes,
// rather than the root's by all at once. The data are not passed on in
// pieces to overlap the tree's levels: each piece would cost every waiting
// process a wake-up on an oversubscribed machine.
func (r *runtime) boardBcastLarge(b *board, data []byte, root int) error {
	const op = "MPI_Bcast"
	k := b.seq.Add(1)
	slot := int(k % 2)
	np := b.size
	rel := (b.rank - root + np) % np
	if err := r.boardWait(b, op, -1, k-1); err != nil {
		return err
	}
	r.boardSetCount(b, slot, len(data))
	binary.NativeEndian.PutUint64(boardArea(b, b.rank, slot, 8), uint64(addrOf(data)))
	var err error
	if rel != 0 {
		parent := (rel&^(1<<(bits.Len(uint(rel))-1)) + root) % np
		if err = r.boardWait(b, op, parent, k); err != nil {
			return err
		}
		addr := uintptr(binary.NativeEndian.Uint64(boardArea(b, parent, slot, 8)))
		err = b.BoardRead(parent, addr, data)
	}
	b.BoardPost(k, true) // even after a failed read: the children must not wait forever
	for mask := 1; rel+mask < np; mask <<= 1 {
		if mask > rel {
			if e := r.boardWait(b, op, (rel+mask+root)%np, k); e != nil && err == nil {
				err = e
			}
		}
	}
	goruntime.KeepAlive(data)
	if err != nil {
		return named(op, err)
	}
	return nil
}

// splitBcast is the smallest broadcast whose copies parent and child share
// when every rank has a core (boardBcastSplit).
const splitBcast = 64 << 10

// boardBcastSplit is boardBcastLarge with each parent-to-child copy shared
// between the two processes, for jobs whose ranks all have a core: the
// child reads the second half from its parent's buffer while the parent
// writes the first half into the child's, so two cores copy at once. It
// takes three rounds: k (this process's buffer address is posted), k+1 (it
// holds all the data) and k+2 (it has written into all its children).
func (r *runtime) boardBcastSplit(b *board, data []byte, root int) error {
	const op = "MPI_Bcast"
	k := b.seq.Add(3) - 2
	slot := int(k % 2)
	np, half := b.size, len(data)/2
	rel := (b.rank - root + np) % np
	if err := r.boardWait(b, op, -1, k-1); err != nil {
		return err
	}
	r.boardSetCount(b, slot, len(data))
	binary.NativeEndian.PutUint64(boardArea(b, b.rank, slot, 8), uint64(addrOf(data)))
	b.BoardPost(k, true)
	addr := func(p int) uintptr { return uintptr(binary.NativeEndian.Uint64(boardArea(b, p, slot, 8))) }
	var err error
	keep := func(e error) {
		if e != nil && err == nil {
			err = e
		}
	}
	if rel != 0 {
		parent := (rel&^(1<<(bits.Len(uint(rel))-1)) + root) % np
		if e := r.boardWait(b, op, parent, k+1); e != nil {
			return e
		}
		keep(b.BoardRead(parent, addr(parent)+uintptr(half), data[half:]))
		keep(r.boardWait(b, op, parent, k+2))
	}
	// Posts go on after a failure too: the children must not wait forever.
	b.BoardPost(k+1, true)
	var children []int
	for mask := 1; rel+mask < np; mask <<= 1 {
		if mask > rel {
			children = append(children, (rel+mask+root)%np)
		}
	}
	for _, c := range children {
		if e := r.boardWait(b, op, c, k); e != nil {
			keep(e)
			continue
		}
		keep(b.BoardWrite(c, addr(c), data[:half]))
	}
	b.BoardPost(k+2, true)
	for _, c := range children {
		keep(r.boardWait(b, op, c, k+1))
	}
	goruntime.KeepAlive(data)
	if err != nil {
		return named(op, err)
	}
	return nil
}

// boardPiece is how much of a share a large board reduction folds at
// once: the piece of the accumulator stays in cache across the operands.
const boardPiece = 64 << 10

// boardAlltoallStaged: every process copies its send blocks (bs bytes
// each) into its board slot, and once every process has, copies block i,
// where i is its rank, out of every peer's slot into block p of recv. A
// process's own block goes straight from s to recv. One round: the next
// collective waits until every process is done reading the slot. Blocks
// too large for one slot go to boardAlltoallRead rather than a piece per
// round, which gains nothing over it (docs/performance.md).
func (r *runtime) boardAlltoallStaged(b *board, s, recv []byte, bs int) error {
	const op = "MPI_Alltoall"
	np, me := b.size, b.rank
	n := np * bs
	if n > boardStageIdle && b.seq.Load()%2 == 0 {
		// Large offers always take slot 0: an odd round goes by empty
		// (posting it says no more than that this process has started
		// the Alltoall), and the offers take the next one. Back-to-back
		// Alltoalls then reuse the same slots, still in cache, instead
		// of alternating between two (docs/performance.md).
		// It carries the count, checked before the offers are made.
		if err := r.boardHeader(b, op, n); err != nil {
			return err
		}
	}
	k := b.seq.Add(1)
	slot := int(k % 2)
	if err := r.boardWait(b, op, -1, k-1); err != nil {
		return err
	}
	r.boardSetCount(b, slot, n)
	area := boardArea(b, me, slot, n)
	cachedCopy(area[:me*bs], s[:me*bs])
	cachedCopy(area[(me+1)*bs:], s[(me+1)*bs:])
	b.BoardPost(k, false)
	copy(recv[me*bs:(me+1)*bs], s[me*bs:(me+1)*bs])
	if err := r.boardWait(b, op, -1, k); err != nil {
		return err
	}
	if err := r.boardCheck(b, op, slot, n); err != nil {
		return err
	}
	for i := 1; i < np; i++ {
		p := (me + i) % np // start at different peers
		copy(recv[p*bs:(p+1)*bs], boardArea(b, p, slot, n)[me*bs:(me+1)*bs])
	}
	return nil
}

// boardAlltoallRead: every process offers the address of its packed send
// blocks and reads block i, where i is its rank, from every process's
// buffer into block p of recv (process_vm_readv). A second round tells each
// process that its buffer has been read.
func (r *runtime) boardAlltoallRead(b *board, s, recv []byte, bs int) error {
	const op = "MPI_Alltoall"
	k := b.seq.Add(2) - 1 // rounds k, k+1
	slot := int(k % 2)
	if err := r.boardWait(b, op, -1, k-1); err != nil {
		return err
	}
	r.boardSetCount(b, slot, len(s))
	binary.NativeEndian.PutUint64(boardArea(b, b.rank, slot, 8), uint64(addrOf(s)))
	b.BoardPost(k, false)
	if err := r.boardWait(b, op, -1, k); err != nil {
		return err
	}
	if err := r.boardCheck(b, op, slot, len(s)); err != nil {
		b.seq.Store(k) // every process stops after round k
		return err
	}
	var err error
	me := b.rank * bs
	for i := range b.size {
		p := (b.rank + i) % b.size // start at different peers
		dst := recv[p*bs : (p+1)*bs]
		if p == b.rank {
			copy(dst, s[me:me+bs])
			continue
		}
		addr := uintptr(binary.NativeEndian.Uint64(boardArea(b, p, slot, 8)))
		if e := b.BoardRead(p, addr+uintptr(me), dst); e != nil && err == nil {
			err = e
		}
	}
	b.BoardPost(k+1, false)
	if e := r.boardWait(b, op, -1, k+1); e != nil && err == nil {
		err = e
	}
	goruntime.KeepAlive(s)
	if err != nil {
		return named(op, err)
	}
	return nil
}

// boardAllreduceStaged is a commutative Allreduce of more than
// boardReduceMax bytes through the board slots, a reduce-scatter and an
// allgather in shared memory. The vector goes in segments of up to a slot;
// for each, every process copies into its slot the shares the others fold
// (share i is process i's), not its own (round A); folds every other
// process's slot into its own share, read from in and written to out
// (nothing to copy when in place), and publishes the result in its own
// slot's share, which nobody else had written (round B); then copies every
// other share from its owner's slot into out. Against staging the whole
// vector in and out, each process copies its own share twice less: at
// np 2, half the copies (docs/performance.md). Every copy is a user copy
// from mapped memory, with a segment's slots hot in the shared cache,
// which is faster than the same reduce-scatter and allgather done by
// reading each other's buffers with process_vm_readv. It needs no
// BoardRead, so it runs with cma=off too. Segment s uses slot (k+s)%2 and
// rounds k+2s (A) and k+2s+1 (B); a last round tells the next collective
// that every process is done reading. Before a process writes a slot for
// segment s ≥ 1 every process has posted B(s-1), so is done with segment
// s-2 (and the collective before this one).
//
// The collective takes an even number of rounds, 2S+2, posting the last
// as k+2S+1 (k+2S goes unposted: nobody waits for it, and "posted k+2S+1"
// says all a post of k+2S would), so that back-to-back large Allreduces
// keep the parity of their first round and stage through the same slots,
// still in cache, rather than alternating between two (as the Alltoall
// does, boardAlltoallStaged): the slot memory the processes touch per
// call halves.
//
// Shares are whole multiples of es bytes; folding the other processes'
// share i into process i's own in the fixed order i+1, i+2, …, i-1 (mod
// n), and only process i computing share i, gives every process the same
// bits.
func (r *runtime) boardAllreduceStaged(b *board, op string, in, out []byte, red reducer, es int) error {
	n, np := len(in), b.size
	seg := b.BoardSlotSize() / es * es
	piece := max(boardPiece/es*es, es) // whole elements: a kernel never sees part of one
	segs := (n + seg - 1) / seg
	inPlace := n > 0 && &in[0] == &out[0]
	k := b.seq.Add(uint64(2*segs+2)) - uint64(2*segs+1)
	shape := stagedShape{n: n, es: es, end: k - 1}
	if segs > 1 || b.staged != shape {
		if err := r.boardWait(b, op, -1, k-1); err != nil {
			return err
		}
	}
	b.staged = stagedShape{}
	for s := range segs {
		lo, hi := s*seg, min(n, (s+1)*seg)
		m := hi - lo
		slot := int((k + uint64(s)) % 2)
		ka, kb := k+uint64(2*s), k+uint64(2*s)+1
		share := func(p int) (int, int) {
			count := m / es
			a, z := p*count/np*es, (p+1)*count/np*es
			if p == np-1 {
				z = m // a tail shorter than es stays with the last share
			}
			return a, z
		}
		if s == 0 {
			r.boardSetCount(b, slot, n)
		}
		a, z := share(b.rank)
		mine := b.BoardSlot(b.rank, slot)
		cachedCopy(mine[:a], in[lo:lo+a])
		cachedCopy(mine[z:m], in[lo+z:hi])
		b.BoardPost(ka, false)
		if err := r.boardWait(b, op, -1, ka); err != nil {
			return err
		}
		if s == 0 {
			if err := r.boardCheck(b, op, slot, n); err != nil {
				// Every process sees the same counts and stops here:
				// this collective took round k only.
				b.seq.Store(k)
				return err
			}
		}
		for off := a; off < z; off += piece {
			e := min(z, off+piece)
			acc := out[lo+off : lo+e]
			if !inPlace {
				copy(acc, in[lo+off:lo+e])
			}
			for i := 1; i < np; i++ {
				p := (b.rank + i) % np
				red.apply(b.BoardSlot(p, slot)[off:e], acc)
			}
			copy(mine[off:e], acc) // the piece is still in cache
		}
		b.BoardPost(kb, false)
		if err := r.boardWait(b, op, -1, kb); err != nil {
			return err
		}
		for i := 1; i < np; i++ {
			p := (b.rank + i) % np
			a, z := share(p)
			cachedCopy(out[lo+a:lo+z], b.BoardSlot(p, slot)[a:z])
		}
	}
	last := k + uint64(2*segs) + 1
	b.BoardPost(last, false)
	if segs == 1 {
		b.staged = stagedShape{n: n, es: es, end: last}
	}
	return nil
}

// stagedShape is what a one-segment boardAllreduceStaged leaves in the
// slots for the next collective: its byte count and element size, which
// fix every process's share, and its last round. The next one of the same
// shape, starting right after that round, skips its wait for it (that
// every process is done copying shares out of the slots): it writes into
// its own slot only what lies outside its share (round A), which is all
// that the previous one's copies out read there, and its folds and own
// share wait for round A, which every process posts only once it is done
// with the previous one. The previous one's folds, the only other readers
// of its slot, ended before its round B, which it waited for. Dropping the
// wait takes one of the three points per call at which every process must
// have had a turn on a CPU (ranks outnumbering cores).
type stagedShape struct {
	n, es int
	end   uint64
}

// boardBcastStaged broadcasts data larger than a slot through the slots,
// a slot at a time (boardBcast per segment), for jobs whose ranks outnumber
// cores: the root copies segment s+1 into its other slot while the others
// copy segment s out. On a crowded machine this beats both the binomial
// tree of process_vm_readv reads (boardBcastLarge) and every process
// reading the root's buffer directly (docs/performance.md).
func (r *runtime) boardBcastStaged(b *board, data []byte, root int) error {
	seg := b.BoardSlotSize()
	for off := 0; off < len(data); off += seg {
		if err := r.boardBcast(b, data[off:min(len(data), off+seg)], root, len(data)); err != nil {
			return err
		}
	}
	return nil
}
