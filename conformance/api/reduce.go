package main

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// rec is a padded Go struct: 4 bytes of padding after A and 6 after C, so
// its datatype is not contiguous (14 data bytes in 24).
type rec struct {
	A int32
	B float64
	C int16
}

// poisonByte fills receive buffers, so that padding a reduction wrote (it
// must not) and results it did not write show.
const poisonByte = 0xAB

// padding are the byte ranges of a rec that hold no data.
var padding = [][2]int{{4, 8}, {18, 24}}

// input is element i of rank r's operand.
func input(r, i int) rec {
	return rec{A: int32(1 + (r+i)%2), B: float64(r*7 + i%5), C: int16(r*3 + i%11)}
}

func inputs(r, lo, n int) []rec {
	s := make([]rec, n)
	for i := range s {
		s[i] = input(r, lo+i)
	}
	return s
}

// sumMax is commutative: A and B add, C takes the maximum.
func sumMax(in, inout []rec) {
	for i := range inout {
		inout[i].A += in[i].A
		inout[i].B += in[i].B
		inout[i].C = max(in[i].C, inout[i].C)
	}
}

// affine is associative but not commutative: (A, B) is the map x ↦ A·x+B
// and the result applies in's map first, then inout's; C keeps in's (the
// lower rank's) value.
func affine(in, inout []rec) {
	for i := range inout {
		o := inout[i]
		inout[i] = rec{A: in[i].A * o.A, B: float64(o.A)*in[i].B + o.B, C: in[i].C}
	}
}

// fold is the sequential reduction of element i over ranks lo..hi in rank
// order.
func fold(combine func(in, inout []rec), lo, hi, i int) rec {
	acc := []rec{input(lo, i)}
	for r := lo + 1; r <= hi; r++ {
		next := []rec{input(r, i)}
		combine(acc, next)
		acc = next
	}
	return acc[0]
}

func recBytes(s []rec) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(rec{})))
}

func poisoned(n int) []rec {
	s := make([]rec, n)
	b := recBytes(s)
	for i := range b {
		b[i] = poisonByte
	}
	return s
}

// checkRecs compares got with want(lo+i) field by field, and checks that
// no padding byte was written.
func checkRecs(what string, got []rec, lo int, want func(i int) rec) error {
	b := recBytes(got)
	for i := range got {
		if w := want(lo + i); got[i].A != w.A || got[i].B != w.B || got[i].C != w.C {
			return fmt.Errorf("%s: element %d is %+v, want %+v", what, lo+i, got[i], w)
		}
		for _, p := range padding {
			for k := p[0]; k < p[1]; k++ {
				if v := b[i*24+k]; v != poisonByte {
					return fmt.Errorf("%s: padding byte %d of element %d was written (0x%02x)", what, k, lo+i, v)
				}
			}
		}
	}
	return nil
}

func recType() (*datatype.Type, error) {
	t, err := datatype.FromStruct(rec{})
	if err != nil {
		return nil, err
	}
	if t.Contiguous() || t.Size() != 14 || t.Extent() != 24 {
		return nil, fmt.Errorf("datatype of rec: contiguous %v, size %d, extent %d; want a padded type of 14 bytes in 24", t.Contiguous(), t.Size(), t.Extent())
	}
	return t, nil
}

// recBuf describes s as a buffer of t, with TypedSlice.
func recBuf(s []rec, t *datatype.Type) mpi.Buffer {
	b, err := mpi.TypedSlice(s, t)
	if err != nil {
		panic(err) // recType checked that t describes a rec
	}
	return b
}

// reductionSizes are the element counts each reduction runs with: a few
// (the board's small path on netvm), over 8 KiB packed (message algorithms
// and the staged board path) and over 64 KiB packed per rank's share (the
// staged board path's pieces, which must hold whole elements).
var reductionSizes = []int{5, 700, 20000}

func checkUserOpStruct(w *mpi.Comm) error {
	t, err := recType()
	if err != nil {
		return err
	}
	op, err := mpi.NewOpFor(t, sumMax, true)
	if err != nil {
		return err
	}
	defer op.Free()
	for _, n := range reductionSizes {
		if err := reductions(w, t, op, sumMax, n); err != nil {
			return fmt.Errorf("%d elements: %w", n, err)
		}
	}
	return nil
}

