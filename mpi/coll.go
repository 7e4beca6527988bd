package mpi

import (
	"unsafe"

	"github.com/adimpi/adimpi/adi"
)

// InPlaceBuf is MPI_IN_PLACE for the *Buf collective forms: the zero Buffer.
var InPlaceBuf = Buffer{}

var inPlaceMark [32]uint64

// InPlace returns the MPI_IN_PLACE marker for the generic collective forms:
// an empty slice that the collectives recognise by its address.
func InPlace[T Numeric]() []T {
	return unsafe.Slice((*T)(unsafe.Pointer(&inPlaceMark)), 1)[:0:0]
}

func isInPlace(b Buffer) bool { return b.Type == nil && b.Mem == nil && b.Count == 0 }

// sbuf turns a send slice into a Buffer, recognising InPlace.
func sbuf[T Numeric](s []T) Buffer {
	if len(s) == 0 && cap(s) == 0 && unsafe.Pointer(unsafe.SliceData(s)) == unsafe.Pointer(&inPlaceMark) {
		return InPlaceBuf
	}
	return Slice(s)
}

// plan is a checked collective, ready to run now or in the background.
type plan struct {
	r   *runtime
	c   *Comm
	op  string
	run func(e *coll) error
	// board, if set, runs the collective on c's board instead, when c has
	// one (started non-blocking or persistent: startBoard); e is the
	// collective's own, for paths that fall back to messages.
	board func(e *coll, b *board) error
}

func (p *plan) now() error {
	e := p.c.newColl(p.r, p.op)
	if p.c.nodeBoard != nil && p.r.native {
		// Blocking collectives never overlap, so the host phases of
		// tiered ones may use the host's board (collhier.go).
		e.nb = p.c.nodeBoard
	}
	return p.run(e)
}

// start runs the collective in its own goroutine, which drives progress, and
// returns a request that completes when it is done.
func (p *plan) start() *Request {
	q := &Request{rt: p.r, comm: p.c, op: p.op, peer: AnySource, tag: AnyTag}
	p.launch(q)
	return q
}

// launch runs the collective in its own goroutine as q's operation (a new
// one, or the next run of a persistent collective request).
func (p *plan) launch(q *Request) {
	e := p.c.newColl(p.r, p.op)
	var b *board
	var prev, mine chan struct{}
	if p.board != nil {
		b, prev, mine = p.r.startBoard(p.c)
	}
	ar := &adi.Request{}
	bg := make(chan struct{})
	q.ar, q.bg = ar, bg
	go func() {
		defer close(bg)
		var err error
		if b != nil {
			// Board collectives run one at a time, in call order.
			if prev != nil {
				<-prev
			}
			err = p.board(e, b)
			close(mine)
		} else {
			err = p.run(e)
		}
		ar.Complete(adi.Status{Source: AnySource, Tag: AnyTag, Err: err})
		p.r.dev.Wake() // a waiter may be asleep on the doorbell
	}()
}

func blockingPlan(p *plan, err error) error {
	if err != nil {
		return err
	}
	return p.now()
}

func startPlan(p *plan, err error) (*Request, error) {
	if err != nil {
		return nil, err
	}
	return p.start(), nil
}

func newPlan(op string, c *Comm) (*plan, error) {
	r, err := collStart(op, c)
	if err != nil {
		return nil, err
	}
	return &plan{r: r, c: c, op: op}, nil
}

func checkRoot(op string, c *Comm, root int) error {
	if root < 0 || root >= c.Size() {
		return errorf(ErrRoot, op, "root %d is out of range [0, %d) of %s", root, c.Size(), c.Name())
	}
	return nil
}

func checkBufs(op string, bs ...Buffer) error {
	for _, b := range bs {
		if err := checkBuffer(op, b); err != nil {
			return err
		}
	}
	return nil
}

// ---- Barrier, Bcast ----

func barrierPlan(op string, c *Comm) (*plan, error) {
	if c.IsInter() {
		return interBarrierPlan(op, c)
	}
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	p.run = func(e *coll) error { return e.barrier() }
	p.board = func(_ *coll, b *board) error { return p.r.boardBarrier(b) }
	return p, nil
}

