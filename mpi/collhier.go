package mpi

import (
	"encoding/binary"

	"github.com/adimpi/adimpi/adi"
)

// Hierarchical collectives for communicators whose ranks span hosts.
//
// The boards and the device's native collectives (fm's multidestination
// sends) are shared memory: they reach only the ranks of one host. A
// communicator learns, once, how its ranks lie on hosts (hierOf, from the
// placement every rank agrees on: runtime.place); on more than one host it
// never takes those paths, and Barrier, Bcast, Reduce and Allreduce run in
// tiers: among the ranks of each host (the node group, over messages that
// the device carries through shared memory), among one leader per host (the
// node group's lowest rank, or the root for the root's host), and within
// each host again. Allgather and Gather gather each host's blocks at its
// leader first; Scatter sends them to it. The other collectives run their flat message algorithms.
// The hooks sit in the algorithms (collalg.go), so the blocking,
// non-blocking and persistent forms all run in tiers. A node group may use
// fm's multidestination sends (its ranks share a host), and a blocking
// tiered Barrier runs its host phases on the board of the host's ranks
// (Comm.nodeBoard); a communicator of one host's ranks made from a
// spanning one (SplitType's) gets a board of its own.
//
// Reductions keep rank order: a non-commutative operation is reduced in
// tiers only when every host's ranks are a contiguous range of the
// communicator's ranks (hosts then follow each other in rank order);
// otherwise it takes the flat algorithm.
//
// Counts that differ between ranks (see Barrier's doc) are found as by the
// flat algorithms: the reductions' trailers carry on from one tier to the
// next, the other collectives' exact receives and markers (isend) pass a
// mismatch from tier to tier, and each leader of Allreduce and Allgather
// tells its host the verdict before the result, which follows only when
// every count agrees (hierDown).
//
// A tiered collective's phases use sub-tags of their own (the low
// collSubBits bits of its tag), so their messages never match each other's
// even where a leader talks to the same peer in two phases.
const (
	hierTagIn   = 8  // node group: members to their leader
	hierTagTop  = 16 // the leaders
	hierTagDown = 24 // node group: leader to its members
)

// hierarchy is how a communicator's ranks lie on hosts. A communicator on
// one host has none (nil): its collectives are exactly the single-host ones.
type hierarchy struct {
	spans bool // the ranks lie on more than one host: no board, no multidestination sends

	// For tiered collectives (nil when every host holds one rank, where
	// tiers would only add steps, and for intercommunicators):
	nodes      [][]int // the communicator ranks on each host, ascending; hosts ordered by their lowest rank
	nodeWorld  [][]int // the same, as world ranks
	leaders    []int   // world rank of each host's lowest communicator rank
	hostOf     []int   // communicator rank -> index into nodes
	nodeRank   []int   // communicator rank -> its index in its node
	contiguous bool    // every host's ranks form a contiguous range
}

// crosses reports whether a collective with hierarchy h must keep off the
// device's shared-memory collectives.
func (h *hierarchy) crosses() bool { return h != nil && h.spans }

// tiered reports whether h's collectives run in tiers.
func (h *hierarchy) tiered() bool { return h != nil && h.nodes != nil }

// untiered is h for a collective over another set of ranks drawn from the
// same communicator (an intercommunicator's groups, Idup's agreement): it
// keeps off the native collectives where h does, without tiers.
func (h *hierarchy) untiered() *hierarchy {
	if !h.crosses() {
		return nil
	}
	return spanFlat
}

// spanFlat is the hierarchy of ranks across hosts that run flat algorithms.
var spanFlat = &hierarchy{spans: true}

// hierOf returns c's hierarchy, computing it at c's first collective: a
// single-host job (the common case) never computes any.
func (c *Comm) hierOf(r *runtime) *hierarchy {
	if c.joined {
		return spanFlat // across jobs: no device's native collectives
	}
	if !r.spread {
		return nil
	}
	if h := c.hier.Load(); h != nil {
		return h
	}
	h := newHierarchy(r.place, c.world, c.lworld, c.inter)
	c.hier.Store(h)
	return h
}

