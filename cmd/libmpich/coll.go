//go:build cgo

package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// mode is which form of a collective a C call is.
type mode int

const (
	blocking    mode = iota // MPI_Bcast
	nonblocking             // MPI_Ibcast
	persistent              // MPI_Bcast_init
)

// name is the MPI name of collective base in form m.
func (m mode) name(base string) string {
	switch m {
	case nonblocking:
		return "MPI_I" + string(base[0]+'a'-'A') + base[1:]
	case persistent:
		return "MPI_" + base + "_init"
	}
	return "MPI_" + base
}

// pick runs the form m of a collective: now, or as a request stored in req.
func pick(m mode, req *C.int, c *mpi.Comm, now func() error, start, init func() (*mpi.Request, error)) error {
	var f func() (*mpi.Request, error)
	switch m {
	case blocking:
		return now()
	case nonblocking:
		f = start
	default:
		f = init
	}
	r, err := f()
	if err != nil {
		return err
	}
	*req = C.int(requests.add(reqEntry{r: r, persistent: m == persistent}))
	return nil
}

// ints is the C int array at p of n elements as Go ints (nil when p is).
func ints(p *C.int, n int) []int {
	if p == nil || n <= 0 {
		return nil
	}
	out := make([]int, n)
	for i, v := range unsafe.Slice(p, n) {
		out[i] = int(v)
	}
	return out
}

// peers is the number of processes a rooted or all-to-all collective's
// per-process arrays cover: the remote group's on an intercommunicator.
func peers(c *mpi.Comm) int {
	if c.IsInter() {
		return c.RemoteSize()
	}
	return c.Size()
}

// atRoot reports whether this process receives (gather) or sends
// (scatter) the root's data; sends reports whether it contributes its own.
func atRoot(c *mpi.Comm, root int) (isRoot, sends bool) {
	if c.IsInter() {
		return root == mpi.Root, root != mpi.Root && root != mpi.ProcNull
	}
	return c.Rank() == root, true
}

// extentOf is the number of elements a vector collective's buffer spans.
func extentOf(counts, displs []int) int {
	n := 0
	for i := range counts {
		if i < len(displs) {
			n = max(n, displs[i]+counts[i])
		}
	}
	return n
}

func barrier(m mode, req *C.int, c *mpi.Comm) error {
	return pick(m, req, c, func() error { return mpi.Barrier(c) },
		func() (*mpi.Request, error) { return mpi.Ibarrier(c) },
		func() (*mpi.Request, error) { return mpi.BarrierInit(c) })
}

func bcast(m mode, req *C.int, p unsafe.Pointer, count int, t *datatype.Type, root int, c *mpi.Comm) error {
	b, err := buf(m.name("Bcast"), p, count, t)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.BcastBuf(c, b, root) },
		func() (*mpi.Request, error) { return mpi.IbcastBuf(c, b, root) },
		func() (*mpi.Request, error) { return mpi.BcastInitBuf(c, b, root) })
}

func gather(m mode, req *C.int, sp unsafe.Pointer, scount int, st int32, rp unsafe.Pointer, rcount int, rt int32, root int, c *mpi.Comm) error {
	fn := m.name("Gather")
	isRoot, sends := atRoot(c, root)
	sb, err := optBuf(fn, sp, scount, st, sends)
	if err != nil {
		return err
	}
	rb, err := optBuf(fn, rp, rcount*peers(c), rt, isRoot)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.GatherBuf(c, sb, rb, root) },
		func() (*mpi.Request, error) { return mpi.IgatherBuf(c, sb, rb, root) },
		func() (*mpi.Request, error) { return mpi.GatherInitBuf(c, sb, rb, root) })
}

func gatherv(m mode, req *C.int, sp unsafe.Pointer, scount int, st int32, rp unsafe.Pointer, rcounts, displs *C.int, rt int32, root int, c *mpi.Comm) error {
	fn := m.name("Gatherv")
	isRoot, sends := atRoot(c, root)
	sb, err := optBuf(fn, sp, scount, st, sends)
	if err != nil {
		return err
	}
	var cs, ds []int
	if isRoot {
		cs, ds = ints(rcounts, peers(c)), ints(displs, peers(c))
	}
	rb, err := optBuf(fn, rp, extentOf(cs, ds), rt, isRoot)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.GathervBuf(c, sb, rb, cs, ds, root) },
		func() (*mpi.Request, error) { return mpi.IgathervBuf(c, sb, rb, cs, ds, root) },
		func() (*mpi.Request, error) { return mpi.GathervInitBuf(c, sb, rb, cs, ds, root) })
}

