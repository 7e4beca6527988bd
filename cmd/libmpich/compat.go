//go:build cgo

package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// The calls that are another call under a different signature: large
// counts, MPI-1 names, memory, info objects, datatype decoding.

func xGet_count_c(st uintptr, t *datatype.Type, count *C.long) error {
	var n C.int
	err := xGet_count(st, t, &n)
	*count = C.long(n)
	return err
}

func xGet_elements_x(st uintptr, t *datatype.Type, count *C.long) error {
	var n C.int
	err := xGet_elements(st, t, &n)
	*count = C.long(n)
	return err
}

func xStatus_set_elements(st uintptr, t *datatype.Type, count int) error {
	cs := statusAt(st, 0)
	if cs == nil {
		return newErr(mpi.ErrArg, "MPI_Status_set_elements", "status is MPI_STATUS_IGNORE")
	}
	n := uint64(count * t.Size())
	cs.countLo = int32(uint32(n))
	cs.countHiCancelled = cs.countHiCancelled&1 | int32(n>>32)<<1
	return nil
}

func xStatus_set_cancelled(st uintptr, flag int) error {
	cs := statusAt(st, 0)
	if cs == nil {
		return newErr(mpi.ErrArg, "MPI_Status_set_cancelled", "status is MPI_STATUS_IGNORE")
	}
	cs.countHiCancelled = cs.countHiCancelled&^1 | int32(cbool(flag != 0))
	return nil
}

func xType_extent(t *datatype.Type, extent *C.long) error {
	*extent = C.long(t.Extent())
	return nil
}

func xType_lb(t *datatype.Type, lb *C.long) error {
	*lb = C.long(t.LB())
	return nil
}

func xType_ub(t *datatype.Type, ub *C.long) error {
	*ub = C.long(t.UB())
	return nil
}

// xComm_dup_with_info duplicates c with info's hints instead of c's.
func xComm_dup_with_info(c *mpi.Comm, h int32, out *C.int) error {
	info, err := infoOrNil("MPI_Comm_dup_with_info", h)
	if err != nil {
		return err
	}
	n, err := c.Dup()
	if err != nil {
		return err
	}
	if err := setHints(n, info); err != nil {
		return err
	}
	*out = C.int(newComm(n))
	return nil
}

// MPI_Alloc_mem's memory is C memory: nothing in Go keeps it alive or
// moves it.
func xAlloc_mem(size int, info int32, base *uintptr) error {
	p := C.malloc(C.size_t(max(size, 1)))
	if p == nil {
		return errorf(34, "MPI_Alloc_mem", "cannot allocate %d bytes", size) // MPI_ERR_NO_MEM
	}
	*base = uintptr(p)
	return nil
}

func xFree_mem(p unsafe.Pointer) error {
	C.free(p)
	return nil
}

// Info objects.

func infoOf(fn string, h int32) (*mpi.Info, error) {
	if h == hInfoEnv {
		return mpi.InfoEnv(), nil
	}
	if i, ok := infos.get(h); ok {
		return i, nil
	}
	return nil, errorf(28, fn, "invalid info handle %#x", uint32(h)) // MPI_ERR_INFO
}

// infoKey is an info call's key, checked as MPICH does: an empty key or
// one over MPI_MAX_INFO_KEY bytes is MPI_ERR_INFO_KEY.
func infoKey(fn string, key *C.char) (string, error) {
	k := C.GoString(key)
	if k == "" || len(k) > maxInfoKey {
		return "", errorf(29, fn, "info key %q is empty or longer than %d bytes", k, maxInfoKey) // MPI_ERR_INFO_KEY
	}
	return k, nil
}

func xInfo_create(out *C.int) error {
	*out = C.int(infos.add(mpi.NewInfo()))
	return nil
}

func xInfo_set(h int32, key, value *C.char) error {
	const fn = "MPI_Info_set"
	i, err := infoOf(fn, h)
	if err != nil {
		return err
	}
	k, err := infoKey(fn, key)
	if err != nil {
		return err
	}
	if v := C.GoString(value); len(v) > mpi.InfoMaxVal {
		return errorf(30, fn, "the value of info key %q is %d bytes, longer than %d", k, len(v), mpi.InfoMaxVal) // MPI_ERR_INFO_VALUE
	}
	return unraised(i.Set(k, C.GoString(value)))
}

func xInfo_get(h int32, key *C.char, valuelen int, value *C.char, flag *C.int) error {
	const fn = "MPI_Info_get"
	i, err := infoOf(fn, h)
	if err != nil {
		return err
	}
	k, err := infoKey(fn, key)
	if err != nil {
		return err
	}
	v, ok, err := i.Get(k)
	*flag = cbool(ok)
	if ok {
		putString(v, value, valuelen+1, nil)
	}
	return unraised(err)
}

