package mpi

import (
	"slices"

	"github.com/adimpi/adimpi/adi"
)

// TopoKind is the kind of virtual topology a communicator has (MPI_Topo_test).
type TopoKind int

// The topology kinds.
const (
	TopoNone      TopoKind = iota // no topology (MPI_UNDEFINED)
	TopoCart                      // Cartesian (MPI_CART)
	TopoGraph                     // general graph (MPI_GRAPH)
	TopoDistGraph                 // distributed graph (MPI_DIST_GRAPH)
)

// maxCartDims is the largest number of Cartesian dimensions: each direction
// of each dimension gets its own tag in neighbourhood collectives.
const maxCartDims = 1 << (collSubBits - 1)

// topology is a communicator's virtual topology. It is immutable once made.
type topology struct {
	kind    TopoKind
	dims    []int  // Cartesian
	periods []bool // Cartesian
	index   []int  // graph: MPI_Graph_create's index
	edges   []int  // graph: MPI_Graph_create's edges
	in, out []int  // this process's in- and out-neighbours (graph, dist graph)
}

// Topo reports the communicator's topology kind (MPI_Topo_test).
func (c *Comm) Topo() TopoKind {
	if c == nil || c.topo == nil {
		return TopoNone
	}
	return c.topo.kind
}

// DimsCreate fills the zero entries of dims with a balanced factorisation of
// nnodes, in non-increasing order, so that the product of all entries is
// nnodes (MPI_Dims_create). Non-zero entries are kept and must divide nnodes.
func DimsCreate(nnodes int, dims []int) error {
	const op = "MPI_Dims_create"
	if nnodes <= 0 {
		return errorf(ErrArg, op, "nnodes %d is not positive", nnodes)
	}
	rest, free := nnodes, 0
	for _, d := range dims {
		switch {
		case d < 0:
			return errorf(ErrDims, op, "dimension %d is negative", d)
		case d == 0:
			free++
		default:
			if rest%d != 0 {
				return errorf(ErrDims, op, "fixed dimensions %v do not divide %d", dims, nnodes)
			}
			rest /= d
		}
	}
	if free == 0 {
		if rest != 1 {
			return errorf(ErrDims, op, "dimensions %v do not multiply to %d", dims, nnodes)
		}
		return nil
	}
	// Prime factors, largest first, each given to the currently smallest dimension.
	var primes []int
	for p, m := 2, rest; m > 1; {
		if p*p > m {
			primes = append(primes, m)
			break
		}
		if m%p == 0 {
			primes = append(primes, p)
			m /= p
		} else {
			p++
		}
	}
	slices.Reverse(primes)
	f := make([]int, free)
	for i := range f {
		f[i] = 1
	}
	for _, p := range primes {
		f[slices.Index(f, slices.Min(f))] *= p
	}
	slices.SortFunc(f, func(a, b int) int { return b - a })
	j := 0
	for i, d := range dims {
		if d == 0 {
			dims[i] = f[j]
			j++
		}
	}
	return nil
}

// CartCreate makes a communicator with a Cartesian topology of the given
// dimensions (MPI_Cart_create): rank r has the row-major coordinates of r.
// Processes of c beyond the product of dims get a nil communicator. reorder
// is accepted but ranks are never reordered. It is collective over c.
func (c *Comm) CartCreate(dims []int, periods []bool, reorder bool) (*Comm, error) {
	n, err := c.cartCreate(dims, periods, reorder)
	return n, c.raise(err)
}

// cartCreate is CartCreate without the error handler.
func (c *Comm) cartCreate(dims []int, periods []bool, reorder bool) (*Comm, error) {
	const op = "MPI_Cart_create"
	if _, err := collStart(op, c); err != nil {
		return nil, err
	}
	if len(dims) != len(periods) {
		return nil, errorf(ErrArg, op, "%d dims but %d periods", len(dims), len(periods))
	}
	if len(dims) > maxCartDims {
		return nil, errorf(ErrDims, op, "%d dimensions; at most %d", len(dims), maxCartDims)
	}
	n := 1
	for _, d := range dims {
		if d <= 0 {
			return nil, errorf(ErrDims, op, "dimension %d is not positive", d)
		}
		n *= d
	}
	if n > c.Size() {
		return nil, errorf(ErrDims, op, "grid of %d processes is larger than %s (%d)", n, c.Name(), c.Size())
	}
	color := 0
	if c.rank >= n {
		color = Undefined
	}
	nc, err := c.split(color, c.rank)
	if err != nil || nc == nil {
		return nil, err
	}
	nc.topo = &topology{kind: TopoCart, dims: slices.Clone(dims), periods: slices.Clone(periods)}
	return nc, nil
}