// Barrier blocks until every process of c has called it (MPI_Barrier).
//
// # Rules shared by the collectives
//
// The collectives work on intracommunicators and, except Scan, Exscan and
// the neighbourhood collectives, on intercommunicators, with the semantics
// described at Root (rooted calls take Root and ProcNull in the root's
// group; InPlace is not allowed there).
// Every collective is available in three forms: a generic one on Go slices
// (Bcast, Allreduce, ...), a *Buf one on Buffers (BcastBuf, ...), and a
// non-blocking one returning a *Request (Ibcast, IbcastBuf, ...). In the
// generic forms counts come from slice lengths; in the *Buf forms a receive
// Buffer describes the whole receive area (e.g. for Gather at the root,
// Size()×count elements). Mismatched lengths that a rank can see locally are
// ErrCount errors; an invalid root is ErrRoot, a nil or freed communicator
// ErrComm, a nil operation ErrOp. Collectives run on the communicator's
// collective context, so they never match point-to-point messages, and carry
// a per-communicator sequence number, so collectives in flight at once never
// match each other. Every rank must call the collectives of a communicator
// in the same order.
//
// # Counts that differ between ranks
//
// MPI requires every rank to pass the same amount of data (a Bcast's count
// the root's); a program that does not is erroneous, but adimpi neither
// writes past a buffer, nor returns wrong data silently, nor hangs, and the
// communicator stays usable. The sender's byte count travels with the data,
// so a Bcast rank whose buffer is shorter than the root's data gets the part
// that fits and ErrTruncate, as a truncated receive does, and one whose
// buffer is longer gets the root's data, the rest of its buffer untouched,
// and ErrCount: it saw the mismatch, and a collective's equal-signature rule
// is stricter than a receive's "up to count elements", so silence would hide
// a bug that corrupts the next call on other MPIs. The root returns nil. On
// a communicator with a board (collboards.go), Reduce, Allreduce and Alltoall publish
// every rank's count with its data, and every rank that waits for all of
// them (all, for Allreduce and Alltoall; the root and the ranks of large
// vectors, for Reduce) returns ErrTruncate when a peer passes more bytes
// than it, ErrCount when one passes fewer.
//
// Elsewhere (communicators across hosts, ADIMPI_NATIVE_COLL=off, the
// non-blocking and persistent forms before the communicator's first
// blocking collective, and the collectives boards do not run) the collectives move their data by
// messages, and every rank takes its full part in the exchange whatever it
// receives, so nobody waits for a rank that saw a mismatch. Reduce,
// Allreduce, Scan and Exscan carry the range of counts with their partial
// results: every rank whose result involves a rank of another count returns
// ErrTruncate when a peer passes more bytes than it, ErrCount when one
// passes fewer (for Reduce: the root; for Scan and Exscan: the ranks after
// it). Gather, Scatter, Allgather, Alltoall, ReduceScatter(Block) and the v
// forms check that every message has the size this rank's count expects
// (ErrTruncate when longer, ErrCount when shorter), and a rank that saw a
// mismatch sends a one-byte marker instead of its data from then on, so
// that the ranks whose results pass through it fail too (ErrCount, or
// ErrTruncate where their blocks are empty: they cannot tell which count is
// whose). Across hosts, where the collectives run in tiers, the counts and
// the verdict pass from each host's ranks to its leader, among the leaders
// and back down, with the same results. A rank that returns nil holds the
// right data. The v forms
// (Gatherv, Scatterv, Allgatherv, Alltoallv, Alltoallw) send no message for
// a count of zero, so a zero that a peer does not share still leaves that
// peer waiting.
//
// # In place
//
// MPI_IN_PLACE is InPlace[T]() in the generic forms and InPlaceBuf in the
// *Buf forms, passed as the send buffer (for Scatter(v) at the root: as the
// receive buffer). The data then come from, and the result goes to, the
// receive buffer, as in MPI: for Gather and Gatherv the root's block is
// already in place; for Allgather(v) each rank's block is; for Reduce (root),
// Allreduce, Scan and Exscan the receive buffer holds the input; for
// Alltoall it holds the blocks to send; for ReduceScatterBlock and
// ReduceScatter it holds the whole input and the result is written to its
// start.
func Barrier(c *Comm) error {
	if r, err := current("MPI_Barrier"); err == nil && c != nil {
		if b := r.boardFor(c, 0); b != nil {
			return c.raise(r.boardBarrier(b))
		}
	}
	return c.planNow(barrierPlan("MPI_Barrier", c))
}

// Ibarrier starts a barrier (MPI_Ibarrier); the request completes once
// every process of c has started it.
func Ibarrier(c *Comm) (*Request, error) { return c.planStart(barrierPlan("MPI_Ibarrier", c)) }

func bcastPlan(op string, c *Comm, b Buffer, root int) (*plan, error) {
	if c.IsInter() {
		return interBcastPlan(op, c, b, root)
	}
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	if err := checkRoot(op, c, root); err != nil {
		return nil, err
	}
	if err := checkBuffer(op, b); err != nil {
		return nil, err
	}
	p.run = func(e *coll) error {
		data, done := packOut(b, e.rank == root)
		if err := e.bcast(data, root); err != nil {
			return err
		}
		if e.rank != root {
			done()
		}
		return nil
	}
	p.board = func(e *coll, bd *board) error {
		return p.r.bcastOnBoard(bd, b, root, func(work []byte) error { return e.bcast(work, root) })
	}
	return p, nil
}

