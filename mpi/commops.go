package mpi

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/adimpi/adimpi/datatype"
)

// ctxPairs is how many context-id pairs a job has: a communicator holds the
// pair (2i, 2i+1), for point-to-point and collective traffic. Pair 0 is
// MPI_COMM_WORLD's and pair 1 MPI_COMM_SELF's; the rest are allocated as
// communicators are created, so up to ctxPairs-2 communicators made by
// Dup, Split, Create, ... can be alive at once.
const ctxPairs = 16384

// idupPairs is how many of the highest context-id pairs are kept for Idup,
// whose agreement runs in the background and may overlap other creations
// in the same process (see idup.go); the blocking creation calls use only
// the pairs below idupLo, so the two never contend for a pair.
const (
	idupPairs = 4096
	idupLo    = ctxPairs - idupPairs
)

// ctxIDs is a process's mask of free context-id pairs (a set bit is free).
// A new communicator's pair is the lowest pair free on every member: the
// members AND their masks together (an allreduce over the parent) and take
// its lowest set bit. Free returns the pair to the mask.
//
// Blocking communicator creation calls must not run concurrently in one
// process (from several goroutines): two of them could pick the same pair.
// Idup's background agreements use their own pairs and a take-or-retry
// protocol instead (idup.go).
type ctxIDs struct {
	mu    sync.Mutex
	words []uint64
}

func (m *ctxIDs) snapshot() []byte { return m.snapshotRange(0, idupLo) }

// snapshotRange is the mask of pairs [lo, hi) (multiples of 64); bit i of
// the result is pair lo+i.
func (m *ctxIDs) snapshotRange(lo, hi int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.words == nil {
		m.words = make([]uint64, ctxPairs/64)
		for i := range m.words {
			m.words[i] = ^uint64(0)
		}
		m.words[0] &^= 3 // world, self
	}
	words := m.words[lo/64 : hi/64]
	b := make([]byte, 8*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint64(b[8*i:], w)
	}
	return b
}

// tryTake takes pair if it is still free and reports whether it did.
func (m *ctxIDs) tryTake(pair int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	bit := uint64(1) << (pair % 64)
	if m.words[pair/64]&bit == 0 {
		return false
	}
	m.words[pair/64] &^= bit
	return true
}

// lowest finds the lowest pair free in the ANDed mask b, or -1.
func lowest(b []byte) int {
	for i := 0; i < len(b); i += 8 {
		if w := binary.LittleEndian.Uint64(b[i:]); w != 0 {
			return i/8*64 + bits.TrailingZeros64(w)
		}
	}
	return -1
}

func (m *ctxIDs) take(pair int) {
	m.mu.Lock()
	m.words[pair/64] &^= 1 << (pair % 64)
	m.mu.Unlock()
}

func (m *ctxIDs) release(pair int) {
	m.mu.Lock()
	m.words[pair/64] |= 1 << (pair % 64)
	m.mu.Unlock()
}

// agreeContext runs the context-id agreement over e's processes and returns
// the pair every one of them has free; reserve says whether this process
// takes it (a process that gets no new communicator does not).
func agreeContext(r *runtime, e *coll, reserve bool) (uint32, error) {
	mask := r.ids.snapshot()
	if err := e.allreduce(mask, reducer{true, builtin(opBand, datatype.Uint64)}, 8); err != nil {
		return 0, err
	}
	pair := lowest(mask)
	if pair < 0 {
		return 0, errorf(ErrOther, e.op, "no free context id: %d communicators are alive", idupLo-2)
	}
	if reserve {
		r.ids.take(pair)
	}
	return uint32(2 * pair), nil
}

func (c *Comm) derived(ctx uint32, rank int, world []int, suffix string) *Comm {
	n := newComm(fmt.Sprintf("%s.%s", c.name, suffix), ctx, rank, world)
	n.owned = true
	n.inheritErrhandler(c)
	return n
}

// collStart checks MPI is running and c is a live communicator.
func collStart(op string, c *Comm) (*runtime, error) {
	r, err := current(op)
	if err != nil {
		return nil, err
	}
	if err := checkComm(op, c); err != nil {
		return nil, err
	}
	if c.inter {
		return nil, errorf(ErrComm, op, "%s is an intercommunicator, on which %s is not supported", c.name, op)
	}
	return r, nil
}

