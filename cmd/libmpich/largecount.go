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
// others are the int form's translation under spec.txt's "=x<Name>").
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