func checkUserOpNonCommute(w *mpi.Comm) error {
	t, err := recType()
	if err != nil {
		return err
	}
	op, err := mpi.NewOpFor(t, affine, false)
	if err != nil {
		return err
	}
	defer op.Free()
	for _, n := range reductionSizes {
		if err := reductions(w, t, op, affine, n); err != nil {
			return fmt.Errorf("%d elements: %w", n, err)
		}
	}
	return nil
}

// reductions runs every reducing collective, blocking, non-blocking and
// persistent, on n recs with op, whose sequential form is combine.
func reductions(w *mpi.Comm, t *datatype.Type, op *mpi.Op, combine func(in, inout []rec), n int) error {
	me, np := w.Rank(), w.Size()
	all := func(i int) rec { return fold(combine, 0, np-1, i) }
	send := inputs(me, 0, n)
	for _, root := range rootsOf(np) {
		recv := poisoned(n)
		if err := mpi.ReduceBuf(w, recBuf(send, t), recvIf(me == root, recv, t), op, root); err != nil {
			return err
		}
		if me == root {
			if err := checkRecs(fmt.Sprintf("Reduce to %d", root), recv, 0, all); err != nil {
				return err
			}
		}
		recv = poisoned(n)
		var err error
		if me == root {
			copy(recv, send)
			err = mpi.ReduceBuf(w, mpi.InPlaceBuf, recBuf(recv, t), op, root)
		} else {
			err = mpi.ReduceBuf(w, recBuf(send, t), mpi.Buffer{}, op, root)
		}
		if err != nil {
			return err
		}
		if me == root {
			if err := checkRecs(fmt.Sprintf("Reduce in place to %d", root), unpoisonedData(recv), 0, all); err != nil {
				return err
			}
		}
	}
	recv := poisoned(n)
	if err := mpi.AllreduceBuf(w, recBuf(send, t), recBuf(recv, t), op); err != nil {
		return err
	}
	if err := checkRecs("Allreduce", recv, 0, all); err != nil {
		return err
	}
	recv = poisoned(n)
	copy(recv, send)
	if err := mpi.AllreduceBuf(w, mpi.InPlaceBuf, recBuf(recv, t), op); err != nil {
		return err
	}
	if err := checkRecs("Allreduce in place", unpoisonedData(recv), 0, all); err != nil {
		return err
	}
	recv = poisoned(n)
	q, err := mpi.IallreduceBuf(w, recBuf(send, t), recBuf(recv, t), op)
	if err != nil {
		return err
	}
	if _, err := q.Wait(); err != nil {
		return err
	}
	if err := checkRecs("Iallreduce", recv, 0, all); err != nil {
		return err
	}
	recv = poisoned(n)
	if q, err = mpi.AllreduceInitBuf(w, recBuf(send, t), recBuf(recv, t), op); err != nil {
		return err
	}
	for run := range 2 {
		if err := q.Start(); err != nil {
			return err
		}
		if _, err := q.Wait(); err != nil {
			return err
		}
		if err := checkRecs(fmt.Sprintf("Allreduce_init run %d", run), recv, 0, all); err != nil {
			return err
		}
	}
	if err := nonBlocking(w, t, op, combine, n, send); err != nil {
		return err
	}
	if err := scans(w, t, op, combine, n, send); err != nil {
		return err
	}
	return reduceScatters(w, t, op, all, n)
}