// BcastBuf sends root's buffer to every process's b (MPI_Bcast).
func BcastBuf(c *Comm, b Buffer, root int) error { return c.raise(bcastBuf(c, b, root)) }

func bcastBuf(c *Comm, b Buffer, root int) error {
	const op = "MPI_Bcast"
	if c.IsInter() {
		return blockingPlan(bcastPlan(op, c, b, root))
	}
	// The plan's checks, without the plan: the board path allocates nothing.
	r, err := collStart(op, c)
	if err == nil {
		err = checkRoot(op, c, root)
	}
	if err == nil {
		err = checkBuffer(op, b)
	}
	if err != nil {
		return err
	}
	bd := r.boardFor(c, 0)
	if bd == nil {
		return blockingPlan(bcastPlan(op, c, b, root))
	}
	return r.bcastOnBoard(bd, b, root, func(work []byte) error {
		return c.newColl(r, op).bcast(work, root)
	})
}

// bcastOnBoard is MPI_Bcast of b on board bd (boardBcastAny); msg
// broadcasts by messages where the board cannot.
func (r *runtime) bcastOnBoard(bd *board, b Buffer, root int, msg func([]byte) error) error {
	data, done := packOut(b, bd.rank == root)
	err := r.boardBcastAny(bd, data, root, msg)
	if bd.rank != root && (err == nil || ErrorClass(err) == ErrTruncate || ErrorClass(err) == ErrCount) {
		done() // a mismatch still delivers what fits, as a truncated receive does
	}
	return err
}

// IbcastBuf starts a broadcast (MPI_Ibcast).
func IbcastBuf(c *Comm, b Buffer, root int) (*Request, error) {
	return c.planStart(bcastPlan("MPI_Ibcast", c, b, root))
}

// Bcast copies root's buf into every process's buf (MPI_Bcast).
func Bcast[T Numeric](c *Comm, buf []T, root int) error { return BcastBuf(c, Slice(buf), root) }

// Ibcast starts a broadcast of buf (MPI_Ibcast).
func Ibcast[T Numeric](c *Comm, buf []T, root int) (*Request, error) {
	return IbcastBuf(c, Slice(buf), root)
}

// ---- Gather, Scatter ----

// rootedArgs checks the buffers of a rooted collective with equal blocks
// (Gather, Scatter): local is every process's block, all is the root's
// Size() blocks (its "what" buffer), and inplace says the root passed InPlace
// for its own block. It returns the block size in bytes.
func rootedArgs(op string, c *Comm, root int, local, all Buffer, inplace bool, what string) (int, error) {
	n := c.Size()
	if inplace && c.rank != root {
		return 0, errorf(ErrBuffer, op, "InPlace is only allowed at the root")
	}
	if !inplace {
		if err := checkBuffer(op, local); err != nil {
			return 0, err
		}
	}
	bs := local.Size()
	if c.rank != root {
		return bs, nil
	}
	if err := checkBuffer(op, all); err != nil {
		return 0, err
	}
	if inplace {
		if all.Size()%n != 0 {
			return 0, errorf(ErrCount, op, "%s buffer of %d bytes is not %d equal blocks", what, all.Size(), n)
		}
		return all.Size() / n, nil
	}
	if all.Size() != n*bs {
		return 0, errorf(ErrCount, op, "%s buffer holds %d bytes, want %d processes × %d", what, all.Size(), n, bs)
	}
	return bs, nil
}

func gatherPlan(op string, c *Comm, send, recv Buffer, root int) (*plan, error) {
	if c.IsInter() {
		return interGatherPlan(op, c, send, recv, root)
	}
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	if err := checkRoot(op, c, root); err != nil {
		return nil, err
	}
	me := c.rank
	inplace := isInPlace(send)
	bs, err := rootedArgs(op, c, root, send, recv, inplace, "receive")
	if err != nil {
		return nil, err
	}
	p.run = func(e *coll) error {
		if e.rank != root {
			return e.gather(packIn(send), nil, root)
		}
		all, done := packOut(recv, inplace)
		var mine []byte
		if inplace {
			mine = append([]byte(nil), all[me*bs:(me+1)*bs]...)
		} else {
			mine = packIn(send)
		}
		if err := e.gather(mine, all, root); err != nil {
			return err
		}
		done()
		return nil
	}
	return p, nil
}

