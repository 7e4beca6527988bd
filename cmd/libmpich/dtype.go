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

// Derived datatypes: each constructor registers the new type and stores
// its handle.

func putType(t *datatype.Type, err error, out *C.int) error {
	if err != nil {
		return unraised(err)
	}
	*out = C.int(newType(t))
	return nil
}

func aints(p *C.long, n int) []int {
	if p == nil || n <= 0 {
		return nil
	}
	out := make([]int, n)
	for i, v := range unsafe.Slice(p, n) {
		out[i] = int(v)
	}
	return out
}

// checkArrayCount fails a constructor fn with MPI_ERR_COUNT for a
// negative number of blocks or dimensions.
func checkArrayCount(fn string, count int) error {
	if count < 0 {
		return newErr(mpi.ErrCount, fn, "count %d is negative", count)
	}
	return nil
}

func xType_contiguous(count int, old *datatype.Type, out *C.int) error {
	t, err := datatype.Contiguous(count, old)
	return putType(t, err, out)
}

func xType_vector(count, blocklen, stride int, old *datatype.Type, out *C.int) error {
	t, err := datatype.Vector(count, blocklen, stride, old)
	return putType(t, err, out)
}

func xType_create_hvector(count, blocklen int, stride int, old *datatype.Type, out *C.int) error {
	t, err := datatype.Hvector(count, blocklen, stride, old)
	return putType(t, err, out)
}

func xType_indexed(count int, blocklens, displs *C.int, old *datatype.Type, out *C.int) error {
	if err := checkArrayCount("MPI_Type_indexed", count); err != nil {
		return err
	}
	t, err := datatype.Indexed(ints(blocklens, count), ints(displs, count), old)
	return putType(t, err, out)
}

func xType_create_hindexed(count int, blocklens *C.int, displs *C.long, old *datatype.Type, out *C.int) error {
	if err := checkArrayCount("MPI_Type_create_hindexed", count); err != nil {
		return err
	}
	t, err := datatype.Hindexed(ints(blocklens, count), aints(displs, count), old)
	return putType(t, err, out)
}

func xType_create_indexed_block(count, blocklen int, displs *C.int, old *datatype.Type, out *C.int) error {
	if err := checkArrayCount("MPI_Type_create_indexed_block", count); err != nil {
		return err
	}
	t, err := datatype.IndexedBlock(blocklen, ints(displs, count), old)
	return putType(t, err, out)
}

func xType_create_hindexed_block(count, blocklen int, displs *C.long, old *datatype.Type, out *C.int) error {
	if err := checkArrayCount("MPI_Type_create_hindexed_block", count); err != nil {
		return err
	}
	t, err := datatype.HindexedBlock(blocklen, aints(displs, count), old)
	return putType(t, err, out)
}

func xType_create_struct(count int, blocklens *C.int, displs *C.long, ts *C.int, out *C.int) error {
	if err := checkArrayCount("MPI_Type_create_struct", count); err != nil {
		return err
	}
	types, err := typeArray("MPI_Type_create_struct", ts, count)
	if err != nil {
		return err
	}
	t, err := datatype.Struct(ints(blocklens, count), aints(displs, count), types)
	return putType(t, err, out)
}

func xType_create_subarray(ndims int, sizes, subsizes, starts *C.int, order int, old *datatype.Type, out *C.int) error {
	if err := checkArrayCount("MPI_Type_create_subarray", ndims); err != nil {
		return err
	}
	t, err := subarray(ints(sizes, ndims), ints(subsizes, ndims), ints(starts, ndims), order, old)
	return putType(t, err, out)
}

// subarray is MPI_Type_create_subarray's and its large-count form's
// translation, with MPI's order code.
func subarray(sizes, subsizes, starts []int, order int, old *datatype.Type) (*datatype.Type, error) {
	o := datatype.OrderC
	if order == 57 { // MPI_ORDER_FORTRAN
		o = datatype.OrderFortran
	}
	return datatype.Subarray(sizes, subsizes, starts, o, old)
}

