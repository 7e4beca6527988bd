package mpi

import (
	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/datatype"
)

// Root is MPI_ROOT, the root argument of the root process of a rooted
// collective on an intercommunicator.
//
// Collectives on intercommunicators (MPI 4.1 §6.2.2) give the two groups
// different parts:
//
//   - Rooted calls (Bcast, Gather(v), Scatter(v), Reduce) move data between
//     the root, in one group, and every process of the other group. In the
//     root's group the root passes Root and every other process ProcNull
//     (for them the call does nothing and no buffer is significant); the
//     processes of the other group pass the root's rank in the remote group.
//   - Allgather(v) and Alltoall(v,w) give each group the other group's
//     data: counts, displacements and blocks are per remote process.
//   - Allreduce gives each group the reduction of the OTHER group's data;
//     ReduceScatter(Block) scatters the reduction of the other group's data
//     over this group (the counts describe this group's blocks, and both
//     groups must reduce vectors of the same length).
//   - Barrier returns once every process of both groups has entered it.
//
// InPlace is not allowed on intercommunicators (ErrBuffer); Scan and Exscan
// and the neighbourhood collectives are not defined on them (ErrComm). The
// non-blocking and persistent forms work on them too.
//
// The algorithms are MPICH's: a collective within each group over the
// local group plus one exchange between the groups' leaders (rank 0), or
// direct messages between the root and the remote processes. They run on
// the intercommunicator's collective context, which both groups agreed on
// when it was made; its local and remote processes are disjoint, so the
// intra-group and the inter-group messages of one collective are told apart
// by their source, and its phases by sub-tags (the low collSubBits bits of
// the tag).
const Root = -3

// sub is an environment of the collective e over processes world, whose
// messages carry sub-tag k.
func (e *coll) sub(world []int, rank, k int) *coll {
	return &coll{r: e.r, op: e.op, ctx: e.ctx, world: world, rank: rank, size: len(world), tag: e.tag + k, h: e.h.untiered()}
}

// loc is the local group's part of an intercommunicator collective; peers
// are local ranks.
func (c *Comm) loc(e *coll, k int) *coll { return e.sub(c.lworld, c.rank, k) }

// rem addresses the remote group; peers are remote ranks.
func (c *Comm) rem(e *coll, k int) *coll { return e.sub(c.world, c.rank, k) }

// newPlanAny is newPlan for intra- and intercommunicators alike.
func newPlanAny(op string, c *Comm) (*plan, error) {
	r, err := current(op)
	if err != nil {
		return nil, err
	}
	if err := checkComm(op, c); err != nil {
		return nil, err
	}
	return &plan{r: r, c: c, op: op}, nil
}

// The parts a process plays in a rooted intercommunicator collective.
const (
	roleIdle   = iota // ProcNull: the root's group, not the root
	roleRoot          // Root
	roleRemote        // the other group; root is a remote rank
)

func interRole(op string, c *Comm, root int) (int, error) {
	switch {
	case root == Root:
		return roleRoot, nil
	case root == ProcNull:
		return roleIdle, nil
	case root >= 0 && root < c.RemoteSize():
		return roleRemote, nil
	}
	return 0, errorf(ErrRoot, op, "root %d of intercommunicator %s is not Root, ProcNull or a rank of the remote group [0, %d)", root, c.name, c.RemoteSize())
}

func noInPlace(op string, bs ...Buffer) error {
	for _, b := range bs {
		if isInPlace(b) {
			return errorf(ErrBuffer, op, "InPlace is not allowed on an intercommunicator")
		}
	}
	return nil
}

// newInterPlan is newPlanAny for a collective on an intercommunicator,
// where none of the buffers bs may be InPlace.
func newInterPlan(op string, c *Comm, bs ...Buffer) (*plan, error) {
	p, err := newPlanAny(op, c)
	if err != nil {
		return nil, err
	}
	if err := noInPlace(op, bs...); err != nil {
		return nil, err
	}
	return p, nil
}