// GatherBuf collects every process's send at root, in rank order, into recv
// (MPI_Gather); recv is only used at root and must hold Size() blocks.
func GatherBuf(c *Comm, send, recv Buffer, root int) error {
	return c.planNow(gatherPlan("MPI_Gather", c, send, recv, root))
}

// IgatherBuf starts a gather (MPI_Igather).
func IgatherBuf(c *Comm, send, recv Buffer, root int) (*Request, error) {
	return c.planStart(gatherPlan("MPI_Igather", c, send, recv, root))
}

// Gather collects every process's send at root: recv[i*len(send):] gets
// rank i's (MPI_Gather). recv is only used at root, where
// len(recv) = Size()·len(send).
func Gather[T Numeric](c *Comm, send, recv []T, root int) error {
	return GatherBuf(c, sbuf(send), Slice(recv), root)
}

// Igather starts a gather (MPI_Igather).
func Igather[T Numeric](c *Comm, send, recv []T, root int) (*Request, error) {
	return IgatherBuf(c, sbuf(send), Slice(recv), root)
}

func scatterPlan(op string, c *Comm, send, recv Buffer, root int) (*plan, error) {
	if c.IsInter() {
		return interScatterPlan(op, c, send, recv, root)
	}
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	if err := checkRoot(op, c, root); err != nil {
		return nil, err
	}
	inplace := isInPlace(recv)
	bs, err := rootedArgs(op, c, root, recv, send, inplace, "send")
	if err != nil {
		return nil, err
	}
	p.run = func(e *coll) error {
		if e.rank != root {
			mine, done := packOut(recv, false)
			if err := e.scatter(nil, mine, root); err != nil {
				return err
			}
			done()
			return nil
		}
		all := packIn(send)
		if inplace {
			return e.scatter(all, make([]byte, bs), root)
		}
		mine, done := packOut(recv, false)
		if err := e.scatter(all, mine, root); err != nil {
			return err
		}
		done()
		return nil
	}
	return p, nil
}

// ScatterBuf sends block i of root's send to rank i's recv (MPI_Scatter);
// send is only used at root and holds Size() blocks.
func ScatterBuf(c *Comm, send, recv Buffer, root int) error {
	return c.planNow(scatterPlan("MPI_Scatter", c, send, recv, root))
}

// IscatterBuf starts a scatter (MPI_Iscatter).
func IscatterBuf(c *Comm, send, recv Buffer, root int) (*Request, error) {
	return c.planStart(scatterPlan("MPI_Iscatter", c, send, recv, root))
}

// Scatter sends send[i*len(recv):(i+1)*len(recv)] from root to rank i's recv
// (MPI_Scatter). send is only used at root; at root recv may be InPlace.
func Scatter[T Numeric](c *Comm, send, recv []T, root int) error {
	return ScatterBuf(c, Slice(send), sbuf(recv), root)
}

// Iscatter starts a scatter (MPI_Iscatter).
func Iscatter[T Numeric](c *Comm, send, recv []T, root int) (*Request, error) {
	return IscatterBuf(c, Slice(send), sbuf(recv), root)
}

// vlayout checks counts and displacements (in elements of b's type) against
// b and returns the blocks' byte sizes.
func vlayout(op string, c *Comm, b Buffer, counts, displs []int) ([]int, error) {
	return vlayoutN(op, c.Size(), b, counts, displs)
}

// vlayoutN is vlayout for n blocks.
func vlayoutN(op string, n int, b Buffer, counts, displs []int) ([]int, error) {
	if len(counts) != n || len(displs) != n {
		return nil, errorf(ErrCount, op, "%d counts and %d displacements for %d processes", len(counts), len(displs), n)
	}
	if b.Type == nil {
		return nil, errorf(ErrType, op, "datatype is nil")
	}
	sz := make([]int, n)
	for i := range counts {
		if counts[i] < 0 {
			return nil, errorf(ErrCount, op, "count %d of rank %d is negative", counts[i], i)
		}
		if displs[i] < 0 {
			return nil, errorf(ErrArg, op, "displacement %d of rank %d is negative", displs[i], i)
		}
		if counts[i] > 0 && displs[i]*b.Type.Extent()+b.Type.Span(counts[i]) > len(b.Mem) {
			return nil, errorf(ErrBuffer, op, "block %d (%d elements at %d) runs past the buffer's %d bytes", i, counts[i], displs[i], len(b.Mem))
		}
		sz[i] = counts[i] * b.Type.Size()
	}
	return sz, nil
}

// block is the sub-buffer of count elements at displacement displ.
func block(b Buffer, displ, count int) Buffer {
	if count == 0 {
		return Buffer{Type: b.Type}
	}
	return Buffer{Mem: b.Mem[displ*b.Type.Extent():], Count: count, Type: b.Type}
}

