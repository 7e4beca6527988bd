package mpi

import "github.com/adimpi/adimpi/adi"

// The reducing collectives: Reduce, Allreduce, ReduceScatterBlock,
// ReduceScatter, Scan, Exscan. Send and receive buffers have the same
// datatype; the operation is checked against it (ErrOp when it is not
// defined for the type).

// reduceArgs checks a reduction's buffers: the input is send, or recv when
// send is InPlaceBuf; count is the number of input elements.
func reduceArgs(op string, send, recv Buffer, o *Op, useRecv bool) (in Buffer, inplace bool, red reducer, err error) {
	inplace = isInPlace(send)
	if inplace {
		in = recv
	} else {
		in = send
		if err = checkBuffer(op, send); err != nil {
			return
		}
	}
	if useRecv || inplace {
		if err = checkBuffer(op, recv); err != nil {
			return
		}
		if !inplace && recv.Type != send.Type {
			err = errorf(ErrType, op, "send type %s differs from receive type %s", send.Type, recv.Type)
			return
		}
	}
	if in.Type == nil {
		err = errorf(ErrType, op, "datatype is nil")
		return
	}
	red, err = reducerFor(op, o, in.Type, in.Count)
	return
}

// reduceCheck checks an intracommunicator Reduce; in is the input buffer.
func reduceCheck(op string, c *Comm, send, recv Buffer, o *Op, root int) (r *runtime, in Buffer, red reducer, err error) {
	if r, err = collStart(op, c); err != nil {
		return
	}
	if err = checkRoot(op, c, root); err != nil {
		return
	}
	isRoot := c.rank == root
	if isInPlace(send) && !isRoot {
		err = errorf(ErrBuffer, op, "InPlace is only allowed at the root")
		return
	}
	if in, _, red, err = reduceArgs(op, send, recv, o, isRoot); err != nil {
		return
	}
	if isRoot && recv.Count != in.Count {
		err = errorf(ErrCount, op, "root sends %d elements but receives %d", in.Count, recv.Count)
	}
	return
}

func reducePlan(op string, c *Comm, send, recv Buffer, o *Op, root int) (*plan, error) {
	if c.IsInter() {
		return interReducePlan(op, c, send, recv, o, root)
	}
	r, in, red, err := reduceCheck(op, c, send, recv, o, root)
	if err != nil {
		return nil, err
	}
	return reduceWith(op, c, r, in, recv, red, root), nil
}

// reduceWith is the plan of a checked Reduce.
func reduceWith(op string, c *Comm, r *runtime, in, recv Buffer, red reducer, root int) *plan {
	isRoot := c.rank == root
	p := &plan{r: r, c: c, op: op}
	p.run = func(e *coll) error {
		s := packIn(in)
		if !isRoot {
			return e.reduce(s, nil, red, root)
		}
		r, done := packOut(recv, false)
		if err := e.reduce(s, r, red, root); err != nil {
			return err
		}
		done()
		return nil
	}
	p.board = func(e *coll, b *board) error {
		return r.reduceOnBoard(b, op, in, recv, red, root, func() error { return p.run(e) })
	}
	return p
}

// ReduceBuf combines every process's send with o, in rank order, into
// root's recv (MPI_Reduce); recv is only used at root.
func ReduceBuf(c *Comm, send, recv Buffer, o *Op, root int) error {
	return c.raise(reduceBuf(c, send, recv, o, root))
}

func reduceBuf(c *Comm, send, recv Buffer, o *Op, root int) error {
	const op = "MPI_Reduce"
	if c.IsInter() {
		return blockingPlan(reducePlan(op, c, send, recv, o, root))
	}
	r, in, red, err := reduceCheck(op, c, send, recv, o, root)
	if err != nil {
		return err
	}
	if b := r.boardFor(c, 0); b != nil {
		return r.reduceOnBoard(b, op, in, recv, red, root, func() error {
			return reduceWith(op, c, r, in, recv, red, root).now()
		})
	}
	return reduceWith(op, c, r, in, recv, red, root).now()
}