// nonBlocking checks Ireduce, Reduce_init, Iexscan and Exscan_init, each
// persistent one run twice.
func nonBlocking(w *mpi.Comm, t *datatype.Type, op *mpi.Op, combine func(in, inout []rec), n int, send []rec) error {
	me, np := w.Rank(), w.Size()
	root := np - 1
	all := func(i int) rec { return fold(combine, 0, np-1, i) }
	before := func(i int) rec { return fold(combine, 0, me-1, i) }
	type run struct {
		name  string
		start func(recv mpi.Buffer) (*mpi.Request, error)
		runs  int
		want  func(int) rec // nil: the receive buffer stays as it was
	}
	var atRoot, exWant func(int) rec
	if me == root {
		atRoot = all
	}
	if me > 0 {
		exWant = before
	}
	var ri, ei *mpi.Request
	for _, r := range []run{
		{"Ireduce", func(recv mpi.Buffer) (*mpi.Request, error) {
			return mpi.IreduceBuf(w, recBuf(send, t), recv, op, root)
		}, 1, atRoot},
		{"Reduce_init", func(recv mpi.Buffer) (*mpi.Request, error) {
			if ri == nil {
				var err error
				if ri, err = mpi.ReduceInitBuf(w, recBuf(send, t), recv, op, root); err != nil {
					return nil, err
				}
			}
			return ri, ri.Start()
		}, 2, atRoot},
		{"Iexscan", func(recv mpi.Buffer) (*mpi.Request, error) {
			return mpi.IexscanBuf(w, recBuf(send, t), recv, op)
		}, 1, exWant},
		{"Exscan_init", func(recv mpi.Buffer) (*mpi.Request, error) {
			if ei == nil {
				var err error
				if ei, err = mpi.ExscanInitBuf(w, recBuf(send, t), recv, op); err != nil {
					return nil, err
				}
			}
			return ei, ei.Start()
		}, 2, exWant},
	} {
		// A persistent request keeps its buffer: poison it once.
		recv := poisoned(n)
		for k := range r.runs {
			q, err := r.start(recBuf(recv, t))
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			if _, err := q.Wait(); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			if r.want == nil {
				for i, v := range recBytes(recv) {
					if v != poisonByte {
						return fmt.Errorf("%s run %d: a receive buffer that gets nothing was written at byte %d", r.name, k, i)
					}
				}
				continue
			}
			if err := checkRecs(fmt.Sprintf("%s run %d", r.name, k), recv, 0, r.want); err != nil {
				return err
			}
		}
	}
	return nil
}

// scans checks Scan, Exscan and Iscan.
func scans(w *mpi.Comm, t *datatype.Type, op *mpi.Op, combine func(in, inout []rec), n int, send []rec) error {
	me := w.Rank()
	recv := poisoned(n)
	if err := mpi.ScanBuf(w, recBuf(send, t), recBuf(recv, t), op); err != nil {
		return err
	}
	prefix := func(i int) rec { return fold(combine, 0, me, i) }
	if err := checkRecs("Scan", recv, 0, prefix); err != nil {
		return err
	}
	recv = poisoned(n)
	q, err := mpi.IscanBuf(w, recBuf(send, t), recBuf(recv, t), op)
	if err != nil {
		return err
	}
	if _, err := q.Wait(); err != nil {
		return err
	}
	if err := checkRecs("Iscan", recv, 0, prefix); err != nil {
		return err
	}
	recv = poisoned(n)
	if err := mpi.ExscanBuf(w, recBuf(send, t), recBuf(recv, t), op); err != nil {
		return err
	}
	if me == 0 {
		for i, v := range recBytes(recv) {
			if v != poisonByte {
				return fmt.Errorf("Exscan: rank 0's receive buffer was written at byte %d", i)
			}
		}
		return nil
	}
	return checkRecs("Exscan", recv, 0, func(i int) rec { return fold(combine, 0, me-1, i) })
}

// reduceScatters checks ReduceScatterBlock (n per rank) and ReduceScatter
// (rank i gets n+i elements, rank 0 none).
func reduceScatters(w *mpi.Comm, t *datatype.Type, op *mpi.Op, all func(int) rec, n int) error {
	me, np := w.Rank(), w.Size()
	send := inputs(me, 0, n*np)
	recv := poisoned(n)
	if err := mpi.ReduceScatterBlockBuf(w, recBuf(send, t), recBuf(recv, t), op); err != nil {
		return err
	}
	if err := checkRecs("ReduceScatterBlock", recv, me*n, all); err != nil {
		return err
	}
	counts := make([]int, np)
	total, lo := 0, 0
	for i := range counts {
		if i > 0 {
			counts[i] = n + i
		}
		if i < me {
			lo += counts[i]
		}
		total += counts[i]
	}
	send = inputs(me, 0, total)
	recv = poisoned(counts[me])
	if err := mpi.ReduceScatterBuf(w, recBuf(send, t), recBuf(recv, t), counts, op); err != nil {
		return err
	}
	return checkRecs("ReduceScatter", recv, lo, all)
}