// newInterRooted is newInterPlan for a rooted collective: it also returns
// the part this process plays, and gives the idle part its (empty) run.
func newInterRooted(op string, c *Comm, root int, bs ...Buffer) (*plan, int, error) {
	p, err := newPlanAny(op, c)
	if err != nil {
		return nil, 0, err
	}
	role, err := interRole(op, c, root)
	if err != nil {
		return nil, 0, err
	}
	if err := noInPlace(op, bs...); err != nil {
		return nil, 0, err
	}
	if role == roleIdle {
		p.run = idle
	}
	return p, role, nil
}

// idle is the run of a process with nothing to do.
func idle(*coll) error { return nil }

// equalBlocks checks that what's buffer b splits into n equal blocks.
func equalBlocks(op, what string, b Buffer, n int) error {
	if b.Size()%n != 0 {
		return errorf(ErrCount, op, "%s buffer of %d bytes is not %d equal blocks", what, b.Size(), n)
	}
	return nil
}

// interGatherLocal gathers this group's blocks mine to its leader (sub-tag
// 1) and returns them there (nil elsewhere); the caller releases them.
func interGatherLocal(c *Comm, e *coll, mine []byte) ([]byte, error) {
	var all []byte
	if c.rank == 0 {
		all = scratch(c.Size() * len(mine))
	}
	if err := c.loc(e, 1).gather(mine, all, 0); err != nil {
		release(all)
		return nil, err
	}
	return all, nil
}

// interSwapBcast swaps mine (significant at the leader) for the remote
// leader's data, between the leaders (sub-tag 2), and broadcasts what came
// into recv across this group (sub-tag 3).
func interSwapBcast(c *Comm, e *coll, mine []byte, recv Buffer) error {
	r, done := packOut(recv, false)
	if c.rank == 0 {
		if err := c.rem(e, 2).sendrecv(0, mine, 0, r); err != nil {
			return err
		}
	}
	if err := c.loc(e, 3).bcast(r, 0); err != nil {
		return err
	}
	done()
	return nil
}

// ---- Barrier, Bcast ----

func interBarrierPlan(op string, c *Comm) (*plan, error) {
	p, err := newPlanAny(op, c)
	if err != nil {
		return nil, err
	}
	p.run = func(e *coll) error {
		// Everyone here has arrived once the local barrier ends; the leaders
		// then learn that the other group has too, and tell their groups.
		if err := c.loc(e, 1).barrier(); err != nil {
			return err
		}
		tok := []byte{1}
		if c.rank == 0 {
			if err := c.rem(e, 2).sendrecv(0, nil, 0, nil); err != nil {
				return err
			}
		}
		return c.loc(e, 3).bcast(tok, 0)
	}
	return p, nil
}

func interBcastPlan(op string, c *Comm, b Buffer, root int) (*plan, error) {
	p, role, err := newInterRooted(op, c, root, b)
	if err != nil || role == roleIdle {
		return p, err
	}
	if err := checkBuffer(op, b); err != nil {
		return nil, err
	}
	if role == roleRoot {
		p.run = func(e *coll) error { return c.rem(e, 1).send(0, packIn(b)) }
		return p, nil
	}
	p.run = func(e *coll) error {
		buf, done := packOut(b, false)
		if c.rank == 0 {
			if err := c.rem(e, 1).recv(root, buf); err != nil {
				return err
			}
		}
		if err := c.loc(e, 2).bcast(buf, 0); err != nil {
			return err
		}
		done()
		return nil
	}
	return p, nil
}

// ---- Gather, Scatter ----