// reduceOnBoard is MPI_Reduce on board b: small vectors fold from the
// slots; larger ones go by messages (msg), once every process has checked
// that all counts agree (its own may have sent it to the board).
func (r *runtime) reduceOnBoard(b *board, op string, in, recv Buffer, red reducer, root int, msg func() error) error {
	if in.Size() > boardReduceMax {
		if err := r.boardHeader(b, op, in.Size()); err != nil {
			return err
		}
		return msg()
	}
	if b.rank != root {
		return r.boardReduce(b, op, packIn(in), nil, red, root, false)
	}
	// The board works on packed bytes: a non-contiguous recv gets them
	// through packOut.
	out, done := packOut(recv, false)
	if err := r.boardReduce(b, op, packIn(in), out, red, root, false); err != nil {
		return err
	}
	done()
	return nil
}

// IreduceBuf starts a Reduce (MPI_Ireduce).
func IreduceBuf(c *Comm, send, recv Buffer, o *Op, root int) (*Request, error) {
	return c.planStart(reducePlan("MPI_Ireduce", c, send, recv, o, root))
}

// Reduce combines every process's send element by element with o into
// root's recv: recv[i] = send₀[i] o send₁[i] o … (MPI_Reduce).
func Reduce[T Numeric](c *Comm, send, recv []T, o *Op, root int) error {
	return ReduceBuf(c, sbuf(send), Slice(recv), o, root)
}

// Ireduce starts a Reduce (MPI_Ireduce).
func Ireduce[T Numeric](c *Comm, send, recv []T, o *Op, root int) (*Request, error) {
	return IreduceBuf(c, sbuf(send), Slice(recv), o, root)
}

// allreduceCheck checks an intracommunicator Allreduce; in is the input
// buffer.
func allreduceCheck(op string, c *Comm, send, recv Buffer, o *Op) (r *runtime, in Buffer, inplace bool, red reducer, err error) {
	if r, err = collStart(op, c); err != nil {
		return
	}
	if in, inplace, red, err = reduceArgs(op, send, recv, o, true); err != nil {
		return
	}
	if recv.Count != in.Count {
		err = errorf(ErrCount, op, "sends %d elements but receives %d", in.Count, recv.Count)
	}
	return
}

func allreducePlan(op string, c *Comm, send, recv Buffer, o *Op) (*plan, error) {
	if c.IsInter() {
		return interAllreducePlan(op, c, send, recv, o)
	}
	r, in, inplace, red, err := allreduceCheck(op, c, send, recv, o)
	if err != nil {
		return nil, err
	}
	return allreduceWith(op, c, r, send, recv, in, inplace, red, reduceUnit(in, o)), nil
}

// reduceUnit is the size of the smallest piece an Allreduce may cut in's
// vector into: an element, or for Minloc and Maxloc a (value, index) pair.
func reduceUnit(in Buffer, o *Op) int {
	if o.code == opMinloc || o.code == opMaxloc {
		return 2 * in.Type.Size()
	}
	return in.Type.Size()
}

// allreduceWith is the plan of a checked Allreduce.
// Pieces of the vector are whole multiples of es bytes.
func allreduceWith(op string, c *Comm, r *runtime, send, recv, in Buffer, inplace bool, red reducer, es int) *plan {
	p := &plan{r: r, c: c, op: op}
	p.run = func(e *coll) error {
		buf, done := packOut(recv, inplace)
		if !inplace {
			copy(buf, packIn(send))
		}
		if err := e.allreduce(buf, red, es); err != nil {
			return err
		}
		done()
		return nil
	}
	p.board = func(e *coll, b *board) error {
		return r.allreduceOnBoard(b, op, recv, in, red, es, func() error { return p.run(e) })
	}
	return p
}