// recvBlocks receives block i of recv (counts[i] elements at displs[i],
// sz[i] bytes packed) from peer i of x for every non-empty block but
// skip's (-1: none), and stores them into recv once all have arrived.
func recvBlocks(x *coll, recv Buffer, counts, displs, sz []int, skip int) error {
	reqs := make([]*adi.Request, len(sz))
	dones := make([]func(), len(sz))
	for i := range sz {
		if sz[i] == 0 || i == skip {
			continue
		}
		buf, done := packOut(block(recv, displs[i], counts[i]), false)
		dones[i] = done
		q, err := x.irecv(i, buf)
		if err != nil {
			_ = x.wait(reqs...)
			return err
		}
		reqs[i] = q
	}
	if err := x.wait(reqs...); err != nil {
		return err
	}
	for _, d := range dones {
		if d != nil {
			d()
		}
	}
	return nil
}

// sendBlocks sends block i of send (counts[i] elements at displs[i], sz[i]
// bytes packed) to peer i of x for every non-empty block but skip's (-1:
// none).
func sendBlocks(x *coll, send Buffer, counts, displs, sz []int, skip int) error {
	reqs := make([]*adi.Request, len(sz))
	for i := range sz {
		if sz[i] == 0 || i == skip {
			continue
		}
		q, err := x.isend(i, packIn(block(send, displs[i], counts[i])))
		if err != nil {
			_ = x.wait(reqs...)
			return err
		}
		reqs[i] = q
	}
	return x.wait(reqs...)
}

// recvPacked receives b's bytes, packed, from peer of x into b.
func recvPacked(x *coll, peer int, b Buffer) error {
	buf, done := packOut(b, false)
	if err := x.recv(peer, buf); err != nil {
		return err
	}
	done()
	return nil
}

// rootedVArgs checks the buffers of a rooted collective with blocks of
// their own sizes (Gatherv, Scatterv): local is every process's block, all
// the root's blocks as counts and displs give them, and inplace says the
// root passed InPlace for its own block; verb says what the root does with
// local, for the error. It returns the blocks' sizes in bytes at the root,
// nil elsewhere.
func rootedVArgs(op string, c *Comm, root int, local, all Buffer, counts, displs []int, inplace bool, verb string) ([]int, error) {
	me := c.rank
	if inplace && me != root {
		return nil, errorf(ErrBuffer, op, "InPlace is only allowed at the root")
	}
	if !inplace {
		if err := checkBuffer(op, local); err != nil {
			return nil, err
		}
	}
	if me != root {
		return nil, nil
	}
	sz, err := vlayout(op, c, all, counts, displs)
	if err != nil {
		return nil, err
	}
	if !inplace && local.Size() != sz[me] {
		return nil, errorf(ErrCount, op, "root %s %d bytes but its count says %d", verb, local.Size(), sz[me])
	}
	return sz, nil
}

func gathervPlan(op string, c *Comm, send, recv Buffer, counts, displs []int, root int) (*plan, error) {
	if c.IsInter() {
		return interGathervPlan(op, c, send, recv, counts, displs, root)
	}
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	if err := checkRoot(op, c, root); err != nil {
		return nil, err
	}
	me := c.rank
	inplace := isInPlace(send)
	sz, err := rootedVArgs(op, c, root, send, recv, counts, displs, inplace, "sends")
	if err != nil {
		return nil, err
	}
	p.run = func(e *coll) error {
		e.exact = true // the root checks every block's size
		if e.rank != root {
			if send.Size() == 0 {
				return nil
			}
			return e.send(root, packIn(send))
		}
		if !inplace && sz[me] > 0 {
			buf, done := packOut(block(recv, displs[me], counts[me]), false)
			copy(buf, packIn(send))
			done()
		}
		if err := recvBlocks(e, recv, counts, displs, sz, me); err != nil {
			return err
		}
		return e.mis
	}
	return p, nil
}

// GathervBuf collects every process's send at root; rank i's lands at
// recv's element displs[i] and must be counts[i] elements of recv's type
// (MPI_Gatherv). recv, counts and displs are only used at root.
func GathervBuf(c *Comm, send, recv Buffer, counts, displs []int, root int) error {
	return c.planNow(gathervPlan("MPI_Gatherv", c, send, recv, counts, displs, root))
}

// IgathervBuf starts a Gatherv (MPI_Igatherv).
func IgathervBuf(c *Comm, send, recv Buffer, counts, displs []int, root int) (*Request, error) {
	return c.planStart(gathervPlan("MPI_Igatherv", c, send, recv, counts, displs, root))
}

// Gatherv collects rank i's send into recv[displs[i]:displs[i]+counts[i]] at
// root (MPI_Gatherv).
func Gatherv[T Numeric](c *Comm, send, recv []T, counts, displs []int, root int) error {
	return GathervBuf(c, sbuf(send), Slice(recv), counts, displs, root)
}