// xInfo_get_string is MPI-4's MPI_Info_get: *buflen is the size of value
// (with its NUL) on entry and the size the whole value needs on return; a
// longer value is cut to fit, a zero buflen leaves value alone. A key that
// is not set leaves both alone and clears flag.
func xInfo_get_string(h int32, key *C.char, buflen *C.int, value *C.char, flag *C.int) error {
	const fn = "MPI_Info_get_string"
	i, err := infoOf(fn, h)
	if err != nil {
		return err
	}
	k, err := infoKey(fn, key)
	if err != nil {
		return err
	}
	if buflen == nil || flag == nil {
		return newErr(mpi.ErrArg, fn, "buflen or flag is NULL")
	}
	if *buflen < 0 {
		return newErr(mpi.ErrArg, fn, "buflen %d is negative", *buflen)
	}
	v, ok, err := i.Get(k)
	if err != nil {
		return unraised(err)
	}
	*flag = cbool(ok)
	if !ok {
		return nil
	}
	if *buflen > 0 {
		putString(v, value, int(*buflen), nil)
	}
	*buflen = C.int(len(v) + 1)
	return nil
}

func xInfo_get_valuelen(h int32, key *C.char, n *C.int, flag *C.int) error {
	const fn = "MPI_Info_get_valuelen"
	i, err := infoOf(fn, h)
	if err != nil {
		return err
	}
	k, err := infoKey(fn, key)
	if err != nil {
		return err
	}
	v, ok, err := i.Get(k)
	*flag, *n = cbool(ok), C.int(len(v))
	return unraised(err)
}

func xInfo_get_nkeys(h int32, n *C.int) error {
	i, err := infoOf("MPI_Info_get_nkeys", h)
	if err != nil {
		return err
	}
	k, err := i.NKeys()
	*n = C.int(k)
	return unraised(err)
}

func xInfo_get_nthkey(h int32, n int, key *C.char) error {
	i, err := infoOf("MPI_Info_get_nthkey", h)
	if err != nil {
		return err
	}
	k, err := i.NthKey(n)
	if err == nil {
		putString(k, key, maxInfoKey+1, nil)
	}
	return unraised(err)
}

func xInfo_delete(h int32, key *C.char) error {
	const fn = "MPI_Info_delete"
	i, err := infoOf(fn, h)
	if err != nil {
		return err
	}
	k, err := infoKey(fn, key)
	if err != nil {
		return err
	}
	if err := i.Delete(k); err != nil {
		return errorf(errInfoNokey, "MPI_Info_delete", "%v", err)
	}
	return nil
}

func xInfo_dup(h int32, out *C.int) error {
	i, err := infoOf("MPI_Info_dup", h)
	if err != nil {
		return err
	}
	d, err := i.Dup()
	if err != nil {
		return unraised(err)
	}
	*out = C.int(infos.add(d))
	return nil
}

func xInfo_free(h *C.int) error {
	i, err := infoOf("MPI_Info_free", int32(*h))
	if err != nil {
		return err
	}
	infos.del(int32(*h))
	*h = C.int(hInfoNull)
	return unraised(i.Free())
}

func xIsendrecv(sp unsafe.Pointer, scount int, st *datatype.Type, dest, stag int, rp unsafe.Pointer, rcount int, rt *datatype.Type, src, rtag int, c *mpi.Comm, req *C.int) error {
	sb, err := buf("MPI_Isendrecv", sp, scount, st)
	if err != nil {
		return err
	}
	rb, err := buf("MPI_Isendrecv", rp, rcount, rt)
	if err != nil {
		return err
	}
	r, err := mpi.IsendrecvBuf(c, sb, dest, stag, rb, src, rtag)
	if err != nil {
		return err
	}
	*req = C.int(requests.add(reqEntry{r: r}))
	return nil
}

func xIsendrecv_replace(p unsafe.Pointer, count int, t *datatype.Type, dest, stag, src, rtag int, c *mpi.Comm, req *C.int) error {
	b, err := buf("MPI_Isendrecv_replace", p, count, t)
	if err != nil {
		return err
	}
	r, err := mpi.IsendrecvReplaceBuf(c, b, dest, stag, src, rtag)
	if err != nil {
		return err
	}
	*req = C.int(requests.add(reqEntry{r: r}))
	return nil
}

// xComm_idup_with_info is xComm_dup_with_info's non-blocking form.
func xComm_idup_with_info(c *mpi.Comm, h int32, out *C.int, req *C.int) error {
	info, err := infoOrNil("MPI_Comm_idup_with_info", h)
	if err != nil {
		return err
	}
	n, r, err := c.Idup()
	if err != nil {
		return err
	}
	if err := setHints(n, info); err != nil {
		return err
	}
	*out = C.int(newComm(n))
	*req = C.int(requests.add(reqEntry{r: r}))
	return nil
}

// narrow copies the MPI_Count or MPI_Aint array of a large-count
// collective fn (one element per rank of c, or of its remote group if that
// is larger) into ints for the int form's translation; NULL stays NULL. A
// value beyond an int fails the call with MPI_ERR_COUNT (through guard,
// which the generated body defers).
func narrow(fn string, p *C.long, c *mpi.Comm) *C.int {
	if p == nil {
		return nil
	}
	n := c.Size()
	if c.IsInter() {
		n = max(n, c.RemoteSize())
	}
	if n == 0 {
		return nil
	}
	out := make([]C.int, n)
	for i, v := range unsafe.Slice(p, n) {
		if v != C.long(C.int(v)) {
			panic(newErr(mpi.ErrCount, fn, "element %d of a count or displacement array is %d: adimpi's large-count collectives take values that fit an int", i, int64(v)))
		}
		out[i] = C.int(v)
	}
	return &out[0]
}