func (c *Comm) cart(op string) (*topology, error) {
	if err := checkComm(op, c); err != nil {
		return nil, err
	}
	if c.topo == nil || c.topo.kind != TopoCart {
		return nil, errorf(ErrTopology, op, "%s has no Cartesian topology", c.Name())
	}
	return c.topo, nil
}

// CartGet returns the Cartesian topology's dimensions and periodicity and
// this process's coordinates (MPI_Cart_get).
func (c *Comm) CartGet() (dims []int, periods []bool, coords []int, err error) {
	dims, periods, coords, err = c.cartGet()
	return dims, periods, coords, c.raise(err)
}

// cartGet is CartGet without the error handler.
func (c *Comm) cartGet() (dims []int, periods []bool, coords []int, err error) {
	t, err := c.cart("MPI_Cart_get")
	if err != nil {
		return nil, nil, nil, err
	}
	coords, _ = c.CartCoords(c.rank)
	return slices.Clone(t.dims), slices.Clone(t.periods), coords, nil
}

// CartCoords returns the coordinates of rank (MPI_Cart_coords).
func (c *Comm) CartCoords(rank int) ([]int, error) {
	coords, err := c.cartCoords(rank)
	return coords, c.raise(err)
}

// cartCoords is CartCoords without the error handler.
func (c *Comm) cartCoords(rank int) ([]int, error) {
	const op = "MPI_Cart_coords"
	t, err := c.cart(op)
	if err != nil {
		return nil, err
	}
	if rank < 0 || rank >= c.Size() {
		return nil, errorf(ErrRank, op, "rank %d is out of range [0, %d)", rank, c.Size())
	}
	coords := make([]int, len(t.dims))
	for i := len(t.dims) - 1; i >= 0; i-- {
		coords[i] = rank % t.dims[i]
		rank /= t.dims[i]
	}
	return coords, nil
}

// CartRank returns the rank at the given coordinates (MPI_Cart_rank);
// coordinates in periodic dimensions wrap around, others must be in range.
func (c *Comm) CartRank(coords []int) (int, error) {
	rank, err := c.cartRank(coords)
	return rank, c.raise(err)
}

// cartRank is CartRank without the error handler.
func (c *Comm) cartRank(coords []int) (int, error) {
	const op = "MPI_Cart_rank"
	t, err := c.cart(op)
	if err != nil {
		return 0, err
	}
	if len(coords) != len(t.dims) {
		return 0, errorf(ErrDims, op, "%d coordinates for %d dimensions", len(coords), len(t.dims))
	}
	r, ok := t.rankOf(coords)
	if !ok {
		return 0, errorf(ErrRank, op, "coordinates %v are outside the grid %v", coords, t.dims)
	}
	return r, nil
}

func (t *topology) rankOf(coords []int) (int, bool) {
	r := 0
	for i, x := range coords {
		d := t.dims[i]
		if x < 0 || x >= d {
			if !t.periods[i] {
				return 0, false
			}
			x = ((x % d) + d) % d
		}
		r = r*d + x
	}
	return r, true
}

// CartShift returns the ranks this process receives from and sends to in a
// shift by disp along direction (MPI_Cart_shift); ProcNull off the edge of a
// non-periodic dimension.
func (c *Comm) CartShift(direction, disp int) (source, dest int, err error) {
	source, dest, err = c.cartShift(direction, disp)
	return source, dest, c.raise(err)
}

// cartShift is CartShift without the error handler.
func (c *Comm) cartShift(direction, disp int) (source, dest int, err error) {
	const op = "MPI_Cart_shift"
	t, err := c.cart(op)
	if err != nil {
		return 0, 0, err
	}
	if direction < 0 || direction >= len(t.dims) {
		return 0, 0, errorf(ErrArg, op, "direction %d is out of range [0, %d)", direction, len(t.dims))
	}
	coords, _ := c.CartCoords(c.rank)
	at := func(delta int) int {
		x := slices.Clone(coords)
		x[direction] += delta
		if r, ok := t.rankOf(x); ok {
			return r
		}
		return ProcNull
	}
	return at(-disp), at(disp), nil
}