// AllreduceBuf is Reduce with the result delivered to every process
// (MPI_Allreduce); every process gets bit-identical results.
func AllreduceBuf(c *Comm, send, recv Buffer, o *Op) error {
	return c.raise(allreduceBuf(c, send, recv, o))
}

func allreduceBuf(c *Comm, send, recv Buffer, o *Op) error {
	const op = "MPI_Allreduce"
	if c.IsInter() {
		return blockingPlan(allreducePlan(op, c, send, recv, o))
	}
	r, in, inplace, red, err := allreduceCheck(op, c, send, recv, o)
	if err != nil {
		return err
	}
	if b := r.boardFor(c, 0); b != nil {
		return r.allreduceOnBoard(b, op, recv, in, red, reduceUnit(in, o), func() error {
			return allreduceWith(op, c, r, send, recv, in, inplace, red, reduceUnit(in, o)).now()
		})
	}
	return allreduceWith(op, c, r, send, recv, in, inplace, red, reduceUnit(in, o)).now()
}

// allreduceOnBoard is MPI_Allreduce of in into recv on board b, in pieces
// of es bytes; msg runs it by messages where the board cannot (a large
// non-commutative operation), once every process has checked that all
// counts agree. The board works on packed bytes: a non-contiguous recv
// gets them through packOut (packIn of an in-place input then reads a
// copy).
func (r *runtime) allreduceOnBoard(b *board, op string, recv, in Buffer, red reducer, es int, msg func() error) error {
	switch {
	case in.Size() <= boardReduceMax:
		out, done := packOut(recv, false)
		if err := r.boardReduce(b, op, packIn(in), out, red, 0, true); err != nil {
			return err
		}
		done()
		return nil
	case red.commute:
		// The large board path splits the vector into shares; like
		// Rabenseifner's algorithm it is for commutative operations only.
		out, done := packOut(recv, false)
		if err := r.boardAllreduceStaged(b, op, packIn(in), out, red, es); err != nil {
			return err
		}
		done()
		return nil
	}
	if err := r.boardHeader(b, op, in.Size()); err != nil {
		return err
	}
	return msg()
}

// IallreduceBuf starts an Allreduce (MPI_Iallreduce).
func IallreduceBuf(c *Comm, send, recv Buffer, o *Op) (*Request, error) {
	return c.planStart(allreducePlan("MPI_Iallreduce", c, send, recv, o))
}

// Allreduce combines every process's send with o into every process's recv
// (MPI_Allreduce).
func Allreduce[T Numeric](c *Comm, send, recv []T, o *Op) error {
	if ok, err := allreduceSmall(c, send, recv, o); ok {
		return c.raise(err)
	}
	return AllreduceBuf(c, sbuf(send), Slice(recv), o)
}

// Iallreduce starts an Allreduce (MPI_Iallreduce).
func Iallreduce[T Numeric](c *Comm, send, recv []T, o *Op) (*Request, error) {
	return IallreduceBuf(c, sbuf(send), Slice(recv), o)
}