func scatter(m mode, req *C.int, sp unsafe.Pointer, scount int, st int32, rp unsafe.Pointer, rcount int, rt int32, root int, c *mpi.Comm) error {
	fn := m.name("Scatter")
	isRoot, recvs := atRoot(c, root)
	sb, err := optBuf(fn, sp, scount*peers(c), st, isRoot)
	if err != nil {
		return err
	}
	rb, err := optBuf(fn, rp, rcount, rt, recvs)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.ScatterBuf(c, sb, rb, root) },
		func() (*mpi.Request, error) { return mpi.IscatterBuf(c, sb, rb, root) },
		func() (*mpi.Request, error) { return mpi.ScatterInitBuf(c, sb, rb, root) })
}

func scatterv(m mode, req *C.int, sp unsafe.Pointer, scounts, displs *C.int, st int32, rp unsafe.Pointer, rcount int, rt int32, root int, c *mpi.Comm) error {
	fn := m.name("Scatterv")
	isRoot, recvs := atRoot(c, root)
	var cs, ds []int
	if isRoot {
		cs, ds = ints(scounts, peers(c)), ints(displs, peers(c))
	}
	sb, err := optBuf(fn, sp, extentOf(cs, ds), st, isRoot)
	if err != nil {
		return err
	}
	rb, err := optBuf(fn, rp, rcount, rt, recvs)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.ScattervBuf(c, sb, cs, ds, rb, root) },
		func() (*mpi.Request, error) { return mpi.IscattervBuf(c, sb, cs, ds, rb, root) },
		func() (*mpi.Request, error) { return mpi.ScattervInitBuf(c, sb, cs, ds, rb, root) })
}

func allgather(m mode, req *C.int, sp unsafe.Pointer, scount int, st int32, rp unsafe.Pointer, rcount int, rt int32, c *mpi.Comm) error {
	fn := m.name("Allgather")
	sb, err := sendBuf(fn, sp, scount, st)
	if err != nil {
		return err
	}
	rb, err := sendBuf(fn, rp, rcount*peers(c), rt)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.AllgatherBuf(c, sb, rb) },
		func() (*mpi.Request, error) { return mpi.IallgatherBuf(c, sb, rb) },
		func() (*mpi.Request, error) { return mpi.AllgatherInitBuf(c, sb, rb) })
}

func allgatherv(m mode, req *C.int, sp unsafe.Pointer, scount int, st int32, rp unsafe.Pointer, rcounts, displs *C.int, rt int32, c *mpi.Comm) error {
	fn := m.name("Allgatherv")
	sb, err := sendBuf(fn, sp, scount, st)
	if err != nil {
		return err
	}
	cs, ds := ints(rcounts, peers(c)), ints(displs, peers(c))
	rb, err := sendBuf(fn, rp, extentOf(cs, ds), rt)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.AllgathervBuf(c, sb, rb, cs, ds) },
		func() (*mpi.Request, error) { return mpi.IallgathervBuf(c, sb, rb, cs, ds) },
		func() (*mpi.Request, error) { return mpi.AllgathervInitBuf(c, sb, rb, cs, ds) })
}

func alltoall(m mode, req *C.int, sp unsafe.Pointer, scount int, st int32, rp unsafe.Pointer, rcount int, rt int32, c *mpi.Comm) error {
	fn := m.name("Alltoall")
	sb, err := sendBuf(fn, sp, scount*peers(c), st)
	if err != nil {
		return err
	}
	rb, err := sendBuf(fn, rp, rcount*peers(c), rt)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.AlltoallBuf(c, sb, rb) },
		func() (*mpi.Request, error) { return mpi.IalltoallBuf(c, sb, rb) },
		func() (*mpi.Request, error) { return mpi.AlltoallInitBuf(c, sb, rb) })
}