// CartSub splits a Cartesian communicator into sub-grids that keep the
// dimensions marked in remain (MPI_Cart_sub). It is collective.
func (c *Comm) CartSub(remain []bool) (*Comm, error) {
	n, err := c.cartSub(remain)
	return n, c.raise(err)
}

// cartSub is CartSub without the error handler.
func (c *Comm) cartSub(remain []bool) (*Comm, error) {
	const op = "MPI_Cart_sub"
	t, err := c.cart(op)
	if err != nil {
		return nil, err
	}
	if len(remain) != len(t.dims) {
		return nil, errorf(ErrDims, op, "%d flags for %d dimensions", len(remain), len(t.dims))
	}
	coords, _ := c.CartCoords(c.rank)
	color, key := 0, 0
	var dims []int
	var periods []bool
	for i, keep := range remain {
		if keep {
			key = key*t.dims[i] + coords[i]
			dims = append(dims, t.dims[i])
			periods = append(periods, t.periods[i])
		} else {
			color = color*t.dims[i] + coords[i]
		}
	}
	nc, err := c.split(color, key)
	if err != nil {
		return nil, err
	}
	nc.topo = &topology{kind: TopoCart, dims: dims, periods: periods}
	return nc, nil
}

// GraphCreate makes a communicator with a graph topology (MPI_Graph_create):
// node i's neighbours are edges[index[i-1]:index[i]] (index[-1] = 0).
// Processes beyond len(index) get a nil communicator; reorder is accepted
// but ranks are never reordered. It is collective over c.
func (c *Comm) GraphCreate(index, edges []int, reorder bool) (*Comm, error) {
	n, err := c.graphCreate(index, edges, reorder)
	return n, c.raise(err)
}

// graphCreate is GraphCreate without the error handler.
func (c *Comm) graphCreate(index, edges []int, reorder bool) (*Comm, error) {
	const op = "MPI_Graph_create"
	if _, err := collStart(op, c); err != nil {
		return nil, err
	}
	nn := len(index)
	if nn > c.Size() {
		return nil, errorf(ErrArg, op, "graph of %d nodes is larger than %s (%d)", nn, c.Name(), c.Size())
	}
	prev := 0
	for i, x := range index {
		if x < prev || x > len(edges) {
			return nil, errorf(ErrArg, op, "index[%d] = %d is not in [%d, %d]", i, x, prev, len(edges))
		}
		prev = x
	}
	if nn > 0 && index[nn-1] != len(edges) {
		return nil, errorf(ErrArg, op, "index ends at %d but there are %d edges", index[nn-1], len(edges))
	}
	for _, e := range edges {
		if e < 0 || e >= nn {
			return nil, errorf(ErrRank, op, "edge to %d is outside the graph's %d nodes", e, nn)
		}
	}
	color := 0
	if c.rank >= nn {
		color = Undefined
	}
	nc, err := c.split(color, c.rank)
	if err != nil || nc == nil {
		return nil, err
	}
	t := &topology{kind: TopoGraph, index: slices.Clone(index), edges: slices.Clone(edges)}
	t.in = t.graphNeighbors(nc.rank)
	t.out = t.in
	nc.topo = t
	return nc, nil
}

func (t *topology) graphNeighbors(r int) []int {
	lo := 0
	if r > 0 {
		lo = t.index[r-1]
	}
	return slices.Clone(t.edges[lo:t.index[r]])
}

// GraphNeighbors returns rank's neighbours in a graph topology
// (MPI_Graph_neighbors).
func (c *Comm) GraphNeighbors(rank int) ([]int, error) {
	ranks, err := c.graphNeighbors(rank)
	return ranks, c.raise(err)
}

// graphNeighbors is GraphNeighbors without the error handler.
func (c *Comm) graphNeighbors(rank int) ([]int, error) {
	const op = "MPI_Graph_neighbors"
	if err := checkComm(op, c); err != nil {
		return nil, err
	}
	if c.topo == nil || c.topo.kind != TopoGraph {
		return nil, errorf(ErrTopology, op, "%s has no graph topology", c.Name())
	}
	if rank < 0 || rank >= c.Size() {
		return nil, errorf(ErrRank, op, "rank %d is out of range [0, %d)", rank, c.Size())
	}
	return c.topo.graphNeighbors(rank), nil
}