// unpoisonedData returns s after restoring the poison in its padding: an
// in-place buffer starts as the program's input, whose padding is zero.
func unpoisonedData(s []rec) []rec {
	b := recBytes(s)
	for i := range s {
		for _, p := range padding {
			for k := p[0]; k < p[1]; k++ {
				if b[i*24+k] != 0 && b[i*24+k] != poisonByte {
					return s // leave it: checkRecs reports it
				}
				b[i*24+k] = poisonByte
			}
		}
	}
	return s
}

func recvIf(ok bool, s []rec, t *datatype.Type) mpi.Buffer {
	if !ok {
		return mpi.Buffer{}
	}
	return recBuf(s, t)
}

func rootsOf(n int) []int {
	rs := []int{0}
	if n > 1 {
		rs = append(rs, n-1)
	}
	return rs
}

// checkPredefDerived runs predefined operations on derived datatypes of
// one basic type, which work element by element on that type, with
// receive buffers whose gaps must stay as they were; and checks the
// errors for types that mix basic types and for Minloc on an odd number
// of values.
func checkPredefDerived(w *mpi.Comm) error {
	me, np := w.Rank(), w.Size()
	for _, n := range []int{3, 2000} {
		vec, err := datatype.Vector(n, 1, 2, datatype.Int64)
		if err != nil {
			return err
		}
		if err := vec.Commit(); err != nil {
			return err
		}
		const gap = -7
		mk := func(r int) []int64 {
			s := make([]int64, 2*n)
			for i := range s {
				s[i] = gap
				if i%2 == 0 {
					s[i] = int64(r*100 + i/2)
				}
			}
			return s
		}
		sum := func(lo, hi, i int) int64 {
			var v int64
			for r := lo; r <= hi; r++ {
				v += int64(r*100 + i)
			}
			return v
		}
		check := func(what string, got []int64, hi int) error {
			for i, v := range got {
				want := int64(gap)
				if i%2 == 0 {
					want = sum(0, hi, i/2)
				}
				if v != want {
					return fmt.Errorf("%s of a vector of %d int64 (stride 2): int64 %d is %d, want %d", what, n, i, v, want)
				}
			}
			return nil
		}
		recv := slicesOf(2*n, gap)
		if err := mpi.AllreduceBuf(w, mpi.Typed(i64bytes(mk(me)), 1, vec), mpi.Typed(i64bytes(recv), 1, vec), mpi.Sum); err != nil {
			return err
		}
		if err := check("Allreduce(Sum)", recv, np-1); err != nil {
			return err
		}
		recv = mk(me)
		if err := mpi.AllreduceBuf(w, mpi.InPlaceBuf, mpi.Typed(i64bytes(recv), 1, vec), mpi.Sum); err != nil {
			return err
		}
		if err := check("Allreduce(Sum) in place", recv, np-1); err != nil {
			return err
		}
		recv = slicesOf(2*n, gap)
		if err := mpi.ReduceBuf(w, mpi.Typed(i64bytes(mk(me)), 1, vec), mpi.Typed(i64bytes(recv), 1, vec), mpi.Sum, np-1); err != nil {
			return err
		}
		if me == np-1 {
			if err := check("Reduce(Sum)", recv, np-1); err != nil {
				return err
			}
		}
		recv = slicesOf(2*n, gap)
		if err := mpi.ScanBuf(w, mpi.Typed(i64bytes(mk(me)), 1, vec), mpi.Typed(i64bytes(recv), 1, vec), mpi.Sum); err != nil {
			return err
		}
		if err := check("Scan(Sum)", recv, me); err != nil {
			return err
		}
		if err := vec.Free(); err != nil {
			return err
		}
	}
	if err := predefContig(w); err != nil {
		return err
	}
	return predefErrors(w)
}

