package mpi

import (
	"sync/atomic"

	"github.com/adimpi/adimpi/adi"
)

// Special ranks and tags.
const (
	AnySource = adi.AnySource // receive from any rank
	AnyTag    = adi.AnyTag    // receive any tag
	ProcNull  = adi.ProcNull  // the null process: operations with it complete at once
	Undefined = -32766        // MPI_UNDEFINED: e.g. a count that is not a whole number of elements
	TagUB     = 1<<31 - 1     // the largest valid tag
)

// Comm is a communicator: a group of processes and a private context in which
// their messages match.
type Comm struct {
	name  string
	ctx   uint32 // point-to-point context id; ctx+1 is reserved for collectives
	rank  int
	world []int       // communicator rank → world rank
	local map[int]int // world rank → communicator rank

	freed   bool          // Free has been called
	owned   bool          // ctx was allocated from the context-id mask (Free returns it)
	collSeq atomic.Uint32 // collective sequence number, part of every collective's tag
	topo    *topology     // Cartesian or graph topology, nil if none

	// hier is how the ranks lie on hosts, once a collective needs it (collhier.go).
	hier atomic.Pointer[hierarchy]

	// board is the communicator's board, built at its first blocking
	// collective (boardTried), nil if it has none (collboards.go).
	board      *board
	boardTried bool
	// nodeBoard, when the ranks span hosts in tiers, is this host's
	// ranks' board, for the host phases of blocking tiered collectives.
	nodeBoard *board

	// An intercommunicator's world and local describe the remote group (the
	// ranks that point-to-point calls name); lworld is the local group.
	inter  bool
	lworld []int
	// joined: some process belongs to another job; the communicator's
	// traffic goes through the inter-job channel (join.go).
	joined bool

	attrs attrs[*Keyval]             // cached attributes (SetAttr, Attr)
	eh    atomic.Pointer[Errhandler] // the error handler; nil: ErrorsReturn
}

func identity(n int) []int {
	w := make([]int, n)
	for i := range w {
		w[i] = i
	}
	return w
}

func newComm(name string, ctx uint32, rank int, world []int) *Comm {
	c := &Comm{name: name, ctx: ctx, rank: rank, world: world, local: make(map[int]int, len(world))}
	for i, w := range world {
		c.local[w] = i
	}
	noteComm(c)
	return c
}

// World is MPI_COMM_WORLD: every process of the job. It is nil before Init.
func World() *Comm {
	r, err := current("MPI_COMM_WORLD")
	if err != nil {
		return nil
	}
	return r.world
}

// Self is MPI_COMM_SELF: this process alone. It is nil before Init.
func Self() *Comm {
	r, err := current("MPI_COMM_SELF")
	if err != nil {
		return nil
	}
	return r.self
}

// Rank is this process's rank in the communicator (-1 for a nil Comm).
func (c *Comm) Rank() int {
	if c == nil {
		return -1
	}
	return c.rank
}

// Size is the number of processes in the communicator (0 for a nil Comm).
func (c *Comm) Size() int {
	if c == nil {
		return 0
	}
	if c.inter {
		return len(c.lworld)
	}
	return len(c.world)
}

// Name is the communicator's name.
func (c *Comm) Name() string {
	if c == nil {
		return "MPI_COMM_NULL"
	}
	return c.name
}

// SetName names the communicator (for error messages and debugging).
func (c *Comm) SetName(name string) {
	if c != nil {
		c.name = name
	}
}

// worldRank translates a communicator rank; ranks are already checked.
func (c *Comm) worldRank(rank int) int {
	if rank < 0 {
		return rank // AnySource
	}
	return c.world[rank]
}

// commRank translates a world rank back into this communicator.
func (c *Comm) commRank(world int) int {
	if r, ok := c.local[world]; ok {
		return r
	}
	return world // AnySource, ProcNull
}