func alltoallv(m mode, req *C.int, sp unsafe.Pointer, scounts, sdispls *C.int, st int32, rp unsafe.Pointer, rcounts, rdispls *C.int, rt int32, c *mpi.Comm) error {
	fn := m.name("Alltoallv")
	n := peers(c)
	var scs, sds []int
	if sp != inPlace {
		scs, sds = ints(scounts, n), ints(sdispls, n)
	}
	sb, err := sendBuf(fn, sp, extentOf(scs, sds), st)
	if err != nil {
		return err
	}
	rcs, rds := ints(rcounts, n), ints(rdispls, n)
	rb, err := sendBuf(fn, rp, extentOf(rcs, rds), rt)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.AlltoallvBuf(c, sb, scs, sds, rb, rcs, rds) },
		func() (*mpi.Request, error) { return mpi.IalltoallvBuf(c, sb, scs, sds, rb, rcs, rds) },
		func() (*mpi.Request, error) { return mpi.AlltoallvInitBuf(c, sb, scs, sds, rb, rcs, rds) })
}

// typeArray decodes n datatype handles.
func typeArray(fn string, p *C.int, n int) ([]*datatype.Type, error) {
	out := make([]*datatype.Type, n)
	for i, h := range reqArray(p, n) {
		t, err := typeOf(fn, int32(h))
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// byteSpan is the memory an Alltoallw side touches: every block's bytes
// from the buffer's start.
func byteSpan(counts, displs []int, ts []*datatype.Type) int {
	n := 0
	for i := range counts {
		if counts[i] > 0 {
			n = max(n, displs[i]+ts[i].Span(counts[i])+min(0, ts[i].TrueLB()))
		}
	}
	return n
}

func alltoallw(m mode, req *C.int, sp unsafe.Pointer, scounts, sdispls, stypes *C.int, rp unsafe.Pointer, rcounts, rdispls, rtypes *C.int, c *mpi.Comm) error {
	fn := m.name("Alltoallw")
	n := peers(c)
	sts, err := typeArray(fn, stypes, n)
	if err != nil {
		return err
	}
	rts, err := typeArray(fn, rtypes, n)
	if err != nil {
		return err
	}
	scs, sds, rcs, rds := ints(scounts, n), ints(sdispls, n), ints(rcounts, n), ints(rdispls, n)
	var sb, rb []byte
	if k := byteSpan(scs, sds, sts); k > 0 && sp != nil {
		sb = unsafe.Slice((*byte)(sp), k)
	}
	if k := byteSpan(rcs, rds, rts); k > 0 && rp != nil {
		rb = unsafe.Slice((*byte)(rp), k)
	}
	return pick(m, req, c, func() error { return mpi.Alltoallw(c, sb, scs, sds, sts, rb, rcs, rds, rts) },
		func() (*mpi.Request, error) { return mpi.Ialltoallw(c, sb, scs, sds, sts, rb, rcs, rds, rts) }, nil)
}

func reduce(m mode, req *C.int, sp, rp unsafe.Pointer, count int, t *datatype.Type, o *mpi.Op, root int, c *mpi.Comm) error {
	fn := m.name("Reduce")
	isRoot, sends := atRoot(c, root)
	sb, rb := mpi.Typed(nil, 0, t), mpi.Typed(nil, 0, t)
	var err error
	if sends {
		if sb, err = inBuf(fn, sp, count, t); err != nil {
			return err
		}
	}
	if isRoot {
		if rb, err = buf(fn, rp, count, t); err != nil {
			return err
		}
	}
	return pick(m, req, c, func() error { return mpi.ReduceBuf(c, sb, rb, o, root) },
		func() (*mpi.Request, error) { return mpi.IreduceBuf(c, sb, rb, o, root) },
		func() (*mpi.Request, error) { return mpi.ReduceInitBuf(c, sb, rb, o, root) })
}

// reduceBufs are the send and receive buffers of the reductions every
// process takes part in alike.
func reduceBufs(fn string, sp, rp unsafe.Pointer, scount, rcount int, t *datatype.Type) (sb, rb mpi.Buffer, err error) {
	if sb, err = inBuf(fn, sp, scount, t); err != nil {
		return
	}
	rb, err = buf(fn, rp, rcount, t)
	return
}

func allreduce(m mode, req *C.int, sp, rp unsafe.Pointer, count int, t *datatype.Type, o *mpi.Op, c *mpi.Comm) error {
	sb, rb, err := reduceBufs(m.name("Allreduce"), sp, rp, count, count, t)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.AllreduceBuf(c, sb, rb, o) },
		func() (*mpi.Request, error) { return mpi.IallreduceBuf(c, sb, rb, o) },
		func() (*mpi.Request, error) { return mpi.AllreduceInitBuf(c, sb, rb, o) })
}