// newHierarchy computes the hierarchy of ranks world (with an
// intercommunicator's local group lworld) from place, world rank -> host.
func newHierarchy(place, world, lworld []int, inter bool) *hierarchy {
	first := place[world[0]]
	spans := false
	for _, g := range [][]int{world, lworld} {
		for _, w := range g {
			spans = spans || place[w] != first
		}
	}
	if !spans {
		return &hierarchy{}
	}
	if inter {
		return spanFlat
	}
	h := &hierarchy{spans: true, hostOf: make([]int, len(world)), nodeRank: make([]int, len(world)), contiguous: true}
	index := map[int]int{} // host -> index into nodes
	for i, w := range world {
		k, ok := index[place[w]]
		if !ok {
			k = len(h.nodes)
			index[place[w]] = k
			h.nodes = append(h.nodes, nil)
			h.nodeWorld = append(h.nodeWorld, nil)
			h.leaders = append(h.leaders, w)
		} else if last := h.nodes[k][len(h.nodes[k])-1]; last != i-1 {
			h.contiguous = false
		}
		h.hostOf[i], h.nodeRank[i] = k, len(h.nodes[k])
		h.nodes[k] = append(h.nodes[k], i)
		h.nodeWorld[k] = append(h.nodeWorld[k], w)
	}
	if len(h.nodes) == len(world) {
		return spanFlat // one rank per host: tiers are the flat algorithm
	}
	return h
}

// tiers are the two collectives a tiered collective of e runs: the leaders'
// (nil on a process that is no leader) and this process's node group's,
// with the leader of root's host being root (root -1: the lowest ranks).
// It returns them with the ranks of their roots: the leaders' root is the
// root's host, the node group's its leader.
func (e *coll) tiers(root, nodeTag int) (top *coll, topRoot int, node *coll, nodeRoot int) {
	h := e.h
	me := h.hostOf[e.rank]
	leaders := h.leaders
	if root >= 0 {
		topRoot = h.hostOf[root]
		if e.world[root] != leaders[topRoot] {
			leaders = append([]int(nil), leaders...)
			leaders[topRoot] = e.world[root]
		}
		if me == topRoot {
			nodeRoot = h.nodeRank[root]
		}
	}
	if e.world[e.rank] == leaders[me] {
		top = &coll{r: e.r, op: e.op, ctx: e.ctx, world: leaders, rank: me, size: len(leaders), tag: e.tag + hierTagTop, h: spanFlat}
	}
	// A node group lies on one host: it may use the native collectives.
	node = &coll{r: e.r, op: e.op, ctx: e.ctx, world: h.nodeWorld[me], rank: h.nodeRank[e.rank], size: len(h.nodes[me]), tag: e.tag + nodeTag, nb: e.nb}
	e.r.hierColls.Add(1)
	return
}

// hierBarrier: every member reports to its host's leader, the leaders run a
// barrier, and each leader releases its members.
func (e *coll) hierBarrier() error {
	top, _, in, _ := e.tiers(-1, hierTagIn)
	if in.nb != nil {
		return in.boardHostBarrier(top)
	}
	if in.rank != 0 {
		if err := in.send(0, nil); err != nil {
			return err
		}
		out := *in
		out.tag = e.tag + hierTagDown
		return out.recv(0, nil)
	}
	if err := in.gatherEmpty(); err != nil {
		return err
	}
	if err := top.barrier(); err != nil {
		return err
	}
	out := *in
	out.tag = e.tag + hierTagDown
	return out.sendAll(nil)
}

// boardHostBarrier is hierBarrier's host phases on the host's board (e is
// the node group, rank 0 its leader): every member posts round k, the
// leader waits for all of them, runs the leaders' barrier (top), and posts
// k+1 waking the members, which wait for it and post k+1 themselves.
func (e *coll) boardHostBarrier(top *coll) error {
	r, b := e.r, e.nb
	r.hostBoard.Add(1)
	k := b.seq.Add(2) - 1
	b.BoardPost(k, false)
	if e.rank != 0 {
		if err := r.boardWait(b, e.op, 0, k+1); err != nil {
			return err
		}
		b.BoardPost(k+1, false)
		return nil
	}
	err := r.boardWait(b, e.op, -1, k)
	if err == nil && top != nil {
		err = top.barrier()
	}
	b.BoardPost(k+1, true) // even after a failure: the members must not wait forever
	return err
}

// gatherEmpty receives an empty message from every other rank of e.
func (e *coll) gatherEmpty() error {
	for i := 1; i < e.size; i++ {
		if err := e.recv(i, nil); err != nil {
			return err
		}
	}
	return nil
}

// sendAll sends b from rank 0 of e to every other rank at once.
func (e *coll) sendAll(b []byte) error {
	var err error
	reqs := make([]*adi.Request, 0, e.size-1)
	for i := 1; i < e.size && err == nil; i++ {
		var q *adi.Request
		if q, err = e.isend(i, b); err == nil {
			reqs = append(reqs, q)
		}
	}
	if werr := e.wait(reqs...); err == nil {
		err = werr
	}
	return err
}