func xType_create_darray(size, rank, ndims int, gsizes, distribs, dargs, psizes *C.int, order int, old *datatype.Type, out *C.int) error {
	if err := checkArrayCount("MPI_Type_create_darray", ndims); err != nil {
		return err
	}
	t, err := darray(size, rank, ndims, ints(gsizes, ndims), distribs, dargs, psizes, order, old)
	return putType(t, err, out)
}

// darray is MPI_Type_create_darray's and its large-count form's
// translation, with MPI's distribution and order codes.
func darray(size, rank, ndims int, gsizes []int, distribs, dargs, psizes *C.int, order int, old *datatype.Type) (*datatype.Type, error) {
	o := datatype.OrderC
	if order == 57 {
		o = datatype.OrderFortran
	}
	ds := make([]datatype.Distrib, ndims)
	for i, d := range ints(distribs, ndims) {
		switch d {
		case 121:
			ds[i] = datatype.DistributeBlock
		case 122:
			ds[i] = datatype.DistributeCyclic
		default:
			ds[i] = datatype.DistributeNone
		}
	}
	return datatype.Darray(size, rank, gsizes, ds, ints(dargs, ndims), ints(psizes, ndims), o, old)
}

func xType_create_resized(old *datatype.Type, lb, extent int, out *C.int) error {
	t, err := datatype.Resized(old, lb, extent)
	return putType(t, err, out)
}

func xType_dup(oh int32, out *C.int) error {
	old, err := typeOf("MPI_Type_dup", oh)
	if err != nil {
		return err
	}
	t, err := datatype.Dup(old)
	if err := putType(t, err, out); err != nil {
		return err
	}
	return copyTypeAttrs(oh, int32(*out))
}

func xType_commit(h *C.int) error {
	t, err := typeOf("MPI_Type_commit", int32(*h))
	if err != nil {
		return err
	}
	return unraised(t.Commit())
}

func xType_free(h *C.int) error {
	const fn = "MPI_Type_free"
	if uint32(*h)&kindMask != kindIndirect {
		return newErr(mpi.ErrType, fn, "cannot free a predefined datatype (%#x)", uint32(*h))
	}
	t, err := typeOf(fn, int32(*h))
	if err != nil {
		return err
	}
	if err := dropObjAttrs(fn, int32(*h), int32(*h)); err != nil {
		return err
	}
	types.del(int32(*h))
	typeHandles.Delete(t)
	largeTypes.Delete(t)
	*h = C.int(hDatatypeNull)
	return unraised(t.Free())
}

func xType_size(t *datatype.Type, size *C.int) error {
	*size = C.int(t.Size())
	return nil
}

// sizedTypes are the predefined types MPI_Type_match_size returns, by
// MPI_TYPECLASS_REAL (1), _INTEGER (2) and _COMPLEX (3) and size in bytes:
// the Fortran sized types, as MPICH does.
var sizedTypes = map[[2]int]uint32{
	{1, 4}: 0x4c000427, {1, 8}: 0x4c000829, // MPI_REAL4, MPI_REAL8
	{2, 1}: 0x4c00012d, {2, 2}: 0x4c00022f, {2, 4}: 0x4c000430, {2, 8}: 0x4c000831, // MPI_INTEGER1..8
	{3, 8}: 0x4c000828, {3, 16}: 0x4c00102a, // MPI_COMPLEX8, MPI_COMPLEX16
}

func xType_match_size(class, size int, h *C.int) error {
	if class < 1 || class > 3 {
		return newErr(mpi.ErrArg, "MPI_Type_match_size", "typeclass %d is none of MPI_TYPECLASS_REAL, _INTEGER, _COMPLEX", class)
	}
	t, ok := sizedTypes[[2]int{class, size}]
	if !ok {
		return newErr(mpi.ErrArg, "MPI_Type_match_size", "no predefined type of %s has size %d", [...]string{"", "MPI_TYPECLASS_REAL", "MPI_TYPECLASS_INTEGER", "MPI_TYPECLASS_COMPLEX"}[class], size)
	}
	*h = C.int(int32(t))
	return nil
}