func scan(m mode, req *C.int, sp, rp unsafe.Pointer, count int, t *datatype.Type, o *mpi.Op, c *mpi.Comm) error {
	sb, rb, err := reduceBufs(m.name("Scan"), sp, rp, count, count, t)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.ScanBuf(c, sb, rb, o) },
		func() (*mpi.Request, error) { return mpi.IscanBuf(c, sb, rb, o) },
		func() (*mpi.Request, error) { return mpi.ScanInitBuf(c, sb, rb, o) })
}

func exscan(m mode, req *C.int, sp, rp unsafe.Pointer, count int, t *datatype.Type, o *mpi.Op, c *mpi.Comm) error {
	sb, rb, err := reduceBufs(m.name("Exscan"), sp, rp, count, count, t)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.ExscanBuf(c, sb, rb, o) },
		func() (*mpi.Request, error) { return mpi.IexscanBuf(c, sb, rb, o) },
		func() (*mpi.Request, error) { return mpi.ExscanInitBuf(c, sb, rb, o) })
}

func reduceScatterBlock(m mode, req *C.int, sp, rp unsafe.Pointer, count int, t *datatype.Type, o *mpi.Op, c *mpi.Comm) error {
	sb, rb, err := reduceBufs(m.name("Reduce_scatter_block"), sp, rp, count*c.Size(), count, t)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.ReduceScatterBlockBuf(c, sb, rb, o) },
		func() (*mpi.Request, error) { return mpi.IreduceScatterBlockBuf(c, sb, rb, o) },
		func() (*mpi.Request, error) { return mpi.ReduceScatterBlockInitBuf(c, sb, rb, o) })
}

func reduceScatter(m mode, req *C.int, sp, rp unsafe.Pointer, counts *C.int, t *datatype.Type, o *mpi.Op, c *mpi.Comm) error {
	cs := ints(counts, c.Size())
	total := 0
	for _, n := range cs {
		total += n
	}
	mine := 0
	if r := c.Rank(); r >= 0 && r < len(cs) {
		mine = cs[r]
	}
	sb, rb, err := reduceBufs(m.name("Reduce_scatter"), sp, rp, total, mine, t)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.ReduceScatterBuf(c, sb, rb, cs, o) },
		func() (*mpi.Request, error) { return mpi.IreduceScatterBuf(c, sb, rb, cs, o) },
		func() (*mpi.Request, error) { return mpi.ReduceScatterInitBuf(c, sb, rb, cs, o) })
}

func xReduce_local(in, inout unsafe.Pointer, count int, t *datatype.Type, o *mpi.Op) error {
	a, err := buf("MPI_Reduce_local", in, count, t)
	if err != nil {
		return err
	}
	b, err := buf("MPI_Reduce_local", inout, count, t)
	if err != nil {
		return err
	}
	return mpi.ReduceLocalBuf(a, b, o)
}

func neighborAllgather(m mode, req *C.int, sp unsafe.Pointer, scount int, st int32, rp unsafe.Pointer, rcount int, rt int32, c *mpi.Comm) error {
	fn := m.name("Neighbor_allgather")
	src, _, err := neighbours(c)
	if err != nil {
		return err
	}
	sb, err := sendBuf(fn, sp, scount, st)
	if err != nil {
		return err
	}
	rb, err := sendBuf(fn, rp, rcount*src, rt)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.NeighborAllgatherBuf(c, sb, rb) },
		func() (*mpi.Request, error) { return mpi.IneighborAllgatherBuf(c, sb, rb) }, nil)
}

func neighborAlltoall(m mode, req *C.int, sp unsafe.Pointer, scount int, st int32, rp unsafe.Pointer, rcount int, rt int32, c *mpi.Comm) error {
	fn := m.name("Neighbor_alltoall")
	src, dst, err := neighbours(c)
	if err != nil {
		return err
	}
	sb, err := sendBuf(fn, sp, scount*dst, st)
	if err != nil {
		return err
	}
	rb, err := sendBuf(fn, rp, rcount*src, rt)
	if err != nil {
		return err
	}
	return pick(m, req, c, func() error { return mpi.NeighborAlltoallBuf(c, sb, rb) },
		func() (*mpi.Request, error) { return mpi.IneighborAlltoallBuf(c, sb, rb) }, nil)
}