// hierBcast is bcast in tiers, with the same header: the root's count
// travels first, down both tiers, so that every process (a leader whose own
// buffer is shorter than the root's data included) passes on all of the
// root's data and reports its own mismatch as bcast does.
func (e *coll) hierBcast(buf []byte, root int) error {
	top, topRoot, node, nodeRoot := e.tiers(root, hierTagDown)
	const inline = bcastShort
	var hdr []byte
	if e.rank == root {
		hl := 8
		if len(buf) <= inline {
			hl += len(buf)
		}
		hdr = scratch(hl)
		copy(hdr[8:], buf)
		binary.LittleEndian.PutUint64(hdr, uint64(len(buf)))
	} else {
		hdr = scratch(8 + inline)
	}
	defer release(hdr)
	got := len(hdr)
	var err error
	if top != nil && top.size > 1 {
		if got, err = top.bcastHead(hdr, topRoot); err != nil {
			return err
		}
	}
	if node.size > 1 {
		h := hdr
		if node.rank == nodeRoot {
			h = hdr[:got] // pass on what came, not the whole buffer
		}
		if got, err = node.bcastHead(h, nodeRoot); err != nil {
			return err
		}
	}
	n := int(binary.LittleEndian.Uint64(hdr))
	if n <= inline {
		if e.rank == root {
			return nil
		}
		return e.bcastInline(hdr, got, buf, root)
	}
	work := buf
	if n > len(buf) {
		work = scratch(n)
		defer release(work)
	}
	if top != nil && top.size > 1 {
		if err := top.bcastData(work[:n], topRoot); err != nil {
			return err
		}
	}
	if node.size > 1 {
		if err := node.bcastData(work[:n], nodeRoot); err != nil {
			return err
		}
	}
	if e.rank == root {
		return nil
	}
	if n > len(buf) {
		copy(buf, work)
	}
	return countMismatch(e.op, root, n, len(buf))
}

// hierOrdered reports whether a reduction with red may run in tiers: the
// tiers combine a host's ranks first, which keeps rank order only when
// every host's ranks are contiguous.
func (e *coll) hierOrdered(red reducer) bool {
	return e.h.tiered() && (red.commute || e.h.contiguous)
}

// hierReduce is reduce in tiers: each host reduces to its leader, the
// leaders to the root. The trailers carry on from one tier to the next (a
// leader's span covers its host), so the root sees every rank's count.
func (e *coll) hierReduce(send, recv []byte, red reducer, root int) error {
	top, topRoot, node, nodeRoot := e.tiers(root, hierTagIn)
	s := ownSpan(len(send))
	if top == nil {
		if err := node.reduceTree(send, nil, red, nodeRoot, &s); err != nil {
			return err
		}
		return s.err(e.op)
	}
	acc := scratch(len(send))
	defer release(acc)
	if err := node.reduceTree(send, acc, red, nodeRoot, &s); err != nil {
		return err
	}
	if err := top.reduceTree(acc, recv, red, topRoot, &s); err != nil {
		return err
	}
	return s.err(e.op)
}

// hierAllreduce is allreduce in tiers: each host reduces to its leader, the
// leaders allreduce, and each leader broadcasts the result to its host. The
// trailers carry on from tier to tier, so every leader ends with every
// rank's span, and passes it down (hierDown) with the result, which
// follows only when the counts agree.
func (e *coll) hierAllreduce(buf []byte, red reducer, es int) error {
	top, _, node, _ := e.tiers(-1, hierTagIn)
	s := ownSpan(len(buf))
	if err := node.reduceTree(buf, buf, red, 0, &s); err != nil {
		return err
	}
	if top != nil {
		if err := top.allreduceSpan(buf, red, es, &s); err != nil {
			return err
		}
	}
	if node.size > 1 {
		v := [2]uint64{uint64(s.lo), uint64(s.hi)}
		_, v, err := e.down(node).hierDown(s.lo == s.hi, v, buf)
		if err != nil {
			return err
		}
		s.merge(countSpan{lo: int(v[0]), hi: int(v[1])})
	}
	return s.err(e.op)
}

// down is the node group node on the sub-tag of the phase from each leader
// to its members, with no mismatch seen.
func (e *coll) down(node *coll) *coll {
	return &coll{r: e.r, op: e.op, ctx: e.ctx, world: node.world, rank: node.rank, size: node.size, tag: e.tag + hierTagDown}
}