func interGatherPlan(op string, c *Comm, send, recv Buffer, root int) (*plan, error) {
	p, role, err := newInterRooted(op, c, root, send, recv)
	if err != nil {
		return nil, err
	}
	switch role {
	case roleRoot:
		if err := checkBuffer(op, recv); err != nil {
			return nil, err
		}
		if err := equalBlocks(op, "receive", recv, c.RemoteSize()); err != nil {
			return nil, err
		}
		p.run = func(e *coll) error { return recvPacked(c.rem(e, 2), 0, recv) }
	case roleRemote:
		if err := checkBuffer(op, send); err != nil {
			return nil, err
		}
		p.run = func(e *coll) error {
			// Gather to the group's leader, which sends it all to the root.
			all, err := interGatherLocal(c, e, packIn(send))
			if err != nil {
				return err
			}
			defer release(all)
			if c.rank == 0 {
				return c.rem(e, 2).send(root, all)
			}
			return nil
		}
	}
	return p, nil
}

func interGathervPlan(op string, c *Comm, send, recv Buffer, counts, displs []int, root int) (*plan, error) {
	p, role, err := newInterRooted(op, c, root, send, recv)
	if err != nil {
		return nil, err
	}
	switch role {
	case roleRoot:
		sz, err := vlayoutN(op, c.RemoteSize(), recv, counts, displs)
		if err != nil {
			return nil, err
		}
		p.run = func(e *coll) error { return recvBlocks(c.rem(e, 1), recv, counts, displs, sz, -1) }
	case roleRemote:
		if err := checkBuffer(op, send); err != nil {
			return nil, err
		}
		p.run = func(e *coll) error {
			if send.Size() == 0 {
				return nil
			}
			return c.rem(e, 1).send(root, packIn(send))
		}
	}
	return p, nil
}

func interScatterPlan(op string, c *Comm, send, recv Buffer, root int) (*plan, error) {
	p, role, err := newInterRooted(op, c, root, send, recv)
	if err != nil {
		return nil, err
	}
	switch role {
	case roleRoot:
		if err := checkBuffer(op, send); err != nil {
			return nil, err
		}
		if err := equalBlocks(op, "send", send, c.RemoteSize()); err != nil {
			return nil, err
		}
		// The remote leader scatters the whole buffer in its group.
		p.run = func(e *coll) error { return c.rem(e, 1).send(0, packIn(send)) }
	case roleRemote:
		if err := checkBuffer(op, recv); err != nil {
			return nil, err
		}
		p.run = func(e *coll) error {
			mine, done := packOut(recv, false)
			var all []byte
			if c.rank == 0 {
				all = scratch(c.Size() * len(mine))
				defer release(all)
				if err := c.rem(e, 1).recv(root, all); err != nil {
					return err
				}
			}
			if err := c.loc(e, 2).scatter(all, mine, 0); err != nil {
				return err
			}
			done()
			return nil
		}
	}
	return p, nil
}

func interScattervPlan(op string, c *Comm, send Buffer, counts, displs []int, recv Buffer, root int) (*plan, error) {
	p, role, err := newInterRooted(op, c, root, send, recv)
	if err != nil {
		return nil, err
	}
	switch role {
	case roleRoot:
		sz, err := vlayoutN(op, c.RemoteSize(), send, counts, displs)
		if err != nil {
			return nil, err
		}
		p.run = func(e *coll) error { return sendBlocks(c.rem(e, 1), send, counts, displs, sz, -1) }
	case roleRemote:
		if err := checkBuffer(op, recv); err != nil {
			return nil, err
		}
		p.run = func(e *coll) error {
			if recv.Size() == 0 {
				return nil
			}
			return recvPacked(c.rem(e, 1), root, recv)
		}
	}
	return p, nil
}

// ---- Allgather, Alltoall ----

func interAllgatherPlan(op string, c *Comm, send, recv Buffer) (*plan, error) {
	p, err := newInterPlan(op, c, send, recv)
	if err != nil {
		return nil, err
	}
	if err := checkBufs(op, send, recv); err != nil {
		return nil, err
	}
	if err := equalBlocks(op, "receive", recv, c.RemoteSize()); err != nil {
		return nil, err
	}
	p.run = func(e *coll) error {
		// Gather to the leader, swap the groups' data between the leaders,
		// broadcast the other group's in this one.
		all, err := interGatherLocal(c, e, packIn(send))
		if err != nil {
			return err
		}
		defer release(all)
		return interSwapBcast(c, e, all, recv)
	}
	return p, nil
}