// Dup makes a new communicator with the same group (and topology) as c and
// a new context (MPI_Comm_dup). It is collective over c; on an
// intercommunicator, over both groups, and the copy is an intercommunicator
// with the same local and remote groups. Idup is the non-blocking form.
func (c *Comm) Dup() (*Comm, error) {
	n, err := c.dup()
	return n, c.raise(err)
}

// dup is Dup without the error handler.
func (c *Comm) dup() (*Comm, error) {
	if c.IsInter() {
		return c.interDup("MPI_Comm_dup")
	}
	n, err := c.dupBare()
	if err != nil {
		return nil, err
	}
	n.copyAttrs(c)
	return n, nil
}

// dupBare is dup of an intracommunicator without its attributes (a
// window's own communicator).
func (c *Comm) dupBare() (*Comm, error) {
	const op = "MPI_Comm_dup"
	r, err := collStart(op, c)
	if err != nil {
		return nil, err
	}
	ctx, err := agreeContext(r, c.newColl(r, op), true)
	if err != nil {
		return nil, err
	}
	n := c.derived(ctx, c.rank, c.world, "dup")
	n.topo = c.topo
	return n, nil
}

// Split partitions c (MPI_Comm_split): the processes that give the same
// color form a new communicator, ranked by key and then by rank in c. A
// process giving color Undefined gets a nil communicator. Colors must be
// non-negative or Undefined. It is collective over c.
func (c *Comm) Split(color, key int) (*Comm, error) {
	n, err := c.split(color, key)
	return n, c.raise(err)
}

// split is Split without the error handler.
func (c *Comm) split(color, key int) (*Comm, error) {
	const op = "MPI_Comm_split"
	r, err := collStart(op, c)
	if err != nil {
		return nil, err
	}
	if color < 0 && color != Undefined {
		return nil, errorf(ErrArg, op, "color %d is negative", color)
	}
	mine := make([]byte, 16)
	binary.LittleEndian.PutUint64(mine, uint64(int64(color)))
	binary.LittleEndian.PutUint64(mine[8:], uint64(int64(key)))
	all := make([]byte, 16*c.Size())
	e := c.newColl(r, op)
	if err := e.allgather(mine, all); err != nil {
		return nil, err
	}
	type member struct{ key, rank int }
	var ms []member
	for i := 0; i < c.Size(); i++ {
		col := int(int64(binary.LittleEndian.Uint64(all[16*i:])))
		k := int(int64(binary.LittleEndian.Uint64(all[16*i+8:])))
		if color != Undefined && col == color {
			ms = append(ms, member{k, i})
		}
	}
	// One context pair serves every part: the parts are disjoint.
	ctx, err := agreeContext(r, c.newColl(r, op), color != Undefined)
	if err != nil || color == Undefined {
		return nil, err
	}
	slices.SortStableFunc(ms, func(a, b member) int {
		if a.key != b.key {
			return cmp.Compare(a.key, b.key)
		}
		return cmp.Compare(a.rank, b.rank)
	})
	world := make([]int, len(ms))
	me := 0
	for i, m := range ms {
		world[i] = c.world[m.rank]
		if m.rank == c.rank {
			me = i
		}
	}
	return c.derived(ctx, me, world, "split"), nil
}

// SplitTypeShared is the split type of SplitType that groups the processes
// sharing memory (MPI_COMM_TYPE_SHARED).
const SplitTypeShared = 1

// CommTypeShared is SplitTypeShared under the standard's name.
const CommTypeShared = SplitTypeShared

// SplitType partitions c by a property of the processes
// (MPI_Comm_split_type); the only type is SplitTypeShared, which gives
// each process a communicator of the processes of c on its host (same
// kernel, process and mount namespaces: they share memory), ordered by
// key; Undefined gives a nil communicator.
func (c *Comm) SplitType(splitType, key int) (*Comm, error) {
	n, err := c.splitByType(splitType, key)
	return n, c.raise(err)
}

// splitByType is SplitType without the error handler.
func (c *Comm) splitByType(splitType, key int) (*Comm, error) {
	const op = "MPI_Comm_split_type"
	if splitType != SplitTypeShared && splitType != Undefined {
		return nil, errorf(ErrArg, op, "split type %d is not SplitTypeShared or Undefined", splitType)
	}
	r, err := collStart(op, c)
	if err != nil {
		return nil, err
	}
	color := Undefined
	if splitType == SplitTypeShared {
		color = r.place[c.world[c.rank]]
	}
	return c.split(color, key)
}