// hierDownHead is the length of hierDown's header: ok and the verdict.
const hierDownHead = 24

// hierDown passes, from the leader (rank 0 of d, a node group) to its
// members, the leader's verdict on the counts of a tiered collective (ok:
// they agree; v: what the members make their errors of) and, when ok, buf:
// inline in the header when short, else after it (bcastData). With ok,
// every member's buf has the leader's length; without, no data follow,
// whatever the lengths. Members return the leader's ok and v.
func (d *coll) hierDown(ok bool, v [2]uint64, buf []byte) (bool, [2]uint64, error) {
	const inline = bcastShort
	var hdr []byte
	if d.rank == 0 {
		hl := hierDownHead
		if ok && len(buf) <= inline {
			hl += len(buf)
		}
		hdr = scratch(hl)
		copy(hdr[hierDownHead:], buf)
		flag := uint64(0)
		if ok {
			flag = 1
		}
		binary.LittleEndian.PutUint64(hdr, flag)
		binary.LittleEndian.PutUint64(hdr[8:], v[0])
		binary.LittleEndian.PutUint64(hdr[16:], v[1])
	} else {
		hdr = scratch(hierDownHead + inline)
	}
	defer release(hdr)
	got, err := d.bcastHead(hdr, 0)
	if err != nil {
		return false, v, err
	}
	if got < hierDownHead {
		return false, v, errorf(ErrOther, d.op, "header of %d bytes from this host's leader", got)
	}
	ok = binary.LittleEndian.Uint64(hdr) == 1
	v = [2]uint64{binary.LittleEndian.Uint64(hdr[8:]), binary.LittleEndian.Uint64(hdr[16:])}
	switch {
	case !ok:
		return false, v, nil
	case len(buf) > inline:
		return true, v, d.bcastData(buf, 0)
	case d.rank != 0 && got != hierDownHead+len(buf):
		return false, v, errorf(ErrOther, d.op, "header of %d bytes from this host's leader, for %d bytes of data", got, len(buf))
	}
	copy(buf, hdr[hierDownHead:got])
	return true, v, nil
}

// hostOffsets are the byte offsets of each host's blocks of bs bytes when
// the blocks are laid out host by host, each host's in rank order, and
// their sizes.
func (h *hierarchy) hostOffsets(bs int) (off, sz []int) {
	off, sz = make([]int, len(h.nodes)+1), make([]int, len(h.nodes))
	for k, nd := range h.nodes {
		sz[k] = len(nd) * bs
		off[k+1] = off[k] + sz[k]
	}
	return off, sz
}

// toRankOrder copies blocks of bs bytes laid out host by host (byHost,
// hostOffsets) into all in rank order.
func (h *hierarchy) toRankOrder(byHost, all []byte, off []int, bs int) {
	for k, nd := range h.nodes {
		for j, r := range nd {
			copy(all[r*bs:(r+1)*bs], byHost[off[k]+j*bs:off[k]+(j+1)*bs])
		}
	}
}

// hierAllgather is allgather in tiers: each host gathers its blocks at its
// leader, the leaders exchange their hosts' blocks (a ring over blocks of
// their own sizes), each leader broadcasts all of them to its host, and
// every process puts them in rank order. A mismatch travels as in the flat
// algorithms (exact receives, then messages of another size: isend), from
// the members to their leader and round the leaders' ring to every leader;
// each leader passes its verdict down (hierDown), and the blocks only when
// the counts agree.
func (e *coll) hierAllgather(mine, all []byte) error {
	bs := len(mine)
	top, _, node, _ := e.tiers(-1, hierTagIn)
	off, sz := e.h.hostOffsets(bs)
	byHost := scratch(off[len(sz)])
	defer release(byHost)
	me := e.h.hostOf[e.rank]
	var nb []byte
	if node.rank == 0 {
		nb = byHost[off[me]:off[me+1]]
	}
	if err := node.gather(mine, nb, 0); err != nil && err != node.mis {
		return err
	}
	mis := node.mis
	if top != nil {
		top.mis = node.mis
		if err := top.ring(byHost, off, sz, false); err != nil && err != top.mis {
			return err
		}
		mis = top.mis
	}
	if node.size > 1 {
		v := [2]uint64{uint64(bs), uint64(ErrorClass(mis))}
		ok, v, err := e.down(node).hierDown(mis == nil, v, byHost)
		if err != nil {
			return err
		}
		if mis == nil && !ok {
			mis = e.leaderMismatch(bs, int(v[0]), Class(v[1]))
		}
	}
	if mis != nil {
		return mis
	}
	e.h.toRankOrder(byHost, all, off, bs)
	return nil
}