func interAllgathervPlan(op string, c *Comm, send, recv Buffer, counts, displs []int) (*plan, error) {
	p, err := newInterPlan(op, c, send, recv)
	if err != nil {
		return nil, err
	}
	if err := checkBuffer(op, send); err != nil {
		return nil, err
	}
	nr := c.RemoteSize()
	sz, err := vlayoutN(op, nr, recv, counts, displs)
	if err != nil {
		return nil, err
	}
	p.run = func(e *coll) error {
		// Every process sends its block to the remote leader, which
		// receives the other group's blocks and broadcasts them packed.
		off := make([]int, nr+1)
		for i := range sz {
			off[i+1] = off[i] + sz[i]
		}
		all := scratch(off[nr])
		defer release(all)
		x := c.rem(e, 1)
		var sq *adi.Request
		if send.Size() > 0 {
			var err error
			if sq, err = x.isend(0, packIn(send)); err != nil {
				return err
			}
		}
		if c.rank == 0 {
			reqs := make([]*adi.Request, nr)
			for i := range sz {
				if sz[i] == 0 {
					continue
				}
				q, err := x.irecv(i, all[off[i]:off[i+1]])
				if err != nil {
					_ = x.wait(append(reqs, sq)...)
					return err
				}
				reqs[i] = q
			}
			if err := x.wait(reqs...); err != nil {
				_ = x.wait(sq)
				return err
			}
		}
		berr := c.loc(e, 2).bcast(all, 0)
		if err := x.wait(sq); err != nil {
			return err
		}
		if berr != nil {
			return berr
		}
		for i := range sz {
			if sz[i] > 0 {
				block(recv, displs[i], counts[i]).CopyIn(0, all[off[i]:off[i+1]])
			}
		}
		return nil
	}
	return p, nil
}

// interAlltoallv exchanges block j of send (soff, ssz) with remote rank j,
// whose block for this process lands in block j of recv (roff, rsz), by
// MPICH's pairwise steps: in step i local rank a sends to remote rank a+i
// and receives from remote rank a-i (mod the larger group's size).
func interAlltoallv(c *Comm, e *coll, send []byte, soff, ssz []int, recv []byte, roff, rsz []int) error {
	x := c.rem(e, 1)
	nr, me := c.RemoteSize(), c.rank
	mx := max(c.Size(), nr)
	for i := 0; i < mx; i++ {
		dst, src := (me+i)%mx, (me-i+mx)%mx
		var sb, rb []byte
		if dst >= nr || ssz[dst] == 0 {
			dst = nonePeer
		} else {
			sb = send[soff[dst] : soff[dst]+ssz[dst]]
		}
		if src >= nr || rsz[src] == 0 {
			src = nonePeer
		} else {
			rb = recv[roff[src] : roff[src]+rsz[src]]
		}
		if dst == nonePeer && src == nonePeer {
			continue
		}
		if err := x.sendrecv(dst, sb, src, rb); err != nil {
			return err
		}
	}
	return nil
}

func interAlltoallPlan(op string, c *Comm, send, recv Buffer) (*plan, error) {
	p, err := newInterPlan(op, c, send, recv)
	if err != nil {
		return nil, err
	}
	if err := checkBufs(op, send, recv); err != nil {
		return nil, err
	}
	nr := c.RemoteSize()
	if send.Size()%nr != 0 || recv.Size()%nr != 0 {
		return nil, errorf(ErrCount, op, "send %d and receive %d bytes are not %d equal blocks each", send.Size(), recv.Size(), nr)
	}
	sbs, rbs := send.Size()/nr, recv.Size()/nr
	p.run = func(e *coll) error {
		soff, ssz, roff, rsz := make([]int, nr), make([]int, nr), make([]int, nr), make([]int, nr)
		for i := range soff {
			soff[i], ssz[i], roff[i], rsz[i] = i*sbs, sbs, i*rbs, rbs
		}
		r, done := packOut(recv, false)
		if err := interAlltoallv(c, e, packIn(send), soff, ssz, r, roff, rsz); err != nil {
			return err
		}
		done()
		return nil
	}
	return p, nil
}

