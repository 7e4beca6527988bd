//go:build cgo

package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/adimpi/adimpi/mpi"
)

// Communicators, groups and topologies.

func xComm_dup(c *mpi.Comm, out *C.int) error {
	n, err := c.Dup()
	if err != nil {
		return err
	}
	if err := copyHints(c, n); err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

func xComm_idup(c *mpi.Comm, out *C.int, req *C.int) error {
	n, r, err := c.Idup()
	if err != nil {
		return err
	}
	if err := copyHints(c, n); err != nil {
		return err
	}
	*out = C.int(newComm(n))
	*req = C.int(requests.add(reqEntry{r: r}))
	return nil
}

func xComm_split(c *mpi.Comm, color, key int, out *C.int) error {
	n, err := c.Split(color, key)
	if err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

func xComm_split_type(c *mpi.Comm, kind, key int, info int32, out *C.int) error {
	n, err := c.SplitType(kind, key)
	if err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

func xComm_create(c *mpi.Comm, g *mpi.Group, out *C.int) error {
	n, err := c.Create(g)
	if err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

func xComm_create_group(c *mpi.Comm, g *mpi.Group, tag int, out *C.int) error {
	n, err := c.CreateGroup(g, tag)
	if err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

func xComm_free(h *C.int) error {
	const fn = "MPI_Comm_free"
	switch int32(*h) {
	case hCommWorld, hCommSelf:
		return newErr(mpi.ErrComm, fn, "cannot free a predefined communicator")
	}
	c, err := commOf(fn, int32(*h))
	if err != nil {
		return err
	}
	if err := c.Free(); err != nil {
		return err
	}
	dropHints(c)
	comms.del(int32(*h))
	*h = C.int(hCommNull)
	return nil
}

func xComm_compare(a, b *mpi.Comm, result *C.int) error {
	r, err := mpi.Compare(a, b)
	*result = C.int(r)
	return err
}

func xComm_group(c *mpi.Comm, out *C.int) error {
	g, err := c.Group()
	if err != nil {
		return err
	}
	*out = C.int(newGroup(g))
	return nil
}

func xComm_remote_group(c *mpi.Comm, out *C.int) error {
	g, err := c.RemoteGroup()
	if err != nil {
		return err
	}
	*out = C.int(newGroup(g))
	return nil
}

func xComm_test_inter(c *mpi.Comm, flag *C.int) error {
	*flag = cbool(c.IsInter())
	return nil
}

func xComm_remote_size(c *mpi.Comm, size *C.int) error {
	if !c.IsInter() {
		return newErr(mpi.ErrComm, "MPI_Comm_remote_size", "%s is not an intercommunicator", c.Name())
	}
	*size = C.int(c.RemoteSize())
	return nil
}

func xComm_set_name(c *mpi.Comm, name *C.char) error {
	c.SetName(C.GoString(name))
	return nil
}

func xComm_get_name(c *mpi.Comm, name *C.char, n *C.int) error {
	putString(c.Name(), name, maxObjectName, n)
	return nil
}

func xIntercomm_create(local *mpi.Comm, localLeader int, peer int32, remoteLeader, tag int, out *C.int) error {
	// The peer communicator is significant only at the local leader.
	var p *mpi.Comm
	if local.Rank() == localLeader {
		var err error
		if p, err = commOf("MPI_Intercomm_create", peer); err != nil {
			return err
		}
	}
	n, err := mpi.IntercommCreate(local, localLeader, p, remoteLeader, tag)
	if err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

func xIntercomm_merge(c *mpi.Comm, high int, out *C.int) error {
	n, err := c.IntercommMerge(high != 0)
	if err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

// Groups.

func xGroup_size(g *mpi.Group, size *C.int) error {
	*size = C.int(g.Size())
	return nil
}

func xGroup_rank(g *mpi.Group, rank *C.int) error {
	*rank = C.int(g.Rank())
	return nil
}

func xGroup_free(h *C.int) error {
	if int32(*h) == hGroupEmpty {
		*h = C.int(hGroupNull)
		return nil
	}
	g, err := groupOf("MPI_Group_free", int32(*h))
	if err != nil {
		return err
	}
	groups.del(int32(*h))
	*h = C.int(hGroupNull)
	return g.Free()
}

func xGroup_incl(g *mpi.Group, n int, ranks *C.int, out *C.int) error {
	r, err := g.Incl(ints(ranks, n))
	if err != nil {
		return err
	}
	*out = C.int(newGroup(r))
	return nil
}

func xGroup_excl(g *mpi.Group, n int, ranks *C.int, out *C.int) error {
	r, err := g.Excl(ints(ranks, n))
	if err != nil {
		return err
	}
	*out = C.int(newGroup(r))
	return nil
}

func ranges(p *C.int, n int) [][3]int {
	flat := ints(p, 3*n)
	out := make([][3]int, n)
	for i := range out {
		out[i] = [3]int{flat[3*i], flat[3*i+1], flat[3*i+2]}
	}
	return out
}

func xGroup_range_incl(g *mpi.Group, n int, rs *C.int, out *C.int) error {
	r, err := g.RangeIncl(ranges(rs, n))
	if err != nil {
		return err
	}
	*out = C.int(newGroup(r))
	return nil
}

func xGroup_range_excl(g *mpi.Group, n int, rs *C.int, out *C.int) error {
	r, err := g.RangeExcl(ranges(rs, n))
	if err != nil {
		return err
	}
	*out = C.int(newGroup(r))
	return nil
}

func setOp(f func(a, b *mpi.Group) (*mpi.Group, error), a, b *mpi.Group, out *C.int) error {
	r, err := f(a, b)
	if err != nil {
		return err
	}
	*out = C.int(newGroup(r))
	return nil
}

func xGroup_union(a, b *mpi.Group, out *C.int) error { return setOp(mpi.Union, a, b, out) }
func xGroup_intersection(a, b *mpi.Group, out *C.int) error {
	return setOp(mpi.Intersection, a, b, out)
}
func xGroup_difference(a, b *mpi.Group, out *C.int) error { return setOp(mpi.Difference, a, b, out) }

func xGroup_compare(a, b *mpi.Group, result *C.int) error {
	r, err := mpi.GroupCompare(a, b)
	*result = C.int(r)
	return err
}

func xGroup_translate_ranks(a *mpi.Group, n int, ranks *C.int, b *mpi.Group, out *C.int) error {
	r, err := mpi.TranslateRanks(a, ints(ranks, n), b)
	if err != nil {
		return err
	}
	for i, v := range r {
		unsafe.Slice(out, n)[i] = C.int(v)
	}
	return nil
}

// Topologies.

func bools(p *C.int, n int) []bool {
	out := make([]bool, n)
	for i, v := range ints(p, n) {
		out[i] = v != 0
	}
	return out
}

func putInts(dst *C.int, vs []int) {
	if len(vs) == 0 {
		return
	}
	d := unsafe.Slice(dst, len(vs))
	for i, v := range vs {
		d[i] = C.int(v)
	}
}

func xCart_create(c *mpi.Comm, ndims int, dims, periods *C.int, reorder int, out *C.int) error {
	n, err := c.CartCreate(ints(dims, ndims), bools(periods, ndims), reorder != 0)
	if err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

func xDims_create(nnodes, ndims int, dims *C.int) error {
	d := ints(dims, ndims)
	if err := mpi.DimsCreate(nnodes, d); err != nil {
		return err
	}
	putInts(dims, d)
	return nil
}

func xCart_coords(c *mpi.Comm, rank, maxdims int, coords *C.int) error {
	cs, err := c.CartCoords(rank)
	if err != nil {
		return err
	}
	putInts(coords, cs[:min(len(cs), maxdims)])
	return nil
}

func xCart_rank(c *mpi.Comm, coords *C.int, rank *C.int) error {
	dims, _, _, err := c.CartGet()
	if err != nil {
		return err
	}
	r, err := c.CartRank(ints(coords, len(dims)))
	*rank = C.int(r)
	return err
}

func xCart_shift(c *mpi.Comm, direction, disp int, src, dst *C.int) error {
	s, d, err := c.CartShift(direction, disp)
	*src, *dst = C.int(s), C.int(d)
	return err
}

func xCartdim_get(c *mpi.Comm, ndims *C.int) error {
	dims, _, _, err := c.CartGet()
	*ndims = C.int(len(dims))
	return err
}

func xCart_get(c *mpi.Comm, maxdims int, dims, periods, coords *C.int) error {
	d, p, cs, err := c.CartGet()
	if err != nil {
		return err
	}
	n := min(maxdims, len(d))
	putInts(dims, d[:n])
	putInts(coords, cs[:n])
	ps := make([]int, n)
	for i := range ps {
		if p[i] {
			ps[i] = 1
		}
	}
	putInts(periods, ps)
	return nil
}

func xCart_sub(c *mpi.Comm, remain *C.int, out *C.int) error {
	dims, _, _, err := c.CartGet()
	if err != nil {
		return err
	}
	n, err := c.CartSub(bools(remain, len(dims)))
	if err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

func xGraph_create(c *mpi.Comm, nnodes int, index, edges *C.int, reorder int, out *C.int) error {
	idx := ints(index, nnodes)
	nedges := 0
	if nnodes > 0 {
		nedges = idx[nnodes-1]
	}
	n, err := c.GraphCreate(idx, ints(edges, nedges), reorder != 0)
	if err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

func xGraph_neighbors_count(c *mpi.Comm, rank int, n *C.int) error {
	nb, err := c.GraphNeighbors(rank)
	*n = C.int(len(nb))
	return err
}

func xGraph_neighbors(c *mpi.Comm, rank, maxn int, out *C.int) error {
	nb, err := c.GraphNeighbors(rank)
	if err != nil {
		return err
	}
	putInts(out, nb[:min(maxn, len(nb))])
	return nil
}

// graphLists are a graph topology's index and edges arrays, as
// MPI_Graph_create had them: the mpi package gives each node's neighbours,
// which in node order are the edges, and their running counts the index.
func graphLists(fn string, c *mpi.Comm) (index, edges []int, err error) {
	if c.Topo() != mpi.TopoGraph {
		return nil, nil, newErr(mpi.ErrTopology, fn, "%s has no graph topology", c.Name())
	}
	for r := range c.Size() {
		nb, err := c.GraphNeighbors(r)
		if err != nil {
			return nil, nil, err
		}
		edges = append(edges, nb...)
		index = append(index, len(edges))
	}
	return index, edges, nil
}

func xGraphdims_get(c *mpi.Comm, nnodes, nedges *C.int) error {
	index, edges, err := graphLists("MPI_Graphdims_get", c)
	if err != nil {
		return err
	}
	*nnodes, *nedges = C.int(len(index)), C.int(len(edges))
	return nil
}

// xGraph_get stores as much of the index and edges arrays as maxindex and
// maxedges allow, as MPICH does.
func xGraph_get(c *mpi.Comm, maxindex, maxedges int, index, edges *C.int) error {
	const fn = "MPI_Graph_get"
	if maxindex < 0 || maxedges < 0 {
		return newErr(mpi.ErrArg, fn, "maxindex %d or maxedges %d is negative", maxindex, maxedges)
	}
	idx, e, err := graphLists(fn, c)
	if err != nil {
		return err
	}
	putInts(index, idx[:min(maxindex, len(idx))])
	putInts(edges, e[:min(maxedges, len(e))])
	return nil
}

// mapRank is MPI_Cart_map's and MPI_Graph_map's answer for a topology of
// n processes over c: ranks are not reordered, so a process keeps its rank
// if it is among the first n and is left out (MPI_UNDEFINED) otherwise.
func mapRank(fn string, c *mpi.Comm, n int, class mpi.Class, newrank *C.int) error {
	if c.IsInter() {
		return newErr(mpi.ErrComm, fn, "%s is an intercommunicator", c.Name())
	}
	if n > c.Size() {
		return newErr(class, fn, "a topology of %d processes is larger than %s (%d)", n, c.Name(), c.Size())
	}
	*newrank = C.int(mpi.Undefined)
	if c.Rank() < n {
		*newrank = C.int(c.Rank())
	}
	return nil
}

func xCart_map(c *mpi.Comm, ndims int, dims, periods *C.int, newrank *C.int) error {
	const fn = "MPI_Cart_map"
	if ndims < 0 {
		return newErr(mpi.ErrDims, fn, "ndims %d is negative", ndims)
	}
	n := 1
	for i, d := range ints(dims, ndims) {
		if d <= 0 {
			return newErr(mpi.ErrDims, fn, "dims[%d] = %d is not positive", i, d)
		}
		if n *= d; n > c.Size() {
			return newErr(mpi.ErrDims, fn, "the grid's first %d dimensions already hold %d processes, more than %s's %d", i+1, n, c.Name(), c.Size())
		}
	}
	return mapRank(fn, c, n, mpi.ErrDims, newrank)
}

func xGraph_map(c *mpi.Comm, nnodes int, index, edges *C.int, newrank *C.int) error {
	const fn = "MPI_Graph_map"
	if nnodes <= 0 {
		return newErr(mpi.ErrArg, fn, "nnodes %d is not positive", nnodes)
	}
	prev := 0
	for i, x := range ints(index, nnodes) {
		if x < prev {
			return newErr(mpi.ErrArg, fn, "index[%d] = %d is below index[%d] = %d", i, x, i-1, prev)
		}
		prev = x
	}
	for i, e := range ints(edges, prev) {
		if e < 0 || e >= nnodes {
			return newErr(mpi.ErrArg, fn, "edges[%d] = %d is outside the graph's %d nodes", i, e, nnodes)
		}
	}
	return mapRank(fn, c, nnodes, mpi.ErrArg, newrank)
}

func xTopo_test(c *mpi.Comm, kind *C.int) error {
	switch c.Topo() {
	case mpi.TopoCart:
		*kind = 2 // MPI_CART
	case mpi.TopoGraph:
		*kind = 1 // MPI_GRAPH
	case mpi.TopoDistGraph:
		*kind = 3 // MPI_DIST_GRAPH
	default:
		*kind = C.int(mpi.Undefined)
	}
	return nil
}

func xDist_graph_create_adjacent(c *mpi.Comm, indeg int, sources, sweights uintptr, outdeg int, dests, dweights uintptr, info int32, reorder int, out *C.int) error {
	n, err := c.DistGraphCreateAdjacent(ints((*C.int)(addrPointer(sources)), indeg), ints((*C.int)(addrPointer(dests)), outdeg), reorder != 0)
	if err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

func xDist_graph_neighbors_count(c *mpi.Comm, indeg, outdeg, weighted *C.int) error {
	s, d, err := neighbourLists(c)
	*indeg, *outdeg, *weighted = C.int(len(s)), C.int(len(d)), 0
	return err
}

func xDist_graph_neighbors(c *mpi.Comm, maxin int, sources, sweights uintptr, maxout int, dests, dweights uintptr) error {
	s, d, err := neighbourLists(c)
	if err != nil {
		return err
	}
	putInts((*C.int)(addrPointer(sources)), s[:min(maxin, len(s))])
	putInts((*C.int)(addrPointer(dests)), d[:min(maxout, len(d))])
	return nil
}

// neighbourLists are a process's in- and out-neighbours in c's topology.
func neighbourLists(c *mpi.Comm) (src, dst []int, err error) {
	if c.Topo() == mpi.TopoCart {
		dims, _, _, err := c.CartGet()
		if err != nil {
			return nil, nil, err
		}
		for d := range dims {
			lo, hi, err := c.CartShift(d, 1)
			if err != nil {
				return nil, nil, err
			}
			src = append(src, lo, hi)
		}
		return src, src, nil
	}
	return c.DistGraphNeighbors()
}

// neighbours counts a process's in- and out-neighbours.
func neighbours(c *mpi.Comm) (in, out int, err error) {
	s, d, err := neighbourLists(c)
	return len(s), len(d), err
}
