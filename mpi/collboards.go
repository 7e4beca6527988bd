package mpi

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/internal/shm"
	iboard "github.com/adimpi/adimpi/mpi/internal/board"
)

// A communicator's board channel. Every intracommunicator whose ranks
// share a host, on any device, MPI_COMM_WORLD included, gets a board the
// core builds: one
// shared segment (mpi/internal/board) that the communicator's rank 0 exports
// and every other rank maps, agreed by every rank at the communicator's
// first blocking collective, so that all of them take the board paths from
// the same collective on, or none does. Each board numbers its own rounds,
// so collectives on different communicators never share a slot.
// MPI_COMM_WORLD takes a device's own board (netvm's) instead only when
// ADIMPI_DEVICE_BOARD=on asks (r.deviceBoard), for comparisons: a device
// board's waiters sleep on their own doorbells, which a round's last post
// rings one system call each, where a core-built board has one doorbell
// that every waiter sleeps on and one ring wakes.

// board is a communicator's board and what its ranks agreed on it.
type board struct {
	adi.Board
	own        *iboard.Board // the core-built board (nil: the device's), whose waits sleep on its own doorbell
	rank, size int           // this process's rank in the board's communicator, and its size
	seq        atomic.Uint64 // the last round taken
	polls      atomic.Uint32 // the polls of this board's crowded waits (boardYield)
	seen       atomic.Uint32 // the device's Seq at those waits' last progress pass
	// allPosted is the last round this process has seen every rank post
	// (boardWait): rounds up to it need no look, since a rank's posts only
	// grow, and a collective's wait for the round before it (that the slot
	// it writes is free) is then free of the np cache misses it takes.
	allPosted atomic.Uint64
	// staged is the shape of the last large Allreduce that passed through
	// the slots in one segment and the round it ended with
	// (boardAllreduceStaged): one of the same shape that follows it at
	// once need not wait for that round.
	staged stagedShape

	agreed   bool // boardAgree has run: readable and cores hold
	readable bool // every rank can BoardRead every other
	cores    int  // the least runtime.NumCPU of any rank

	// tail is closed when the last non-blocking board collective started
	// on the communicator is done: board collectives run one at a time,
	// in the order they were called (startBoard). Only the calling
	// goroutine reads and writes it, as MPI orders a communicator's
	// collectives.
	tail chan struct{}
}

// attachBoard builds c's board, at c's first blocking collective (every
// rank calls it there), and returns it, or nil when c gets none: an
// intercommunicator, one spanning jobs or hosts, a single rank, or a
// segment that some rank could not create or map. The verdict is agreed
// (an Allreduce), so every rank keeps the board or none does. A
// communicator whose ranks span hosts in tiers gets a board per host
// instead (nodeBoard), for the host phases of its blocking tiered
// collectives (collhier.go).
func (r *runtime) attachBoard(c *Comm) *board {
	c.boardTried = true
	if c.inter || c.joined || c.freed || len(c.world) < 2 {
		return nil
	}
	const op = "MPI_Comm_board"
	if h := c.hierOf(r); h.crosses() {
		if h.tiered() {
			// Every rank of c takes one collective number; each host's
			// ranks agree among themselves on the sub-tags of the
			// host phases.
			e := c.newColl(r, op)
			me := h.hostOf[c.rank]
			node := func(tag int) *coll {
				return &coll{r: r, op: op, ctx: e.ctx, world: h.nodeWorld[me], rank: h.nodeRank[c.rank], size: len(h.nodes[me]), tag: e.tag + tag}
			}
			if len(h.nodes[me]) > 1 {
				c.nodeBoard = r.buildBoard(node(hierTagIn), node(hierTagDown), c.ctx)
			}
		}
		return nil
	}
	if c == r.world && r.deviceBoard {
		if db, ok := r.dev.(adi.Board); ok {
			c.board = &board{Board: db, rank: r.rank, size: r.size}
			return c.board
		}
	}
	c.board = r.buildBoard(c.newColl(r, op), c.newColl(r, op), c.ctx)
	return c.board
}