// predefContig runs Max on a contiguous type of 4 float64 and Minloc on
// a contiguous type of two int64 (a value and an index).
func predefContig(w *mpi.Comm) error {
	me, np := w.Rank(), w.Size()
	four, err := datatype.Contiguous(4, datatype.Float64)
	if err != nil {
		return err
	}
	if err := four.Commit(); err != nil {
		return err
	}
	defer four.Free()
	val := func(r, i int) float64 { return float64((r*5 + i) % 7) }
	send, recv := make([]float64, 12), make([]float64, 12)
	for i := range send {
		send[i] = val(me, i)
	}
	if err := mpi.AllreduceBuf(w, mpi.Typed(f64bytes(send), 3, four), mpi.Typed(f64bytes(recv), 3, four), mpi.Max); err != nil {
		return err
	}
	for i, v := range recv {
		want := val(0, i)
		for r := 1; r < np; r++ {
			want = max(want, val(r, i))
		}
		if v != want {
			return fmt.Errorf("Allreduce(Max) of 3 × 4 float64: float64 %d is %v, want %v", i, v, want)
		}
	}
	pair, err := datatype.Contiguous(2, datatype.Int64)
	if err != nil {
		return err
	}
	if err := pair.Commit(); err != nil {
		return err
	}
	defer pair.Free()
	pv := func(r, i int) int64 { return int64((r*3 + i) % 4) }
	ps, pr := make([]int64, 6), make([]int64, 6)
	for i := range 3 {
		ps[2*i], ps[2*i+1] = pv(me, i), int64(me)
	}
	if err := mpi.AllreduceBuf(w, mpi.Typed(i64bytes(ps), 3, pair), mpi.Typed(i64bytes(pr), 3, pair), mpi.Minloc); err != nil {
		return err
	}
	for i := range 3 {
		wv, wi := pv(0, i), int64(0)
		for r := 1; r < np; r++ {
			if pv(r, i) < wv {
				wv, wi = pv(r, i), int64(r)
			}
		}
		if pr[2*i] != wv || pr[2*i+1] != wi {
			return fmt.Errorf("Allreduce(Minloc) of (int64, int64) pairs: pair %d is (%d, %d), want (%d, %d)", i, pr[2*i], pr[2*i+1], wv, wi)
		}
	}
	return pairMinloc(w)
}

// pairMinloc runs Maxloc on MPI_DOUBLE_INT pairs (float64, int32: 12 data
// bytes in 16) held in a Go struct.
func pairMinloc(w *mpi.Comm) error {
	me, np := w.Rank(), w.Size()
	type pair struct {
		V float64
		I int32
	}
	pv := func(r, i int) float64 { return float64((r*5 + i) % 3) }
	send, recv := make([]pair, 7), make([]pair, 7)
	for i := range send {
		send[i] = pair{pv(me, i), int32(me)}
	}
	sb, err := mpi.TypedSlice(send, datatype.Float64Int32)
	if err != nil {
		return err
	}
	rb, err := mpi.TypedSlice(recv, datatype.Float64Int32)
	if err != nil {
		return err
	}
	if err := mpi.AllreduceBuf(w, sb, rb, mpi.Maxloc); err != nil {
		return err
	}
	for i, got := range recv {
		want := pair{pv(0, i), 0}
		for r := 1; r < np; r++ {
			if pv(r, i) > want.V {
				want = pair{pv(r, i), int32(r)}
			}
		}
		if got != want {
			return fmt.Errorf("Allreduce(Maxloc) of MPI_DOUBLE_INT: pair %d is %+v, want %+v", i, got, want)
		}
	}
	return nil
}

// predefErrors checks that a predefined operation on a type mixing basic
// types, and Minloc on an odd number of values, are refused on every rank.
func predefErrors(w *mpi.Comm) error {
	t, err := recType()
	if err != nil {
		return err
	}
	s, r := inputs(0, 0, 2), poisoned(2)
	err = mpi.AllreduceBuf(w, recBuf(s, t), recBuf(r, t), mpi.Sum)
	if !errors.Is(err, mpi.ErrOp) {
		return fmt.Errorf("Allreduce(Sum) of a struct of int32, float64 and int16: error %v, want ErrOp", err)
	}
	three, err := datatype.Contiguous(3, datatype.Int64)
	if err != nil {
		return err
	}
	if err := three.Commit(); err != nil {
		return err
	}
	defer three.Free()
	a, b := make([]int64, 3), make([]int64, 3)
	err = mpi.AllreduceBuf(w, mpi.Typed(i64bytes(a), 1, three), mpi.Typed(i64bytes(b), 1, three), mpi.Minloc)
	if !errors.Is(err, mpi.ErrCount) {
		return fmt.Errorf("Allreduce(Minloc) of 3 int64: error %v, want ErrCount", err)
	}
	return nil
}