func reduceScatterPlan(op string, c *Comm, send, recv Buffer, counts []int, o *Op) (*plan, error) {
	if c.IsInter() {
		return interReduceScatterPlan(op, c, send, recv, counts, o)
	}
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	n, me := c.Size(), c.rank
	in, inplace, red, err := reduceArgs(op, send, recv, o, true)
	if err != nil {
		return nil, err
	}
	if counts == nil { // ReduceScatterBlock
		k := recv.Count
		if inplace {
			if recv.Count%n != 0 {
				return nil, errorf(ErrCount, op, "in place: receive count %d is not %d equal blocks", recv.Count, n)
			}
			k = recv.Count / n
		}
		counts = make([]int, n)
		for i := range counts {
			counts[i] = k
		}
	}
	if len(counts) != n {
		return nil, errorf(ErrCount, op, "%d counts for %d processes", len(counts), n)
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
	if !inplace && recv.Count != counts[me] {
		return nil, errorf(ErrCount, op, "receive buffer has %d elements, count says %d", recv.Count, counts[me])
	}
	es := in.Type.Size()
	p.run = func(e *coll) error {
		s := packIn(in)
		if red.commute {
			off := make([]int, n+1)
			for i, k := range counts {
				off[i+1] = off[i] + k*es
			}
			if inplace {
				s = append([]byte(nil), s...)
			}
			r, done := packOut(recv, inplace)
			if err := e.reduceScatterPairwise(s, off, r[:counts[me]*es], red); err != nil {
				return err
			}
			done()
			return nil
		}
		var full []byte
		if e.rank == 0 {
			full = make([]byte, len(s))
		}
		// A count mismatch in the reduction does not stop the scatter,
		// which the other ranks wait for; rank 0 then sends empty blocks
		// (exact receives: every rank sees a mismatch).
		if err := e.reduce(s, full, red, 0); err != nil {
			if c := ErrorClass(err); c != ErrTruncate && c != ErrCount {
				return err
			}
			e.mis = err
		}
		e.exact = true
		r, done := packOut(recv, inplace)
		mine := r[:counts[me]*es]
		if e.rank == 0 {
			off := 0
			var pending []*adi.Request
			for i, k := range counts {
				if i == 0 {
					copy(mine, full[off:off+k*es])
				} else if k > 0 {
					q, err := e.isend(i, full[off:off+k*es])
					if err != nil {
						return err
					}
					pending = append(pending, q)
				}
				off += k * es
			}
			if err := e.wait(pending...); err != nil {
				return err
			}
		} else if len(mine) > 0 {
			if err := e.recv(0, mine); err != nil {
				return err
			}
		}
		if e.mis != nil {
			return e.mis
		}
		done()
		return nil
	}
	return p, nil
}

// ReduceScatterBlockBuf reduces Size()·recv.Count elements of send with o
// and scatters the result: rank i gets block i (MPI_Reduce_scatter_block).
func ReduceScatterBlockBuf(c *Comm, send, recv Buffer, o *Op) error {
	return c.planNow(reduceScatterPlan("MPI_Reduce_scatter_block", c, send, recv, nil, o))
}

// IreduceScatterBlockBuf starts a ReduceScatterBlock (MPI_Ireduce_scatter_block).
func IreduceScatterBlockBuf(c *Comm, send, recv Buffer, o *Op) (*Request, error) {
	return c.planStart(reduceScatterPlan("MPI_Ireduce_scatter_block", c, send, recv, nil, o))
}

// ReduceScatterBlock reduces send (Size()·len(recv) elements) over every
// process with o and gives rank i elements [i·len(recv), (i+1)·len(recv))
// of the result (MPI_Reduce_scatter_block).
func ReduceScatterBlock[T Numeric](c *Comm, send, recv []T, o *Op) error {
	return ReduceScatterBlockBuf(c, sbuf(send), Slice(recv), o)
}

// IreduceScatterBlock starts a ReduceScatterBlock (MPI_Ireduce_scatter_block).
func IreduceScatterBlock[T Numeric](c *Comm, send, recv []T, o *Op) (*Request, error) {
	return IreduceScatterBlockBuf(c, sbuf(send), Slice(recv), o)
}

// ReduceScatterBuf reduces send (the sum of counts elements) with o and
// gives rank i the counts[i] elements after the first counts[0..i-1]
// (MPI_Reduce_scatter).
func ReduceScatterBuf(c *Comm, send, recv Buffer, counts []int, o *Op) error {
	if counts == nil {
		counts = []int{}
	}
	return c.planNow(reduceScatterPlan("MPI_Reduce_scatter", c, send, recv, counts, o))
}

// IreduceScatterBuf starts a ReduceScatter (MPI_Ireduce_scatter).
func IreduceScatterBuf(c *Comm, send, recv Buffer, counts []int, o *Op) (*Request, error) {
	if counts == nil {
		counts = []int{}
	}
	return c.planStart(reduceScatterPlan("MPI_Ireduce_scatter", c, send, recv, counts, o))
}

// ReduceScatter reduces send with o over every process and gives rank i its
// counts[i] elements of the result (MPI_Reduce_scatter).
func ReduceScatter[T Numeric](c *Comm, send, recv []T, counts []int, o *Op) error {
	return ReduceScatterBuf(c, sbuf(send), Slice(recv), counts, o)
}

// IreduceScatter starts a ReduceScatter (MPI_Ireduce_scatter).
func IreduceScatter[T Numeric](c *Comm, send, recv []T, counts []int, o *Op) (*Request, error) {
	return IreduceScatterBuf(c, sbuf(send), Slice(recv), counts, o)
}

func scanPlan(op string, c *Comm, send, recv Buffer, o *Op, exclusive bool) (*plan, error) {
	p, err := newPlan(op, c)
	if err != nil {
		return nil, err
	}
	in, inplace, red, err := reduceArgs(op, send, recv, o, true)
	if err != nil {
		return nil, err
	}
	if recv.Count != in.Count {
		return nil, errorf(ErrCount, op, "sends %d elements but receives %d", in.Count, recv.Count)
	}
	p.run = func(e *coll) error {
		s := packIn(in)
		if inplace {
			s = append([]byte(nil), s...)
		}
		r, done := packOut(recv, exclusive)
		if err := e.scan(s, r, red, exclusive); err != nil {
			return err
		}
		done()
		return nil
	}
	return p, nil
}

// ScanBuf computes the inclusive prefix reduction: rank i's recv gets
// send₀ o … o sendᵢ (MPI_Scan).
func ScanBuf(c *Comm, send, recv Buffer, o *Op) error {
	return c.planNow(scanPlan("MPI_Scan", c, send, recv, o, false))
}

// IscanBuf starts a Scan (MPI_Iscan).
func IscanBuf(c *Comm, send, recv Buffer, o *Op) (*Request, error) {
	return c.planStart(scanPlan("MPI_Iscan", c, send, recv, o, false))
}

// Scan computes the inclusive prefix reduction of send into recv (MPI_Scan).
func Scan[T Numeric](c *Comm, send, recv []T, o *Op) error {
	return ScanBuf(c, sbuf(send), Slice(recv), o)
}

// Iscan starts a Scan (MPI_Iscan).
func Iscan[T Numeric](c *Comm, send, recv []T, o *Op) (*Request, error) {
	return IscanBuf(c, sbuf(send), Slice(recv), o)
}

// ExscanBuf computes the exclusive prefix reduction: rank i > 0 gets
// send₀ o … o sendᵢ₋₁; rank 0's recv is left unchanged (MPI_Exscan).
func ExscanBuf(c *Comm, send, recv Buffer, o *Op) error {
	return c.planNow(scanPlan("MPI_Exscan", c, send, recv, o, true))
}

// IexscanBuf starts an Exscan (MPI_Iexscan).
func IexscanBuf(c *Comm, send, recv Buffer, o *Op) (*Request, error) {
	return c.planStart(scanPlan("MPI_Iexscan", c, send, recv, o, true))
}

// Exscan computes the exclusive prefix reduction of send into recv; rank 0's
// recv is left unchanged (MPI_Exscan).
func Exscan[T Numeric](c *Comm, send, recv []T, o *Op) error {
	return ExscanBuf(c, sbuf(send), Slice(recv), o)
}

// Iexscan starts an Exscan (MPI_Iexscan).
func Iexscan[T Numeric](c *Comm, send, recv []T, o *Op) (*Request, error) {
	return IexscanBuf(c, sbuf(send), Slice(recv), o)
}