func interAlltoallvPlan(op string, c *Comm, send Buffer, scounts, sdispls []int, recv Buffer, rcounts, rdispls []int) (*plan, error) {
	p, err := newInterPlan(op, c, send, recv)
	if err != nil {
		return nil, err
	}
	nr := c.RemoteSize()
	ssz, err := vlayoutN(op, nr, send, scounts, sdispls)
	if err != nil {
		return nil, err
	}
	rsz, err := vlayoutN(op, nr, recv, rcounts, rdispls)
	if err != nil {
		return nil, err
	}
	p.run = func(e *coll) error {
		soff, roff := make([]int, nr+1), make([]int, nr+1)
		for i := 0; i < nr; i++ {
			soff[i+1], roff[i+1] = soff[i]+ssz[i], roff[i]+rsz[i]
		}
		s, r := scratch(soff[nr]), scratch(roff[nr])
		defer release(s, r)
		for i := 0; i < nr; i++ {
			if ssz[i] > 0 {
				block(send, sdispls[i], scounts[i]).CopyOut(0, s[soff[i]:soff[i+1]])
			}
		}
		if err := interAlltoallv(c, e, s, soff[:nr], ssz, r, roff[:nr], rsz); err != nil {
			return err
		}
		for i := 0; i < nr; i++ {
			if rsz[i] > 0 {
				block(recv, rdispls[i], rcounts[i]).CopyIn(0, r[roff[i]:roff[i+1]])
			}
		}
		return nil
	}
	return p, nil
}

// ---- Reductions ----

// interReduceLocal reduces this group's inputs to its leader (sub-tag 1)
// and returns the result there (nil elsewhere); the caller releases it.
func interReduceLocal(c *Comm, e *coll, in []byte, red reducer) ([]byte, error) {
	var acc []byte
	if c.rank == 0 {
		acc = scratch(len(in))
	}
	if err := c.loc(e, 1).reduce(in, acc, red, 0); err != nil {
		release(acc)
		return nil, err
	}
	return acc, nil
}

func interReducePlan(op string, c *Comm, send, recv Buffer, o *Op, root int) (*plan, error) {
	p, role, err := newInterRooted(op, c, root, send, recv)
	if err != nil {
		return nil, err
	}
	switch role {
	case roleRoot:
		if err := checkBuffer(op, recv); err != nil {
			return nil, err
		}
		if _, err := reducerFor(op, o, recv.Type, recv.Count); err != nil {
			return nil, err
		}
		p.run = func(e *coll) error { return recvPacked(c.rem(e, 2), 0, recv) }
	case roleRemote:
		in, _, red, err := reduceArgs(op, send, recv, o, false)
		if err != nil {
			return nil, err
		}
		p.run = func(e *coll) error {
			acc, err := interReduceLocal(c, e, packIn(in), red)
			if err != nil {
				return err
			}
			defer release(acc)
			if c.rank == 0 {
				return c.rem(e, 2).send(root, acc)
			}
			return nil
		}
	}
	return p, nil
}

func interAllreducePlan(op string, c *Comm, send, recv Buffer, o *Op) (*plan, error) {
	p, err := newInterPlan(op, c, send, recv)
	if err != nil {
		return nil, err
	}
	in, _, red, err := reduceArgs(op, send, recv, o, true)
	if err != nil {
		return nil, err
	}
	if recv.Count != in.Count {
		return nil, errorf(ErrCount, op, "sends %d elements but receives %d", in.Count, recv.Count)
	}
	p.run = func(e *coll) error {
		// Reduce each group to its leader, swap the results between the
		// leaders, broadcast the other group's in this one.
		acc, err := interReduceLocal(c, e, packIn(in), red)
		if err != nil {
			return err
		}
		defer release(acc)
		return interSwapBcast(c, e, acc, recv)
	}
	return p, nil
}