// checkUserOpLarge runs a user operation on a contiguous 24-byte type over
// more than 64 KiB a rank: netvm's staged board Allreduce folds its shares in
// pieces, which must hold whole elements (65536 is not a multiple of 24).
func checkUserOpLarge(w *mpi.Comm) error {
	me, np := w.Rank(), w.Size()
	t, err := datatype.Contiguous(3, datatype.Float64)
	if err != nil {
		return err
	}
	if err := t.Commit(); err != nil {
		return err
	}
	defer t.Free()
	// x[0] adds, x[1] takes the maximum, x[2] counts: an operation that
	// is wrong when an element is cut between two pieces.
	op, err := mpi.NewOpFor(t, func(in, inout [][3]float64) {
		for i := range inout {
			inout[i][0] += in[i][0]
			inout[i][1] = max(inout[i][1], in[i][1])
			inout[i][2] += in[i][2]
		}
	}, true)
	if err != nil {
		return err
	}
	defer op.Free()
	const n = 20000
	v := func(r, i int) [3]float64 { return [3]float64{float64(r + i), float64((r*7 + i) % 13), 1} }
	send, recv := make([][3]float64, n), make([][3]float64, n)
	for i := range send {
		send[i] = v(me, i)
	}
	sb, err := mpi.TypedSlice(send, t)
	if err != nil {
		return err
	}
	rb, err := mpi.TypedSlice(recv, t)
	if err != nil {
		return err
	}
	if err := mpi.AllreduceBuf(w, sb, rb, op); err != nil {
		return err
	}
	for i, got := range recv {
		want := v(0, i)
		for r := 1; r < np; r++ {
			x := v(r, i)
			want = [3]float64{want[0] + x[0], max(want[1], x[1]), want[2] + x[2]}
		}
		if got != want {
			return fmt.Errorf("Allreduce of %d × [3]float64: element %d is %v, want %v", n, i, got, want)
		}
	}
	return nil
}

func slicesOf(n int, v int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func i64bytes(s []int64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 8*len(s))
}

func f64bytes(s []float64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 8*len(s))
}

// checkIntercommStruct runs Allreduce and Reduce with the non-commutative
// struct operation on an intercommunicator between the even and the odd
// ranks: each side gets the other side's inputs folded in its rank order.
func checkIntercommStruct(w *mpi.Comm) error {
	me, np := w.Rank(), w.Size()
	t, err := recType()
	if err != nil {
		return err
	}
	op, err := mpi.NewOpFor(t, affine, false)
	if err != nil {
		return err
	}
	defer op.Free()
	half, err := w.Split(me%2, me)
	if err != nil {
		return err
	}
	defer half.Free()
	inter, err := mpi.IntercommCreate(half, 0, w, 1-me%2, 90)
	if err != nil {
		return err
	}
	defer inter.Free()
	var other []int // the other side's world ranks, in their rank order
	for r := 1 - me%2; r < np; r += 2 {
		other = append(other, r)
	}
	foldOther := func(i int) rec {
		acc := []rec{input(other[0], i)}
		for _, r := range other[1:] {
			next := []rec{input(r, i)}
			affine(acc, next)
			acc = next
		}
		return acc[0]
	}
	const n = 300
	send, recv := inputs(me, 0, n), poisoned(n)
	if err := mpi.AllreduceBuf(inter, recBuf(send, t), recBuf(recv, t), op); err != nil {
		return err
	}
	if err := checkRecs("intercommunicator Allreduce", recv, 0, foldOther); err != nil {
		return err
	}
	// Reduce to rank 0 of the even side: it passes Root, the other even
	// ranks ProcNull, the odd ranks send to remote rank 0.
	root := 0
	switch {
	case me == 0:
		root = mpi.Root
	case me%2 == 0:
		root = mpi.ProcNull
	}
	recv = poisoned(n)
	if err := mpi.ReduceBuf(inter, recBuf(send, t), recBuf(recv, t), op, root); err != nil {
		return err
	}
	if me == 0 {
		return checkRecs("intercommunicator Reduce", recv, 0, foldOther)
	}
	return nil
}