// leaderMismatch is the error of a member whose blocks are of bs bytes
// when its leader's are of lbs and the leader saw a mismatch of class c.
func (e *coll) leaderMismatch(bs, lbs int, c Class) error {
	switch {
	case lbs > bs:
		return errorf(ErrTruncate, e.op, "this host's leader passes blocks of %d bytes, more than this rank's %d: every rank must pass the same count", lbs, bs)
	case lbs < bs:
		return errorf(ErrCount, e.op, "this host's leader passes blocks of %d bytes, fewer than this rank's %d: every rank must pass the same count", lbs, bs)
	case c != ErrTruncate && c != ErrCount:
		c = ErrCount
	}
	return errorf(c, e.op, "a rank passes another count than this rank's %d bytes a block (seen by this host's leader): every rank must pass the same count", bs)
}

// hierGather is gather in tiers: each host gathers its blocks at its
// leader (the root, on the root's host), the other leaders send them to
// the root, and the root puts them in rank order. A leader that saw a
// mismatch on its host sends the root a message of another size (isend).
func (e *coll) hierGather(mine, all []byte, root int) error {
	bs := len(mine)
	top, topRoot, node, nodeRoot := e.tiers(root, hierTagIn)
	me := e.h.hostOf[e.rank]
	if top == nil {
		return node.gather(mine, nil, nodeRoot)
	}
	off, sz := e.h.hostOffsets(bs)
	top.exact = true
	if e.rank != root {
		nb := scratch(sz[me])
		defer release(nb)
		if err := node.gather(mine, nb, nodeRoot); err != nil && err != node.mis {
			return err
		}
		top.mis = node.mis
		if err := top.send(topRoot, nb); err != nil {
			return err
		}
		return top.mis
	}
	byHost := scratch(off[len(sz)])
	defer release(byHost)
	reqs := make([]*adi.Request, 0, len(sz)-1)
	var err error
	for k := range sz {
		if k == me || err != nil {
			continue
		}
		var q *adi.Request
		if q, err = top.irecv(k, byHost[off[k]:off[k+1]]); err == nil {
			reqs = append(reqs, q)
		}
	}
	if gerr := node.gather(mine, byHost[off[me]:off[me+1]], nodeRoot); err == nil && gerr != node.mis {
		err = gerr
	}
	if werr := top.wait(reqs...); err == nil {
		err = werr
	}
	switch {
	case err != nil:
		return err
	case node.mis != nil:
		return node.mis
	case top.mis != nil:
		return top.mis
	}
	e.h.toRankOrder(byHost, all, off, bs)
	return nil
}

// hierScatter is scatter in tiers: the root sends each other host's blocks
// to its leader, and every leader (the root, on the root's host) scatters
// them over its host. A leader whose blocks' size is not the root's
// scatters messages of other sizes (isend), so its members see it too.
func (e *coll) hierScatter(all, mine []byte, root int) error {
	bs := len(mine)
	top, topRoot, node, nodeRoot := e.tiers(root, hierTagDown)
	me := e.h.hostOf[e.rank]
	if top == nil {
		return node.scatter(nil, mine, nodeRoot)
	}
	off, sz := e.h.hostOffsets(bs)
	top.exact = true
	if e.rank != root {
		nb := scratch(sz[me])
		defer release(nb)
		if err := top.recv(topRoot, nb); err != nil {
			return err
		}
		node.mis = top.mis
		if err := node.scatter(nb, mine, nodeRoot); err != nil && err != node.mis {
			return err
		}
		return node.mis
	}
	byHost := scratch(off[len(sz)])
	defer release(byHost)
	for k, nd := range e.h.nodes {
		for j, r := range nd {
			copy(byHost[off[k]+j*bs:off[k]+(j+1)*bs], all[r*bs:(r+1)*bs])
		}
	}
	reqs := make([]*adi.Request, 0, len(sz)-1)
	var err error
	for k := range sz {
		if k == me || err != nil {
			continue
		}
		var q *adi.Request
		if q, err = top.isend(k, byHost[off[k]:off[k+1]]); err == nil {
			reqs = append(reqs, q)
		}
	}
	if serr := node.scatter(byHost[off[me]:off[me+1]], mine, nodeRoot); err == nil && serr != node.mis {
		err = serr
	}
	if werr := top.wait(reqs...); err == nil {
		err = werr
	}
	return err
}