// DistGraphCreateAdjacent makes a communicator with a distributed graph
// topology in which this process receives from sources and sends to
// destinations (MPI_Dist_graph_create_adjacent, unweighted). Every edge
// must be given consistently at both ends. reorder is accepted but ranks
// are never reordered. It is collective over c.
func (c *Comm) DistGraphCreateAdjacent(sources, destinations []int, reorder bool) (*Comm, error) {
	n, err := c.distGraphCreateAdjacent(sources, destinations, reorder)
	return n, c.raise(err)
}

// distGraphCreateAdjacent is DistGraphCreateAdjacent without the error handler.
func (c *Comm) distGraphCreateAdjacent(sources, destinations []int, reorder bool) (*Comm, error) {
	const op = "MPI_Dist_graph_create_adjacent"
	if _, err := collStart(op, c); err != nil {
		return nil, err
	}
	for _, r := range slices.Concat(sources, destinations) {
		if r < 0 || r >= c.Size() {
			return nil, errorf(ErrRank, op, "neighbour %d is out of range [0, %d)", r, c.Size())
		}
	}
	nc, err := c.dup()
	if err != nil {
		return nil, err
	}
	nc.topo = &topology{kind: TopoDistGraph, in: slices.Clone(sources), out: slices.Clone(destinations)}
	return nc, nil
}

// DistGraphNeighbors returns this process's in- and out-neighbours in a
// graph or distributed graph topology (MPI_Dist_graph_neighbors).
func (c *Comm) DistGraphNeighbors() (sources, destinations []int, err error) {
	sources, destinations, err = c.distGraphNeighbors()
	return sources, destinations, c.raise(err)
}

// distGraphNeighbors is DistGraphNeighbors without the error handler.
func (c *Comm) distGraphNeighbors() (sources, destinations []int, err error) {
	const op = "MPI_Dist_graph_neighbors"
	if err := checkComm(op, c); err != nil {
		return nil, nil, err
	}
	if c.topo == nil || c.topo.kind == TopoCart {
		return nil, nil, errorf(ErrTopology, op, "%s has no graph topology", c.Name())
	}
	return slices.Clone(c.topo.in), slices.Clone(c.topo.out), nil
}

// neighbor is one slot of a neighbourhood collective: the peer (or
// ProcNull) and the tag offsets its messages carry.
type neighbor struct{ peer, sendSub, recvSub int }

// neighbors lists the in- and out-neighbour slots of c's topology. On a
// Cartesian grid slot 2d is the -1 neighbour in dimension d and slot 2d+1
// the +1 neighbour; a message sent in the + direction is received in the
// receiver's - slot, and the directions carry different tags, so that
// dimensions of size 1 or 2 pair up correctly.
func (c *Comm) neighbors(op string) (in, out []neighbor, err error) {
	if err := checkComm(op, c); err != nil {
		return nil, nil, err
	}
	t := c.topo
	if t == nil {
		return nil, nil, errorf(ErrTopology, op, "%s has no topology", c.Name())
	}
	if t.kind == TopoCart {
		for d := range t.dims {
			src, dst, _ := c.CartShift(d, 1)
			// Slot -: receive what the - neighbour sent in the + direction (sub 2d+1);
			// send in the - direction (sub 2d).
			in = append(in, neighbor{src, 0, 2*d + 1}, neighbor{dst, 0, 2 * d})
			out = append(out, neighbor{src, 2 * d, 0}, neighbor{dst, 2*d + 1, 0})
		}
		return in, out, nil
	}
	for _, r := range t.in {
		in = append(in, neighbor{peer: r})
	}
	for _, r := range t.out {
		out = append(out, neighbor{peer: r})
	}
	return in, out, nil
}

