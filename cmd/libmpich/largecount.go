//go:build cgo

package main

/*
#include <stdint.h>
#include "callbacks.h"
*/
import "C"

import (
	"math"
	"sync"
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// The large-count (MPI_Count) forms of the datatype constructors, packing,
// buffer attachment, user operations and shared-window queries whose
// translation differs from the int form's by more than its signature (the
// others are the int form's translation under spec.txt's "=x<Name>"), and
// datatype decoding, whose answer depends on which form made the type.
// MPI_Count is a C long, as wide as Go's int, so a count reaches package
// datatype whole; a count whose bytes or span do not fit an int fails
// with MPI_ERR_COUNT.

// checkCount fails fn with MPI_ERR_COUNT for a negative count, or one
// whose elements of t do not fit in memory (count times t's size or
// extent beyond an int).
func checkCount(fn string, count int, t *datatype.Type) error {
	if count < 0 {
		return newErr(mpi.ErrCount, fn, "count %d is negative", count)
	}
	if t != nil && (datatype.PackSize(count, t) < 0 || t.Span(count) == math.MaxInt) {
		return newErr(mpi.ErrCount, fn, "%d elements of %s span more bytes than an int holds", count, t)
	}
	return nil
}

// largeTypes holds the types a large-count constructor made (as keys):
// MPI-4 decodes them with their counts and displacements as MPI_Counts,
// which only MPI_Type_get_envelope_c and MPI_Type_get_contents_c return.
var largeTypes sync.Map

// putLargeType is putType for a large-count constructor.
func putLargeType(t *datatype.Type, err error, out *C.int) error {
	if err := putType(t, err, out); err != nil {
		return err
	}
	largeTypes.Store(t, true)
	return nil
}

func xType_contiguous_c(count int, old *datatype.Type, out *C.int) error {
	t, err := datatype.Contiguous(count, old)
	return putLargeType(t, err, out)
}

func xType_vector_c(count, blocklen, stride int, old *datatype.Type, out *C.int) error {
	t, err := datatype.Vector(count, blocklen, stride, old)
	return putLargeType(t, err, out)
}

func xType_create_hvector_c(count, blocklen, stride int, old *datatype.Type, out *C.int) error {
	t, err := datatype.Hvector(count, blocklen, stride, old)
	return putLargeType(t, err, out)
}

func xType_create_resized_c(old *datatype.Type, lb, extent int, out *C.int) error {
	t, err := datatype.Resized(old, lb, extent)
	return putLargeType(t, err, out)
}

func xType_indexed_c(count int, blocklens, displs *C.long, old *datatype.Type, out *C.int) error {
	if err := checkArrayCount("MPI_Type_indexed_c", count); err != nil {
		return err
	}
	t, err := datatype.Indexed(aints(blocklens, count), aints(displs, count), old)
	return putLargeType(t, err, out)
}

func xType_create_hindexed_c(count int, blocklens, displs *C.long, old *datatype.Type, out *C.int) error {
	if err := checkArrayCount("MPI_Type_create_hindexed_c", count); err != nil {
		return err
	}
	t, err := datatype.Hindexed(aints(blocklens, count), aints(displs, count), old)
	return putLargeType(t, err, out)
}

func xType_create_indexed_block_c(count, blocklen int, displs *C.long, old *datatype.Type, out *C.int) error {
	if err := checkArrayCount("MPI_Type_create_indexed_block_c", count); err != nil {
		return err
	}
	t, err := datatype.IndexedBlock(blocklen, aints(displs, count), old)
	return putLargeType(t, err, out)
}

func xType_create_hindexed_block_c(count, blocklen int, displs *C.long, old *datatype.Type, out *C.int) error {
	if err := checkArrayCount("MPI_Type_create_hindexed_block_c", count); err != nil {
		return err
	}
	t, err := datatype.HindexedBlock(blocklen, aints(displs, count), old)
	return putLargeType(t, err, out)
}

func xType_create_struct_c(count int, blocklens, displs *C.long, ts *C.int, out *C.int) error {
	const fn = "MPI_Type_create_struct_c"
	if err := checkArrayCount(fn, count); err != nil {
		return err
	}
	types, err := typeArray(fn, ts, count)
	if err != nil {
		return err
	}
	t, err := datatype.Struct(aints(blocklens, count), aints(displs, count), types)
	return putLargeType(t, err, out)
}

func xType_create_subarray_c(ndims int, sizes, subsizes, starts *C.long, order int, old *datatype.Type, out *C.int) error {
	if err := checkArrayCount("MPI_Type_create_subarray_c", ndims); err != nil {
		return err
	}
	t, err := subarray(aints(sizes, ndims), aints(subsizes, ndims), aints(starts, ndims), order, old)
	return putLargeType(t, err, out)
}

func xType_create_darray_c(size, rank, ndims int, gsizes *C.long, distribs, dargs, psizes *C.int, order int, old *datatype.Type, out *C.int) error {
	if err := checkArrayCount("MPI_Type_create_darray_c", ndims); err != nil {
		return err
	}
	t, err := darray(size, rank, ndims, aints(gsizes, ndims), distribs, dargs, psizes, order, old)
	return putLargeType(t, err, out)
}

func xPack_c(in unsafe.Pointer, count int, t *datatype.Type, out unsafe.Pointer, outsize int, pos *C.long, c *mpi.Comm) error {
	const fn = "MPI_Pack_c"
	if err := checkCount(fn, count, t); err != nil {
		return err
	}
	n, err := pack(fn, in, count, t, out, outsize, int(*pos))
	*pos = C.long(n)
	return err
}

func xUnpack_c(in unsafe.Pointer, insize int, pos *C.long, out unsafe.Pointer, count int, t *datatype.Type, c *mpi.Comm) error {
	const fn = "MPI_Unpack_c"
	if err := checkCount(fn, count, t); err != nil {
		return err
	}
	n, err := unpack(fn, in, insize, int(*pos), out, count, t)
	*pos = C.long(n)
	return err
}

func xPack_size_c(count int, t *datatype.Type, c *mpi.Comm, size *C.long) error {
	if err := checkCount("MPI_Pack_size_c", count, t); err != nil {
		return err
	}
	*size = C.long(datatype.PackSize(count, t))
	return nil
}

func xBuffer_detach_c(addr *uintptr, size *C.long) error {
	var n C.int
	err := xBuffer_detach(addr, &n)
	*size = C.long(n)
	return err
}

// xOp_create_c registers a user function of MPI_User_function_c's
// signature: the count it is passed is an MPI_Count.
func xOp_create_c(f unsafe.Pointer, commute int, out *C.int) error {
	if f == nil {
		return newErr(mpi.ErrOp, "MPI_Op_create_c", "user function is NULL")
	}
	o := mpi.NewOp(func(in, inout mpi.Buffer) {
		if in.Count == 0 {
			return
		}
		n, dt := C.long(in.Count), C.int(typeHandle(in.Type))
		org := in.Type.Origin()
		C.call_user_fn_c(f, unsafe.Pointer(&in.Mem[org]), unsafe.Pointer(&inout.Mem[org]), &n, &dt)
	}, commute != 0)
	*out = C.int(ops.add(o))
	return nil
}

func xWin_shared_query_c(e *winEntry, rank int, size, dispUnit *C.long, baseptr unsafe.Pointer) error {
	var du C.int
	err := xWin_shared_query(e, rank, size, &du, baseptr)
	*dispUnit = C.long(du)
	return err
}

// decoded is what MPI_Type_get_envelope and MPI_Type_get_contents return
// for a type: the arguments of the constructor that made it, with MPI's
// constants. For a type of a large-count constructor the counts and
// displacements are in counts (MPI-4's large-count table: every count,
// displacement, stride, lb and extent; a subarray keeps ndims and order in
// ints, a darray all but its global sizes), for any other in ints and
// addrs.
type decoded struct {
	ints, addrs, counts []int
	types               []*datatype.Type
	combiner            C.int
	large               bool
}

func decode(t *datatype.Type) decoded {
	e := t.GetEnvelope()
	d := decoded{combiner: combinerCode[e.Combiner]}
	is, as, ts, err := t.GetContents()
	if err != nil { // a predefined type: no arguments
		return d
	}
	is = mpiConstants(e.Combiner, is)
	d.types = ts
	if _, ok := largeTypes.Load(t); !ok {
		d.ints, d.addrs = is, as
		return d
	}
	d.large = true
	switch e.Combiner {
	case datatype.CombinerSubarray: // ndims, sizes, subsizes, starts, order
		n := is[0]
		d.ints, d.counts = []int{n, is[len(is)-1]}, is[1:1+3*n]
	case datatype.CombinerDarray: // size, rank, ndims, gsizes, distribs, dargs, psizes, order
		n := is[2]
		d.ints, d.counts = append(is[:3:3], is[3+n:]...), is[3:3+n]
	default:
		d.counts = append(is, as...)
	}
	return d
}

// smallOnly fails the int decoding call fn for a type of a large-count
// constructor, as MPICH does: its counts need the _c form.
func smallOnly(fn string, d decoded) error {
	if d.large {
		return newErr(mpi.ErrType, fn, "the type was made by a large-count constructor: its contents need %s_c", fn)
	}
	return nil
}

func xType_get_envelope(t *datatype.Type, nints, naddrs, ntypes, combiner *C.int) error {
	d := decode(t)
	if err := smallOnly("MPI_Type_get_envelope", d); err != nil {
		return err
	}
	*nints, *naddrs, *ntypes, *combiner = C.int(len(d.ints)), C.int(len(d.addrs)), C.int(len(d.types)), d.combiner
	return nil
}

func xType_get_envelope_c(t *datatype.Type, nints, naddrs, ncounts, ntypes *C.long, combiner *C.int) error {
	d := decode(t)
	*nints, *naddrs, *ncounts, *ntypes, *combiner = C.long(len(d.ints)), C.long(len(d.addrs)), C.long(len(d.counts)), C.long(len(d.types)), d.combiner
	return nil
}

func xType_get_contents(t *datatype.Type, maxints, maxaddrs, maxtypes int, ints_ *C.int, addrs *C.long, types_ *C.int) error {
	const fn = "MPI_Type_get_contents"
	d, err := contents(fn, t, maxints, maxaddrs, 0, maxtypes)
	if err != nil {
		return err
	}
	putContents(d, ints_, addrs, nil, types_)
	return nil
}

func xType_get_contents_c(t *datatype.Type, maxints, maxaddrs, maxcounts, maxtypes int, ints_ *C.int, addrs, counts *C.long, types_ *C.int) error {
	d, err := contents("MPI_Type_get_contents_c", t, maxints, maxaddrs, maxcounts, maxtypes)
	if err != nil {
		return err
	}
	putContents(d, ints_, addrs, counts, types_)
	return nil
}

// contents decodes t for fn, which may store up to the given numbers of
// each kind of argument (the int form fn, MPI_Type_get_contents, none of
// the large counts).
func contents(fn string, t *datatype.Type, maxints, maxaddrs, maxcounts, maxtypes int) (decoded, error) {
	if _, _, _, err := t.GetContents(); err != nil {
		return decoded{}, newErr(mpi.ErrType, fn, "%v", err)
	}
	d := decode(t)
	if fn == "MPI_Type_get_contents" {
		if err := smallOnly(fn, d); err != nil {
			return d, err
		}
	}
	if len(d.ints) > maxints || len(d.addrs) > maxaddrs || len(d.counts) > maxcounts || len(d.types) > maxtypes {
		return d, newErr(mpi.ErrArg, fn, "the arrays hold %d, %d, %d, %d; the type has %d ints, %d addresses, %d large counts, %d types",
			maxints, maxaddrs, maxcounts, maxtypes, len(d.ints), len(d.addrs), len(d.counts), len(d.types))
	}
	return d, nil
}

// putContents stores a decoded type's arguments in the C arrays.
func putContents(d decoded, ints_ *C.int, addrs, counts *C.long, types_ *C.int) {
	putInts(ints_, d.ints)
	putLongs(addrs, d.addrs)
	putLongs(counts, d.counts)
	if len(d.types) > 0 {
		out := unsafe.Slice(types_, len(d.types))
		for i, x := range d.types {
			out[i] = C.int(typeHandle(x))
		}
	}
}

// putLongs stores vs in the C array dst of MPI_Aints or MPI_Counts.
func putLongs(dst *C.long, vs []int) {
	if len(vs) == 0 {
		return
	}
	out := unsafe.Slice(dst, len(vs))
	for i, v := range vs {
		out[i] = C.long(v)
	}
}