// Igatherv starts a Gatherv (MPI_Igatherv).
func Igatherv[T Numeric](c *Comm, send, recv []T, counts, displs []int, root int) (*Request, error) {
	return IgathervBuf(c, sbuf(send), Slice(recv), counts, displs, root)
}

func scattervPlan(op string, c *Comm, send Buffer, counts, displs []int, recv Buffer, root int) (*plan, error) {
	if c.IsInter() {
		return interScattervPlan(op, c, send, counts, displs, recv, root)
	}
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	if err := checkRoot(op, c, root); err != nil {
		return nil, err
	}
	me := c.rank
	inplace := isInPlace(recv)
	sz, err := rootedVArgs(op, c, root, recv, send, counts, displs, inplace, "receives")
	if err != nil {
		return nil, err
	}
	p.run = func(e *coll) error {
		e.exact = true // every rank checks its block's size
		if e.rank != root {
			if recv.Size() == 0 {
				return nil
			}
			if err := recvPacked(e, root, recv); err != nil {
				return err
			}
			return e.mis
		}
		if !inplace && sz[me] > 0 {
			buf, done := packOut(recv, false)
			copy(buf, packIn(block(send, displs[me], counts[me])))
			done()
		}
		return sendBlocks(e, send, counts, displs, sz, me)
	}
	return p, nil
}

// ScattervBuf sends counts[i] elements at send's element displs[i] from
// root to rank i's recv (MPI_Scatterv). send, counts and displs are only
// used at root.
func ScattervBuf(c *Comm, send Buffer, counts, displs []int, recv Buffer, root int) error {
	return c.planNow(scattervPlan("MPI_Scatterv", c, send, counts, displs, recv, root))
}

// IscattervBuf starts a Scatterv (MPI_Iscatterv).
func IscattervBuf(c *Comm, send Buffer, counts, displs []int, recv Buffer, root int) (*Request, error) {
	return c.planStart(scattervPlan("MPI_Iscatterv", c, send, counts, displs, recv, root))
}

// Scatterv sends send[displs[i]:displs[i]+counts[i]] from root to rank i's
// recv (MPI_Scatterv).
func Scatterv[T Numeric](c *Comm, send []T, counts, displs []int, recv []T, root int) error {
	return ScattervBuf(c, Slice(send), counts, displs, sbuf(recv), root)
}

// Iscatterv starts a Scatterv (MPI_Iscatterv).
func Iscatterv[T Numeric](c *Comm, send []T, counts, displs []int, recv []T, root int) (*Request, error) {
	return IscattervBuf(c, Slice(send), counts, displs, sbuf(recv), root)
}

// ---- Allgather, Alltoall ----

func allgatherPlan(op string, c *Comm, send, recv Buffer) (*plan, error) {
	if c.IsInter() {
		return interAllgatherPlan(op, c, send, recv)
	}
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	n, me := c.Size(), c.rank
	inplace := isInPlace(send)
	if !inplace {
		if err := checkBuffer(op, send); err != nil {
			return nil, err
		}
	}
	if err := checkBuffer(op, recv); err != nil {
		return nil, err
	}
	bs := send.Size()
	if inplace {
		if recv.Size()%n != 0 {
			return nil, errorf(ErrCount, op, "receive buffer of %d bytes is not %d equal blocks", recv.Size(), n)
		}
		bs = recv.Size() / n
	} else if recv.Size() != n*bs {
		return nil, errorf(ErrCount, op, "receive buffer holds %d bytes, want %d processes × %d", recv.Size(), n, bs)
	}
	p.run = func(e *coll) error {
		all, done := packOut(recv, inplace)
		var mine []byte
		if inplace {
			mine = append([]byte(nil), all[me*bs:(me+1)*bs]...)
		} else {
			mine = packIn(send)
		}
		if err := e.allgather(mine, all); err != nil {
			return err
		}
		done()
		return nil
	}
	return p, nil
}

// AllgatherBuf gathers every process's send into every process's recv, in
// rank order (MPI_Allgather).
func AllgatherBuf(c *Comm, send, recv Buffer) error {
	return c.planNow(allgatherPlan("MPI_Allgather", c, send, recv))
}

// IallgatherBuf starts an Allgather (MPI_Iallgather).
func IallgatherBuf(c *Comm, send, recv Buffer) (*Request, error) {
	return c.planStart(allgatherPlan("MPI_Iallgather", c, send, recv))
}

// Allgather gathers every process's send into every process's recv:
// recv[i*len(send):] gets rank i's (MPI_Allgather).
func Allgather[T Numeric](c *Comm, send, recv []T) error {
	return AllgatherBuf(c, sbuf(send), Slice(recv))
}