func xType_size_x(t *datatype.Type, size *C.long) error {
	*size = C.long(t.Size())
	return nil
}

func xType_get_extent(t *datatype.Type, lb, extent *C.long) error {
	*lb, *extent = C.long(t.LB()), C.long(t.Extent())
	return nil
}

func xType_get_extent_x(t *datatype.Type, lb, extent *C.long) error {
	return xType_get_extent(t, lb, extent)
}

func xType_get_true_extent(t *datatype.Type, lb, extent *C.long) error {
	*lb, *extent = C.long(t.TrueLB()), C.long(t.TrueExtent())
	return nil
}

func xType_get_true_extent_x(t *datatype.Type, lb, extent *C.long) error {
	return xType_get_true_extent(t, lb, extent)
}

func xType_set_name(t *datatype.Type, name *C.char) error {
	typeNames.Store(t, C.GoString(name))
	return nil
}

func xType_get_name(h int32, name *C.char, n *C.int) error {
	if s, ok := builtinNames[uint32(h)]; ok {
		putString(s, name, maxObjectName, n)
		return nil
	}
	t, err := typeOf("MPI_Type_get_name", h)
	if err != nil {
		return err
	}
	s := ""
	if v, ok := typeNames.Load(t); ok {
		s = v.(string)
	}
	putString(s, name, maxObjectName, n)
	return nil
}

func xGet_address(p unsafe.Pointer, addr *C.long) error {
	*addr = C.long(uintptr(p))
	return nil
}

func xAddress(p unsafe.Pointer, addr *C.long) error { return xGet_address(p, addr) }

func xPack_size(count int, t *datatype.Type, c *mpi.Comm, size *C.int) error {
	*size = C.int(datatype.PackSize(count, t))
	return nil
}

func xPack(in unsafe.Pointer, count int, t *datatype.Type, out unsafe.Pointer, outsize int, pos *C.int, c *mpi.Comm) error {
	n, err := pack("MPI_Pack", in, count, t, out, outsize, int(*pos))
	*pos = C.int(n)
	return err
}

// pack is MPI_Pack's and MPI_Pack_c's translation: it packs from position
// pos and returns the position after the data (pos on an error).
func pack(fn string, in unsafe.Pointer, count int, t *datatype.Type, out unsafe.Pointer, outsize, pos int) (int, error) {
	if outsize < 0 {
		return pos, newErr(mpi.ErrArg, fn, "outsize %d is negative", outsize)
	}
	b, err := buf(fn, in, count, t)
	if err != nil {
		return pos, err
	}
	n, err := datatype.Pack(unsafe.Slice((*byte)(out), outsize), pos, b.Mem, count, b.Type)
	if err != nil {
		return pos, newErr(mpi.ErrTruncate, fn, "%v", err)
	}
	return n, nil
}

func xUnpack(in unsafe.Pointer, insize int, pos *C.int, out unsafe.Pointer, count int, t *datatype.Type, c *mpi.Comm) error {
	n, err := unpack("MPI_Unpack", in, insize, int(*pos), out, count, t)
	*pos = C.int(n)
	return err
}

// unpack is MPI_Unpack's and MPI_Unpack_c's translation: it unpacks from
// position pos and returns the position after the data (pos on an error).
func unpack(fn string, in unsafe.Pointer, insize, pos int, out unsafe.Pointer, count int, t *datatype.Type) (int, error) {
	if insize < 0 {
		return pos, newErr(mpi.ErrArg, fn, "insize %d is negative", insize)
	}
	b, err := buf(fn, out, count, t)
	if err != nil {
		return pos, err
	}
	n, err := datatype.Unpack(unsafe.Slice((*byte)(in), insize), pos, b.Mem, count, b.Type)
	if err != nil {
		return pos, newErr(mpi.ErrTruncate, fn, "%v", err)
	}
	return n, nil
}