func neighborPlan(op string, c *Comm, send, recv Buffer, alltoall bool) (*plan, error) {
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	in, out, err := c.neighbors(op)
	if err != nil {
		return nil, err
	}
	if err := checkBufs(op, send, recv); err != nil {
		return nil, err
	}
	sbs := send.Size()
	if alltoall {
		if len(out) == 0 {
			if sbs != 0 {
				return nil, errorf(ErrCount, op, "send buffer has %d bytes but there are no out-neighbours", sbs)
			}
		} else if sbs%len(out) != 0 {
			return nil, errorf(ErrCount, op, "send buffer of %d bytes is not %d equal blocks", sbs, len(out))
		} else {
			sbs /= len(out)
		}
	}
	rbs := 0
	if len(in) > 0 {
		if recv.Size()%len(in) != 0 {
			return nil, errorf(ErrCount, op, "receive buffer of %d bytes is not %d equal blocks", recv.Size(), len(in))
		}
		rbs = recv.Size() / len(in)
	}
	if len(in) > 0 && len(out) > 0 && rbs != sbs {
		return nil, errorf(ErrCount, op, "blocks of %d bytes sent but %d received", sbs, rbs)
	}
	p.run = func(e *coll) error {
		s := packIn(send)
		r, done := packOut(recv, true)
		var reqs []*adi.Request
		fail := func(err error) error {
			_ = e.wait(reqs...)
			return err
		}
		for i, nb := range in {
			if nb.peer == ProcNull || rbs == 0 {
				continue
			}
			q, err := e.postTag(false, nb.peer, e.tag|nb.recvSub, r[i*rbs:(i+1)*rbs])
			if err != nil {
				return fail(err)
			}
			reqs = append(reqs, q)
		}
		for i, nb := range out {
			if nb.peer == ProcNull || sbs == 0 {
				continue
			}
			blk := s
			if alltoall {
				blk = s[i*sbs : (i+1)*sbs]
			}
			q, err := e.postTag(true, nb.peer, e.tag|nb.sendSub, blk)
			if err != nil {
				return fail(err)
			}
			reqs = append(reqs, q)
		}
		if err := e.wait(reqs...); err != nil {
			return err
		}
		done()
		return nil
	}
	return p, nil
}

// NeighborAllgatherBuf sends send to every out-neighbour of c's topology and
// receives block i of recv from in-neighbour i (MPI_Neighbor_allgather).
// Blocks from ProcNull neighbours are left unchanged.
func NeighborAllgatherBuf(c *Comm, send, recv Buffer) error {
	return c.planNow(neighborPlan("MPI_Neighbor_allgather", c, send, recv, false))
}

// NeighborAlltoallBuf sends block j of send to out-neighbour j and receives
// block i of recv from in-neighbour i (MPI_Neighbor_alltoall).
func NeighborAlltoallBuf(c *Comm, send, recv Buffer) error {
	return c.planNow(neighborPlan("MPI_Neighbor_alltoall", c, send, recv, true))
}

// IneighborAllgatherBuf starts a NeighborAllgather (MPI_Ineighbor_allgather).
func IneighborAllgatherBuf(c *Comm, send, recv Buffer) (*Request, error) {
	return c.planStart(neighborPlan("MPI_Ineighbor_allgather", c, send, recv, false))
}

// IneighborAlltoallBuf starts a NeighborAlltoall (MPI_Ineighbor_alltoall).
func IneighborAlltoallBuf(c *Comm, send, recv Buffer) (*Request, error) {
	return c.planStart(neighborPlan("MPI_Ineighbor_alltoall", c, send, recv, true))
}

// NeighborAllgather sends send to every out-neighbour and receives
// in-neighbour i's into recv[i*len(send):] (MPI_Neighbor_allgather). On a
// Cartesian topology the neighbours are, per dimension, the -1 then the +1
// neighbour.
func NeighborAllgather[T Numeric](c *Comm, send, recv []T) error {
	return NeighborAllgatherBuf(c, Slice(send), Slice(recv))
}

// NeighborAlltoall sends block j of send to out-neighbour j and receives
// in-neighbour i's block into block i of recv (MPI_Neighbor_alltoall).
func NeighborAlltoall[T Numeric](c *Comm, send, recv []T) error {
	return NeighborAlltoallBuf(c, Slice(send), Slice(recv))
}

// IneighborAllgather starts a NeighborAllgather (MPI_Ineighbor_allgather).
func IneighborAllgather[T Numeric](c *Comm, send, recv []T) (*Request, error) {
	return IneighborAllgatherBuf(c, Slice(send), Slice(recv))
}

// IneighborAlltoall starts a NeighborAlltoall (MPI_Ineighbor_alltoall).
func IneighborAlltoall[T Numeric](c *Comm, send, recv []T) (*Request, error) {
	return IneighborAlltoallBuf(c, Slice(send), Slice(recv))
}