// Create makes a communicator of the processes in g, which must be a subset
// of c's group (MPI_Comm_create). It is collective over c, and every process
// must pass the same group; processes not in g get a nil communicator.
func (c *Comm) Create(g *Group) (*Comm, error) {
	n, err := c.create(g)
	return n, c.raise(err)
}

// create is Create without the error handler.
func (c *Comm) create(g *Group) (*Comm, error) {
	const op = "MPI_Comm_create"
	r, err := collStart(op, c)
	if err != nil {
		return nil, err
	}
	if err := checkGroup(op, g); err != nil {
		return nil, err
	}
	for _, w := range g.world {
		if _, ok := c.local[w]; !ok {
			return nil, errorf(ErrGroup, op, "group has world rank %d, which is not in %s", w, c.name)
		}
	}
	me, in := g.local[r.rank]
	ctx, err := agreeContext(r, c.newColl(r, op), in)
	if err != nil || !in {
		return nil, err
	}
	return c.derived(ctx, me, slices.Clone(g.world), "create"), nil
}

// CreateGroup makes a communicator of the processes in g, a subset of c's
// group (MPI_Comm_create_group). Unlike Create it is collective only over
// g's members, which must all call it with the same group and tag; calls
// with different tags may run at once on overlapping groups. The caller
// must be in g.
func (c *Comm) CreateGroup(g *Group, tag int) (*Comm, error) {
	n, err := c.createGroup(g, tag)
	return n, c.raise(err)
}

// createGroup is CreateGroup without the error handler.
func (c *Comm) createGroup(g *Group, tag int) (*Comm, error) {
	const op = "MPI_Comm_create_group"
	r, err := collStart(op, c)
	if err != nil {
		return nil, err
	}
	if err := checkGroup(op, g); err != nil {
		return nil, err
	}
	if err := checkTag(op, tag, false); err != nil {
		return nil, err
	}
	for _, w := range g.world {
		if _, ok := c.local[w]; !ok {
			return nil, errorf(ErrGroup, op, "group has world rank %d, which is not in %s", w, c.name)
		}
	}
	me, in := g.local[r.rank]
	if !in {
		return nil, errorf(ErrGroup, op, "the calling process is not in the group")
	}
	e := &coll{r: r, op: op, ctx: c.ctx + 1, world: g.world, rank: me, size: len(g.world), tag: 1<<collTagBits | tag&(1<<collTagBits-1)}
	ctx, err := agreeContext(r, e, true)
	if err != nil {
		return nil, err
	}
	return c.derived(ctx, me, slices.Clone(g.world), "create_group"), nil
}

// Free releases a communicator made by Dup, Split, Create, ... (MPI_Comm_free)
// and returns its context id for reuse. Every operation on it must be
// complete; using it afterwards is an ErrComm error. World and Self cannot be
// freed.
func (c *Comm) Free() error {
	return c.raise(c.free())
}

// free is Free without the error handler.
func (c *Comm) free() error {
	const op = "MPI_Comm_free"
	r, err := current(op)
	if err != nil {
		return err
	}
	if err := checkComm(op, c); err != nil {
		return err
	}
	if !c.owned {
		return errorf(ErrComm, op, "%s cannot be freed", c.name)
	}
	c.freed = true
	c.dropBoard()
	forgetComm(r, c)
	r.ids.release(int(c.ctx / 2))
	if err := c.dropAttrs(); err != nil {
		return errorf(ErrOther, op, "attribute delete callback: %v", err)
	}
	return nil
}

// Compare compares two communicators (MPI_Comm_compare): Ident if they are
// the same communicator, Congruent if their groups have the same members in
// the same order, Similar if the same members in another order, Unequal
// otherwise.
func Compare(a, b *Comm) (Comparison, error) {
	const op = "MPI_Comm_compare"
	if err := checkComm(op, a); err != nil {
		return Unequal, err
	}
	if err := checkComm(op, b); err != nil {
		return Unequal, err
	}
	if a == b {
		return Ident, nil
	}
	if a.inter != b.inter {
		return Unequal, nil
	}
	res := compareMembers(a.world, b.world)
	if a.inter {
		res = max(res, compareMembers(a.lworld, b.lworld))
	}
	if res == Ident {
		res = Congruent
	}
	return res, nil
}

// Compare compares c with o (MPI_Comm_compare); see the function Compare.
func (c *Comm) Compare(o *Comm) (Comparison, error) { return Compare(c, o) }