// Iallgather starts an Allgather (MPI_Iallgather).
func Iallgather[T Numeric](c *Comm, send, recv []T) (*Request, error) {
	return IallgatherBuf(c, sbuf(send), Slice(recv))
}

func allgathervPlan(op string, c *Comm, send, recv Buffer, counts, displs []int) (*plan, error) {
	if c.IsInter() {
		return interAllgathervPlan(op, c, send, recv, counts, displs)
	}
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	me := c.rank
	inplace := isInPlace(send)
	if !inplace {
		if err := checkBuffer(op, send); err != nil {
			return nil, err
		}
	}
	sz, err := vlayout(op, c, recv, counts, displs)
	if err != nil {
		return nil, err
	}
	if !inplace && send.Size() != sz[me] {
		return nil, errorf(ErrCount, op, "sends %d bytes but its count says %d", send.Size(), sz[me])
	}
	p.run = func(e *coll) error {
		off := make([]int, e.size+1)
		for i := range sz {
			off[i+1] = off[i] + sz[i]
		}
		all := scratch(off[e.size])
		defer release(all)
		if inplace {
			block(recv, displs[me], counts[me]).CopyOut(0, all[off[me]:off[me+1]])
		} else {
			copy(all[off[me]:], packIn(send))
		}
		if err := e.allgatherv(all, off, sz); err != nil {
			return err
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

// AllgathervBuf gathers every process's send into every process's recv,
// rank i's at element displs[i] (MPI_Allgatherv).
func AllgathervBuf(c *Comm, send, recv Buffer, counts, displs []int) error {
	return c.planNow(allgathervPlan("MPI_Allgatherv", c, send, recv, counts, displs))
}

// IallgathervBuf starts an Allgatherv (MPI_Iallgatherv).
func IallgathervBuf(c *Comm, send, recv Buffer, counts, displs []int) (*Request, error) {
	return c.planStart(allgathervPlan("MPI_Iallgatherv", c, send, recv, counts, displs))
}

// Allgatherv gathers rank i's send into recv[displs[i]:displs[i]+counts[i]]
// on every process (MPI_Allgatherv).
func Allgatherv[T Numeric](c *Comm, send, recv []T, counts, displs []int) error {
	return AllgathervBuf(c, sbuf(send), Slice(recv), counts, displs)
}

// Iallgatherv starts an Allgatherv (MPI_Iallgatherv).
func Iallgatherv[T Numeric](c *Comm, send, recv []T, counts, displs []int) (*Request, error) {
	return IallgathervBuf(c, sbuf(send), Slice(recv), counts, displs)
}

func alltoallPlan(op string, c *Comm, send, recv Buffer) (*plan, error) {
	if c.IsInter() {
		return interAlltoallPlan(op, c, send, recv)
	}
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	n := c.Size()
	inplace := isInPlace(send)
	if !inplace {
		if err := checkBuffer(op, send); err != nil {
			return nil, err
		}
	}
	if err := checkBuffer(op, recv); err != nil {
		return nil, err
	}
	if recv.Size()%n != 0 || (!inplace && send.Size() != recv.Size()) {
		return nil, errorf(ErrCount, op, "send %d and receive %d bytes are not the same %d equal blocks", send.Size(), recv.Size(), n)
	}
	bs := recv.Size() / n
	p.run = func(e *coll) error {
		var s []byte
		if inplace {
			s = make([]byte, recv.Size())
			recv.CopyOut(0, s)
		} else {
			s = packIn(send)
		}
		r, done := packOut(recv, false)
		if err := e.alltoall(s, r, bs); err != nil {
			return err
		}
		done()
		return nil
	}
	return p, nil
}

// AlltoallBuf sends block j of send to rank j, which stores it as block i
// of recv, where i is the sender's rank (MPI_Alltoall).
func AlltoallBuf(c *Comm, send, recv Buffer) error { return c.raise(alltoallBuf(c, send, recv)) }

func alltoallBuf(c *Comm, send, recv Buffer) error {
	p, err := alltoallPlan("MPI_Alltoall", c, send, recv)
	if err != nil || c.IsInter() {
		return blockingPlan(p, err)
	}
	sb := p.r.boardFor(c, 0)
	if sb == nil {
		return p.now()
	}
	// Data up to the stage limit go through the board slots; larger ones
	// are read where they lie, or go by messages where peers' memory
	// cannot be read. Every path's first round publishes the count, so
	// processes whose counts (hence paths) differ all stop at it with an
	// error; the agreement comes first, so that it is made at the same
	// point whatever the counts.
	if err := p.r.boardAgree(sb); err != nil {
		return err
	}
	b := p.r.boardFor(c, recv.Size())
	staged := b != nil
	if !staged && sb.readable {
		b = sb
	}
	if b == nil {
		if err := p.r.boardHeader(sb, p.op, recv.Size()); err != nil {
			return err
		}
		return p.now()
	}
	var s []byte
	if isInPlace(send) {
		s = make([]byte, recv.Size())
		recv.CopyOut(0, s)
	} else {
		s = packIn(send)
	}
	out, done := packOut(recv, false)
	if staged {
		err = p.r.boardAlltoallStaged(b, s, out, recv.Size()/c.Size())
	} else {
		err = p.r.boardAlltoallRead(b, s, out, recv.Size()/c.Size())
	}
	if err != nil {
		return err
	}
	done()
	return nil
}

// IalltoallBuf starts an Alltoall (MPI_Ialltoall).
func IalltoallBuf(c *Comm, send, recv Buffer) (*Request, error) {
	return c.planStart(alltoallPlan("MPI_Ialltoall", c, send, recv))
}

// Alltoall sends block j of send to rank j and receives rank i's block into
// block i of recv; len(send) = len(recv) = Size()·block (MPI_Alltoall).
func Alltoall[T Numeric](c *Comm, send, recv []T) error {
	return AlltoallBuf(c, sbuf(send), Slice(recv))
}

// Ialltoall starts an Alltoall (MPI_Ialltoall).
func Ialltoall[T Numeric](c *Comm, send, recv []T) (*Request, error) {
	return IalltoallBuf(c, sbuf(send), Slice(recv))
}

func alltoallvPlan(op string, c *Comm, send Buffer, scounts, sdispls []int, recv Buffer, rcounts, rdispls []int) (*plan, error) {
	if c.IsInter() {
		return interAlltoallvPlan(op, c, send, scounts, sdispls, recv, rcounts, rdispls)
	}
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	inplace := isInPlace(send)
	if inplace {
		send, scounts, sdispls = recv, rcounts, rdispls
	}
	ssz, err := vlayout(op, c, send, scounts, sdispls)
	if err != nil {
		return nil, err
	}
	rsz, err := vlayout(op, c, recv, rcounts, rdispls)
	if err != nil {
		return nil, err
	}
	p.run = func(e *coll) error {
		n := e.size
		soff, roff := make([]int, n+1), make([]int, n+1)
		for i := 0; i < n; i++ {
			soff[i+1], roff[i+1] = soff[i]+ssz[i], roff[i]+rsz[i]
		}
		s, r := scratch(soff[n]), scratch(roff[n])
		defer release(s, r)
		for i := 0; i < n; i++ {
			if ssz[i] > 0 {
				block(send, sdispls[i], scounts[i]).CopyOut(0, s[soff[i]:soff[i+1]])
			}
		}
		if err := e.alltoallv(s, soff[:n], ssz, r, roff[:n], rsz); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if rsz[i] > 0 {
				block(recv, rdispls[i], rcounts[i]).CopyIn(0, r[roff[i]:roff[i+1]])
			}
		}
		return nil
	}
	return p, nil
}

// AlltoallvBuf sends scounts[j] elements at send's element sdispls[j] to
// rank j, and receives rank i's into recv at rdispls[i] (MPI_Alltoallv).
func AlltoallvBuf(c *Comm, send Buffer, scounts, sdispls []int, recv Buffer, rcounts, rdispls []int) error {
	return c.planNow(alltoallvPlan("MPI_Alltoallv", c, send, scounts, sdispls, recv, rcounts, rdispls))
}

// IalltoallvBuf starts an Alltoallv (MPI_Ialltoallv).
func IalltoallvBuf(c *Comm, send Buffer, scounts, sdispls []int, recv Buffer, rcounts, rdispls []int) (*Request, error) {
	return c.planStart(alltoallvPlan("MPI_Ialltoallv", c, send, scounts, sdispls, recv, rcounts, rdispls))
}

// Alltoallv sends send[sdispls[j]:+scounts[j]] to rank j and receives rank
// i's into recv[rdispls[i]:+rcounts[i]] (MPI_Alltoallv). With send InPlace
// (scounts and sdispls ignored) the data sent come from recv's layout.
func Alltoallv[T Numeric](c *Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) error {
	return AlltoallvBuf(c, sbuf(send), scounts, sdispls, Slice(recv), rcounts, rdispls)
}

// Ialltoallv starts an Alltoallv (MPI_Ialltoallv).
func Ialltoallv[T Numeric](c *Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) (*Request, error) {
	return IalltoallvBuf(c, sbuf(send), scounts, sdispls, Slice(recv), rcounts, rdispls)
}