// buildBoard builds a board for the ranks of e1 (e2: the same ranks, on
// another tag): rank 0 exports the segment and broadcasts where it lies
// (over e1), every other rank maps it, and an Allreduce (over e2) agrees
// that all did; nil if not.
func (r *runtime) buildBoard(e1, e2 *coll, ctx uint32) *board {
	n := e1.size
	var where [24]byte // rank 0's pid, descriptor and key; zero if it has no segment
	var seg *shm.Segment
	if e1.rank == 0 {
		if s, err := iboard.Export(fmt.Sprintf("adimpi-board-%d", ctx), n); err == nil {
			seg = s
			binary.LittleEndian.PutUint64(where[0:], uint64(os.Getpid()))
			binary.LittleEndian.PutUint64(where[8:], uint64(s.FD))
			binary.LittleEndian.PutUint64(where[16:], s.Key)
		}
	}
	if err := e1.bcast(where[:], 0); err != nil {
		seg.Close()
		return nil
	}
	if pid := int(binary.LittleEndian.Uint64(where[0:])); e1.rank != 0 && pid != 0 {
		s, err := shm.Import(pid, int(binary.LittleEndian.Uint64(where[8:])), binary.LittleEndian.Uint64(where[16:]))
		if err == nil {
			seg = s
		}
	}
	var bb *iboard.Board
	if seg != nil {
		bb, _ = iboard.New(seg, e1.rank, n)
	}
	var ok [8]byte
	if bb != nil {
		ok[0] = 1
	}
	err := e2.allreduce(ok[:], reducer{true, builtin(opBand, datatype.Uint64)}, 8)
	if err != nil || ok[0] != 1 || bb.Ready() != nil {
		seg.Close()
		return nil
	}
	bb.CloseFD() // every rank has mapped it: the mappings keep it alive
	return &board{Board: bb, own: bb, rank: e1.rank, size: n}
}

// dropBoard unmaps c's core-built boards (Free), once the non-blocking
// board collectives still running on them are done: Free does not wait for
// them, as MPI_Comm_free lets pending operations complete.
func (c *Comm) dropBoard() {
	if b := c.nodeBoard; b != nil {
		b.own.Close() // only blocking collectives use it
	}
	c.nodeBoard = nil
	if b := c.board; b != nil && b.own != nil {
		if t := b.tail; t != nil {
			go func() {
				<-t
				b.own.Close()
			}()
		} else {
			b.own.Close()
		}
	}
	c.board = nil
}

// boardNap bounds a sleep on a core-built board's doorbell: the device's
// messages do not ring it, so a sleeper wakes this often to drive the
// device's progress (a peer may need it for a point-to-point transfer
// before it reaches the collective).
const boardNap = time.Millisecond

// boardSleep is boardWait's wait on a core-built board: polls that drive
// the device's progress, then polls that yield the CPU (after boardAlone),
// then sleeps on the board's doorbell with the waiting flag up, as the
// device's waits do. When ranks outnumber cores it is boardYield.
func (r *runtime) boardSleep(b *board, cond func() bool) error {
	if r.poll == 0 {
		return r.boardYield(b, cond)
	}
	start := nanotime()
	raised, yield := false, false
	var err error
	for i := 0; ; i++ {
		if i%8 == 0 {
			if err = r.boardProgress(); err != nil {
				break
			}
		}
		if cond() {
			break
		}
		if i%16 != 15 {
			if yield {
				osYield()
			}
			continue
		}
		if waited := time.Duration(nanotime() - start); waited < r.spin || servingAgents.Load() > 0 {
			// A passive target keeps polling: the origins' one-sided
			// operations wait for this process's progress.
			yield = yield || waited >= min(r.poll, boardAlone)
			continue
		}
		if b.nap(&raised, cond) {
			break
		}
	}
	if raised {
		b.BoardWaiting(false)
	}
	return err
}