// interReduceScatterPlan: counts (nil for ReduceScatterBlock, where every
// block is recv.Count elements) say how the other group's reduced vector is
// cut among this group's processes; this group's input has their sum.
func interReduceScatterPlan(op string, c *Comm, send, recv Buffer, counts []int, o *Op) (*plan, error) {
	p, err := newInterPlan(op, c, send, recv)
	if err != nil {
		return nil, err
	}
	in, _, red, err := reduceArgs(op, send, recv, o, true)
	if err != nil {
		return nil, err
	}
	n, me := c.Size(), c.rank
	if counts == nil {
		counts = make([]int, n)
		for i := range counts {
			counts[i] = recv.Count
		}
	}
	if len(counts) != n {
		return nil, errorf(ErrCount, op, "%d counts for the %d processes of the local group", len(counts), n)
	}
	total := 0
	for i, k := range counts {
		if k < 0 {
			return nil, errorf(ErrCount, op, "count %d of rank %d is negative", k, i)
		}
		total += k
	}
	if in.Count != total {
		return nil, errorf(ErrCount, op, "input has %d elements, counts sum to %d", in.Count, total)
	}
	if recv.Count != counts[me] {
		return nil, errorf(ErrCount, op, "receive buffer has %d elements, count says %d", recv.Count, counts[me])
	}
	es := in.Type.Size()
	p.run = func(e *coll) error {
		acc, err := interReduceLocal(c, e, packIn(in), red)
		if err != nil {
			return err
		}
		defer release(acc)
		r, done := packOut(recv, false)
		if c.rank != 0 {
			if len(r) > 0 {
				if err := c.loc(e, 3).recv(0, r); err != nil {
					return err
				}
			}
			done()
			return nil
		}
		full := scratch(len(acc))
		defer release(full)
		if err := c.rem(e, 2).sendrecv(0, acc, 0, full); err != nil {
			return err
		}
		x := c.loc(e, 3)
		var pending []*adi.Request
		off := 0
		for i, k := range counts {
			if i == 0 {
				copy(r, full[:k*es])
			} else if k > 0 {
				q, err := x.isend(i, full[off:off+k*es])
				if err != nil {
					_ = x.wait(pending...)
					return err
				}
				pending = append(pending, q)
			}
			off += k * es
		}
		if err := x.wait(pending...); err != nil {
			return err
		}
		done()
		return nil
	}
	return p, nil
}

// ---- Communicator creation ----

// interAnd ANDs buf (uint64 words) over both groups of c: within each
// group, between the leaders, and back to every process. Its messages use
// sub-tags k, k+1 and k+2.
func interAnd(c *Comm, e *coll, buf []byte, k int) error {
	band := reducer{true, builtin(opBand, datatype.Uint64)}
	if err := c.loc(e, k).allreduce(buf, band, 8); err != nil {
		return err
	}
	if c.rank == 0 {
		other := make([]byte, len(buf))
		if err := c.rem(e, k+1).sendrecv(0, buf, 0, other); err != nil {
			return err
		}
		band.apply(other, buf)
	}
	return c.loc(e, k+2).bcast(buf, 0)
}

// interDup is Dup on an intercommunicator: both groups agree on a context
// pair, and the copy has the same local and remote groups.
func (c *Comm) interDup(op string) (*Comm, error) {
	r, err := current(op)
	if err != nil {
		return nil, err
	}
	if err := checkComm(op, c); err != nil {
		return nil, err
	}
	mask := r.ids.snapshot()
	if err := interAnd(c, c.newColl(r, op), mask, 1); err != nil {
		return nil, err
	}
	pair := lowest(mask)
	if pair < 0 {
		return nil, errorf(ErrOther, op, "no free context id: %d communicators are alive", idupLo-2)
	}
	r.ids.take(pair)
	n := c.derived(uint32(2*pair), c.rank, c.world, "dup")
	n.inter, n.lworld = true, c.lworld
	noteComm(n)
	n.copyAttrs(c)
	return n, nil
}
