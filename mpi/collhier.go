package mpi

import (
	"encoding/binary"

	"github.com/adimpi/adimpi/adi"
)

// Hierarchical collectives for communicators whose ranks span hosts.
//
// The device's native collectives (netvm's board, fm's multidestination
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
// fm's multidestination sends (its ranks share a host) but not netvm's
// board, which serves MPI_COMM_WORLD only.
//
// Reductions keep rank order: a non-commutative operation is reduced in
// tiers only when every host's ranks are a contiguous range of the
// communicator's ranks (hosts then follow each other in rank order);
// otherwise it takes the flat algorithm.
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
	node = &coll{r: e.r, op: e.op, ctx: e.ctx, world: h.nodeWorld[me], rank: h.nodeRank[e.rank], size: len(h.nodes[me]), tag: e.tag + nodeTag}
	e.r.hierColls.Add(1)
	return
}

// hierBarrier: every member reports to its host's leader, the leaders run a
// barrier, and each leader releases its members.
func (e *coll) hierBarrier() error {
	top, _, in, _ := e.tiers(-1, hierTagIn)
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
		if got != 8+n {
			return errorf(ErrOther, e.op, "broadcast header of %d bytes announces %d", got, n)
		}
		copy(buf, hdr[8:got])
		return countMismatch(e.op, root, n, len(buf))
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
// leaders to the root.
func (e *coll) hierReduce(send, recv []byte, red reducer, root int) error {
	top, topRoot, node, nodeRoot := e.tiers(root, hierTagIn)
	if top == nil {
		return node.reduce(send, nil, red, nodeRoot)
	}
	acc := scratch(len(send))
	defer release(acc)
	if err := node.reduce(send, acc, red, nodeRoot); err != nil {
		return err
	}
	return top.reduce(acc, recv, red, topRoot)
}

// hierAllreduce is allreduce in tiers: each host reduces to its leader, the
// leaders allreduce, and each leader broadcasts the result to its host.
func (e *coll) hierAllreduce(buf []byte, red reducer, es int) error {
	if len(buf) == 0 {
		return nil
	}
	top, _, node, _ := e.tiers(-1, hierTagIn)
	if err := node.reduce(buf, buf, red, 0); err != nil {
		return err
	}
	if top != nil {
		if err := top.allreduce(buf, red, es); err != nil {
			return err
		}
	}
	down := *node
	down.tag = e.tag + hierTagDown
	return down.bcastData(buf, 0)
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
// every process puts them in rank order.
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
	if err := node.gather(mine, nb, 0); err != nil {
		return err
	}
	if top != nil {
		if err := top.allgatherv(byHost, off, sz); err != nil {
			return err
		}
	}
	down := *node
	down.tag = e.tag + hierTagDown
	if err := down.bcastData(byHost, 0); err != nil {
		return err
	}
	e.h.toRankOrder(byHost, all, off, bs)
	return nil
}

// hierGather is gather in tiers: each host gathers its blocks at its
// leader (the root, on the root's host), the other leaders send them to
// the root, and the root puts them in rank order.
func (e *coll) hierGather(mine, all []byte, root int) error {
	bs := len(mine)
	top, topRoot, node, nodeRoot := e.tiers(root, hierTagIn)
	me := e.h.hostOf[e.rank]
	if top == nil {
		return node.gather(mine, nil, nodeRoot)
	}
	off, sz := e.h.hostOffsets(bs)
	if e.rank != root {
		nb := scratch(sz[me])
		defer release(nb)
		if err := node.gather(mine, nb, nodeRoot); err != nil {
			return err
		}
		return top.send(topRoot, nb)
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
	if gerr := node.gather(mine, byHost[off[me]:off[me+1]], nodeRoot); err == nil {
		err = gerr
	}
	if werr := e.wait(reqs...); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	e.h.toRankOrder(byHost, all, off, bs)
	return nil
}

// hierScatter is scatter in tiers: the root sends each other host's blocks
// to its leader, and every leader (the root, on the root's host) scatters
// them over its host.
func (e *coll) hierScatter(all, mine []byte, root int) error {
	bs := len(mine)
	top, topRoot, node, nodeRoot := e.tiers(root, hierTagDown)
	me := e.h.hostOf[e.rank]
	if top == nil {
		return node.scatter(nil, mine, nodeRoot)
	}
	off, sz := e.h.hostOffsets(bs)
	if e.rank != root {
		nb := scratch(sz[me])
		defer release(nb)
		if err := top.recv(topRoot, nb); err != nil {
			return err
		}
		return node.scatter(nb, mine, nodeRoot)
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
	if serr := node.scatter(byHost[off[me]:off[me+1]], mine, nodeRoot); err == nil {
		err = serr
	}
	if werr := e.wait(reqs...); err == nil {
		err = werr
	}
	return err
}