// nap sleeps on b's doorbell until it rings or boardNap passes, first
// telling the board that this member sleeps (once: *raised records it) and
// looking at cond once more after that, so that a post made before the
// announcement is not slept through; true: cond held, no sleep.
func (b *board) nap(raised *bool, cond func() bool) bool {
	bell := b.own.Bell()
	if !*raised {
		b.BoardWaiting(true)
		*raised = true
	}
	if cond() {
		return true
	}
	b.own.Sleep(bell, boardNap)
	return false
}

// boardYield is boardSleep when ranks outnumber cores, where a collective
// costs what its waiters' turns on the CPUs cost: every poll yields the CPU
// (the rank waited for may be queued behind this one), and a turn does as
// little else as it can, since the other ranks of the core queue behind it.
// It drives the device's progress only when the device's sequence word
// moved since the board's waits last did (adi.Device.Seq: something
// arrived that Progress would handle, perhaps before this wait began),
// every boardProgressPolls polls of the board's waits (a send in progress
// may need it), at every poll while a window's agent serves one-sided
// operations, and after every sleep. It reads the clock every 16th poll
// only, from the first; once r.spin has passed it sleeps on the board's
// doorbell, as boardSleep does.
func (r *runtime) boardYield(b *board, cond func() bool) error {
	var start int64
	raised, slept := false, false
	var err error
	for i := 0; ; i++ {
		if s := r.devSeq(); s != b.seen.Load() || slept || b.polls.Add(1)%boardProgressPolls == 0 || servingAgents.Load() > 0 {
			b.seen.Store(s) // read before the pass: what arrives during it moves Seq again
			if err = r.boardProgress(); err != nil {
				break
			}
		}
		if cond() {
			break
		}
		if i%16 == 15 && servingAgents.Load() == 0 {
			if now := nanotime(); start == 0 {
				start = now
			} else if time.Duration(now-start) >= r.spin {
				if b.nap(&raised, cond) {
					break
				}
				slept = true
				continue
			}
		}
		osYield()
	}
	if raised {
		b.BoardWaiting(false)
	}
	return err
}

// devSeq is the device's sequence word, read from the device itself
// rather than through the joinDev in front of it (which passes Seq on
// unchanged): one call and one structure fewer in every crowded poll.
func (r *runtime) devSeq() uint32 {
	if r.raw != nil {
		return r.raw.Seq()
	}
	return r.dev.Seq()
}

// boardProgressPolls is how many polls of a board's crowded waits
// (boardYield) pass between two passes of the device's progress that
// nothing asked for.
const boardProgressPolls = 32

// boardAlone is how long a board wait polls without yielding the CPU when
// every rank has a core: a peer that is running posts within a few
// microseconds, and one that is not (the machine is busier than the job)
// may be queued for this very CPU, which a poller would hold for a whole
// time slice (docs/performance.md).
const boardAlone = 20 * time.Microsecond

// boardProgress drives the device once, as a wait's poll does.
func (r *runtime) boardProgress() error {
	r.mu.Lock()
	_, err := r.dev.Progress()
	if rmaWork.Load() {
		r.serveRMA()
	}
	r.mu.Unlock()
	if err != nil {
		return errorf(ErrIntern, "progress", "device %s: %v", r.devName, err)
	}
	return nil
}

// startBoard returns c's board for a non-blocking or persistent
// collective started now, or nil: it never builds one (that takes a
// blocking exchange), so a communicator's non-blocking collectives take
// the board from its first blocking collective on. It returns the channel
// the collective must wait on before it runs (the previous one's) and the
// one it closes when done.
func (r *runtime) startBoard(c *Comm) (b *board, prev, done chan struct{}) {
	b = c.board
	if b == nil || !r.native {
		return nil, nil, nil
	}
	prev, done = b.tail, make(chan struct{})
	b.tail = done
	return b, prev, done
}

// boardRounds is the rounds run on MPI_COMM_WORLD's board (Counters).
func (r *runtime) boardRounds() int64 {
	if b := r.world.board; b != nil {
		return int64(b.seq.Load())
	}
	return 0
}
