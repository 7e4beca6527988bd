//go:build cgo

package main

/*
#include <stdint.h>
#include <stdlib.h>

// The values MPI_Win_get_attr's predefined keys point to: C memory, since
// the program keeps the pointers for the window's life.
typedef struct { long size; int disp_unit, flavor, model; } adimpi_win_attrs;
*/
import "C"

import (
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// One-sided communication: MPI_Win handles are MPICH's window objects
// (object type 8: MPI_WIN_NULL is 0x20000000, user windows 0xa0……).

const (
	objWin   = 0x8 << 26
	hWinNull = int32(0x20000000)

	// MPICH's predefined window attribute keys (mpi.h).
	keyWinBase         = 0x66000001
	keyWinSize         = 0x66000003
	keyWinDispUnit     = 0x66000005
	keyWinCreateFlavor = 0x66000007
	keyWinModel        = 0x66000009

	// MPICH's lock types and assertion bits.
	lockExclusive = 234
	lockShared    = 235
	modeShift     = 10 // MPI_MODE_NOCHECK is 1024: adimpi's ModeNoCheck << 10
	modeMask      = 0x1f << modeShift
)

// winEntry is what a window handle stands for.
type winEntry struct {
	w      *mpi.Win
	base   unsafe.Pointer      // MPI_WIN_BASE: the C program's address of this rank's memory
	attrs  *C.adimpi_win_attrs // what the other predefined attributes point to
	eh     int32               // the handler MPI_Win_set_errhandler set (0: none, MPICH's rule applies)
	handle int32               // the window's own handle, for the program's callbacks
}

var wins = newTable[*winEntry](kindDirect | objWin)

// winOf decodes a window handle.
func winOf(fn string, h int32) (*winEntry, error) {
	if h == hWinNull {
		return nil, errorf(45, fn, "window is MPI_WIN_NULL") // MPI_ERR_WIN
	}
	if e, ok := wins.get(h); ok {
		return e, nil
	}
	return nil, errorf(45, fn, "invalid window handle %#x", uint32(h))
}

// winDone is a window call's return value. MPICH's rule: a window whose
// program set no error handler raises its errors through MPI_COMM_WORLD's
// handler (MPI_ERRORS_ARE_FATAL for C programs, unless changed); one with
// a handler set raises through it (the mpi package did, for its errors).
func winDone(e *winEntry, err error) C.int {
	if err == nil {
		return 0
	}
	if e.eh == 0 {
		return fail(nil, err)
	}
	return done(nil, err)
}

// newWinEntry registers a window and its predefined attributes. The
// window returns its errors to this layer, which applies MPICH's rule
// (winDone) until the program sets a handler.
func newWinEntry(w *mpi.Win, base unsafe.Pointer, size int) int32 {
	_ = w.SetErrhandler(mpi.ErrorsReturn)
	a := (*C.adimpi_win_attrs)(C.calloc(1, C.size_t(unsafe.Sizeof(C.adimpi_win_attrs{}))))
	a.size, a.disp_unit, a.flavor, a.model = C.long(size), C.int(w.DispUnit()), C.int(w.Flavor()), C.int(w.Model())
	e := &winEntry{w: w, base: base, attrs: a}
	e.handle = wins.add(e)
	return e.handle
}

// cMem is the C memory [p, p+size) as a byte slice.
func cMem(p unsafe.Pointer, size int) []byte {
	if p == nil || size <= 0 {
		return nil
	}
	return unsafe.Slice((*byte)(p), size)
}

func infoOrNil(fn string, h int32) (*mpi.Info, error) {
	if h == hInfoNull {
		return nil, nil
	}
	return infoOf(fn, h)
}

func xWin_create(base unsafe.Pointer, size, dispUnit int, info int32, c *mpi.Comm, out *C.int) error {
	const fn = "MPI_Win_create"
	if size < 0 {
		return errorf(51, fn, "size %d is negative", size) // MPI_ERR_SIZE
	}
	in, err := infoOrNil(fn, info)
	if err != nil {
		return err
	}
	w, err := mpi.WinCreateBuf(c, cMem(base, size), dispUnit, in)
	if err != nil {
		return err
	}
	*out = C.int(newWinEntry(w, base, size))
	return nil
}

// allocated is MPI_Win_allocate and MPI_Win_allocate_shared: the memory is
// the mpi package's mapping, outside Go's heap, so C may keep its address.
func allocated(fn string, alloc func(*mpi.Comm, int, int, *mpi.Info) (*mpi.Win, []byte, error), size, dispUnit int, info int32, c *mpi.Comm, baseptr unsafe.Pointer, out *C.int) error {
	if size < 0 {
		return errorf(51, fn, "size %d is negative", size)
	}
	in, err := infoOrNil(fn, info)
	if err != nil {
		return err
	}
	w, mem, err := alloc(c, size, dispUnit, in)
	if err != nil {
		return err
	}
	p := memAddr(mem)
	*(*unsafe.Pointer)(baseptr) = p
	*out = C.int(newWinEntry(w, p, size))
	return nil
}

func xWin_allocate(size, dispUnit int, info int32, c *mpi.Comm, baseptr unsafe.Pointer, out *C.int) error {
	return allocated("MPI_Win_allocate", mpi.WinAllocateBytes, size, dispUnit, info, c, baseptr, out)
}

func xWin_allocate_shared(size, dispUnit int, info int32, c *mpi.Comm, baseptr unsafe.Pointer, out *C.int) error {
	return allocated("MPI_Win_allocate_shared", mpi.WinAllocateSharedBytes, size, dispUnit, info, c, baseptr, out)
}

func xWin_create_dynamic(info int32, c *mpi.Comm, out *C.int) error {
	in, err := infoOrNil("MPI_Win_create_dynamic", info)
	if err != nil {
		return err
	}
	w, err := mpi.WinCreateDynamic(c, in)
	if err != nil {
		return err
	}
	*out = C.int(newWinEntry(w, nil, 0))
	return nil
}

func xWin_attach(e *winEntry, base unsafe.Pointer, size int) error {
	_, err := e.w.Attach(cMem(base, size))
	return err
}

func xWin_detach(e *winEntry, base unsafe.Pointer) error {
	// Detach finds the region by its start; the length does not matter.
	return e.w.Detach(cMem(base, 1))
}

func xWin_shared_query(e *winEntry, rank int, size *C.long, dispUnit *C.int, baseptr unsafe.Pointer) error {
	mem, du, err := e.w.SharedQuery(rank)
	if err != nil {
		return err
	}
	*size, *dispUnit = C.long(len(mem)), C.int(du)
	*(*unsafe.Pointer)(baseptr) = memAddr(mem)
	return nil
}

// memAddr is the address a C program gets for window memory mem: its
// first byte, or NULL when it is empty.
func memAddr(mem []byte) unsafe.Pointer {
	if len(mem) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(mem))
}

func xWin_free(h *C.int) error {
	e, err := winOf("MPI_Win_free", int32(*h))
	if err != nil {
		return err
	}
	if err := dropObjAttrs("MPI_Win_free", e, int32(*h)); err != nil {
		return err
	}
	if err := e.w.Free(); err != nil {
		return err
	}
	wins.del(int32(*h))
	C.free(unsafe.Pointer(e.attrs))
	*h = C.int(hWinNull)
	return nil
}

// assertion turns MPICH's MPI_MODE_* bits into adimpi's.
func assertion(fn string, a int) (int, error) {
	if a&^modeMask != 0 {
		return 0, errorf(53, fn, "assertion %#x has bits no MPI_MODE_* constant has", a) // MPI_ERR_ASSERT
	}
	return a >> modeShift, nil
}

func xWin_fence(assert int, e *winEntry) error {
	a, err := assertion("MPI_Win_fence", assert)
	if err != nil {
		return err
	}
	return e.w.Fence(a)
}

func xWin_post(g *mpi.Group, assert int, e *winEntry) error {
	a, err := assertion("MPI_Win_post", assert)
	if err != nil {
		return err
	}
	return e.w.Post(g, a)
}

func xWin_start(g *mpi.Group, assert int, e *winEntry) error {
	a, err := assertion("MPI_Win_start", assert)
	if err != nil {
		return err
	}
	return e.w.Start(g, a)
}

func xWin_complete(e *winEntry) error { return e.w.Complete() }
func xWin_wait(e *winEntry) error     { return e.w.Wait() }

func xWin_test(e *winEntry, flag *C.int) error {
	ok, err := e.w.Test()
	*flag = cbool(ok)
	return err
}

func xWin_lock(lockType, rank, assert int, e *winEntry) error {
	const fn = "MPI_Win_lock"
	a, err := assertion(fn, assert)
	if err != nil {
		return err
	}
	lt := 0
	switch lockType {
	case lockExclusive:
		lt = mpi.LockExclusive
	case lockShared:
		lt = mpi.LockShared
	default:
		return errorf(47, fn, "lock type %d is neither MPI_LOCK_EXCLUSIVE nor MPI_LOCK_SHARED", lockType) // MPI_ERR_LOCKTYPE
	}
	return e.w.Lock(lt, rank, a)
}

func xWin_unlock(rank int, e *winEntry) error { return e.w.Unlock(rank) }

func xWin_lock_all(assert int, e *winEntry) error {
	a, err := assertion("MPI_Win_lock_all", assert)
	if err != nil {
		return err
	}
	return e.w.LockAll(a)
}

func xWin_unlock_all(e *winEntry) error             { return e.w.UnlockAll() }
func xWin_flush(rank int, e *winEntry) error        { return e.w.Flush(rank) }
func xWin_flush_all(e *winEntry) error              { return e.w.FlushAll() }
func xWin_flush_local(rank int, e *winEntry) error  { return e.w.FlushLocal(rank) }
func xWin_flush_local_all(e *winEntry) error        { return e.w.FlushLocalAll() }
func xWin_sync(e *winEntry) error                   { return e.w.Sync() }
func xWin_set_name(e *winEntry, name *C.char) error { e.w.SetName(C.GoString(name)); return nil }

func xWin_get_name(e *winEntry, name *C.char, n *C.int) error {
	putString(e.w.Name(), name, maxObjectName, n)
	return nil
}

func xWin_get_group(e *winEntry, out *C.int) error {
	g, err := e.w.Group()
	if err != nil {
		return err
	}
	*out = C.int(newGroup(g))
	return nil
}

func xWin_get_info(e *winEntry, out *C.int) error {
	*out = C.int(infos.add(e.w.Info()))
	return nil
}

// xWin_set_info accepts the hints and keeps none: hints may be ignored.
func xWin_set_info(e *winEntry, info int32) error {
	_, err := infoOf("MPI_Win_set_info", info)
	return err
}

func xWin_get_attr(e *winEntry, key int32, out *uintptr, flag *C.int) error {
	a := e.attrs
	*flag = 1
	switch key {
	case keyWinBase:
		*out = uintptr(e.base)
	case keyWinSize:
		*out = uintptr(unsafe.Pointer(&a.size))
	case keyWinDispUnit:
		*out = uintptr(unsafe.Pointer(&a.disp_unit))
	case keyWinCreateFlavor:
		*out = uintptr(unsafe.Pointer(&a.flavor))
	case keyWinModel:
		*out = uintptr(unsafe.Pointer(&a.model))
	default:
		return getObjAttr("MPI_Win_get_attr", kindWin, e, key, out, flag)
	}
	return nil
}

func xWin_set_errhandler(e *winEntry, h int32) error {
	eh, err := errhOf("MPI_Win_set_errhandler", h)
	if err != nil {
		return err
	}
	switch h {
	case hErrorsFatal, hErrorsReturn, hErrorsAbort:
	default:
		if eh = userWinErrhandler(eh, e.handle); eh == nil {
			return newErr(mpi.ErrArg, "MPI_Win_set_errhandler", "error handler %#x was made for communicators (MPI_Comm_create_errhandler)", uint32(h))
		}
	}
	e.eh = h
	return e.w.SetErrhandler(eh)
}

func xWin_get_errhandler(e *winEntry, out *C.int) error {
	if e.eh != 0 {
		*out = C.int(e.eh)
		return nil
	}
	eh, err := mpi.World().GetErrhandler()
	*out = C.int(errhHandle(eh))
	return err
}

func xWin_call_errhandler(e *winEntry, code int) error {
	err := &classErr{int32(code) & lastClass, errorString(int32(code))}
	if e.eh == 0 {
		fail(nil, err)
		return nil
	}
	e.w.CallErrhandler(err)
	return nil
}

// The data movement calls.

func xPut(op unsafe.Pointer, ocount int, ot *datatype.Type, target, disp, tcount int, tt *datatype.Type, e *winEntry) error {
	b, err := buf("MPI_Put", op, ocount, ot)
	if err != nil {
		return err
	}
	return e.w.PutBuf(b, target, disp, tcount, tt)
}

func xGet(rp unsafe.Pointer, rcount int, rt *datatype.Type, target, disp, tcount int, tt *datatype.Type, e *winEntry) error {
	b, err := buf("MPI_Get", rp, rcount, rt)
	if err != nil {
		return err
	}
	return e.w.GetBuf(b, target, disp, tcount, tt)
}

func xAccumulate(op unsafe.Pointer, ocount int, ot *datatype.Type, target, disp, tcount int, tt *datatype.Type, o *mpi.Op, e *winEntry) error {
	b, err := buf("MPI_Accumulate", op, ocount, ot)
	if err != nil {
		return err
	}
	return e.w.AccumulateBuf(b, target, disp, tcount, tt, o)
}

// getAccBufs is the origin and result buffers of MPI_Get_accumulate: with
// MPI_NO_OP the origin is ignored (it may be NULL).
func getAccBufs(fn string, op unsafe.Pointer, ocount int, ot *datatype.Type, rp unsafe.Pointer, rcount int, rt *datatype.Type, o *mpi.Op) (mpi.Buffer, mpi.Buffer, error) {
	var ob mpi.Buffer
	var err error
	if o != mpi.NoOp {
		if ob, err = buf(fn, op, ocount, ot); err != nil {
			return ob, ob, err
		}
	}
	rb, err := buf(fn, rp, rcount, rt)
	return ob, rb, err
}

func xGet_accumulate(op unsafe.Pointer, ocount int, ot *datatype.Type, rp unsafe.Pointer, rcount int, rt *datatype.Type, target, disp, tcount int, tt *datatype.Type, o *mpi.Op, e *winEntry) error {
	ob, rb, err := getAccBufs("MPI_Get_accumulate", op, ocount, ot, rp, rcount, rt, o)
	if err != nil {
		return err
	}
	return e.w.GetAccumulateBuf(ob, rb, target, disp, tcount, tt, o)
}

func xFetch_and_op(op, rp unsafe.Pointer, t *datatype.Type, target, disp int, o *mpi.Op, e *winEntry) error {
	ob, rb, err := getAccBufs("MPI_Fetch_and_op", op, 1, t, rp, 1, t, o)
	if err != nil {
		return err
	}
	return e.w.GetAccumulateBuf(ob, rb, target, disp, 1, t, o)
}

func xCompare_and_swap(op, cp, rp unsafe.Pointer, t *datatype.Type, target, disp int, e *winEntry) error {
	const fn = "MPI_Compare_and_swap"
	if op == nil || cp == nil || rp == nil {
		return newErr(mpi.ErrBuffer, fn, "a buffer is NULL")
	}
	switch t {
	case datatype.Int8, datatype.Uint8, datatype.Byte:
		return cas[uint8](e.w, op, cp, rp, target, disp)
	case datatype.Int16, datatype.Uint16:
		return cas[uint16](e.w, op, cp, rp, target, disp)
	case datatype.Int32, datatype.Uint32:
		return cas[uint32](e.w, op, cp, rp, target, disp)
	case datatype.Int64, datatype.Uint64:
		return cas[uint64](e.w, op, cp, rp, target, disp)
	}
	return newErr(mpi.ErrType, fn, "%s is not an integer, logical or byte type", t)
}

// cas is MPI_Compare_and_swap on one element of T; it completes before it
// returns (the standard allows the earlier completion).
func cas[T uint8 | uint16 | uint32 | uint64](w *mpi.Win, op, cp, rp unsafe.Pointer, target, disp int) error {
	old, err := mpi.CompareAndSwap(w, *(*T)(op), *(*T)(cp), target, disp)
	if err == nil {
		*(*T)(rp) = old
	}
	return err
}

// The request-returning forms.

func rmaReq(r *mpi.Request, err error, req *C.int) error {
	if err != nil {
		return err
	}
	*req = C.int(requests.add(reqEntry{r: r}))
	return nil
}

func xRput(op unsafe.Pointer, ocount int, ot *datatype.Type, target, disp, tcount int, tt *datatype.Type, e *winEntry, req *C.int) error {
	b, err := buf("MPI_Rput", op, ocount, ot)
	if err != nil {
		return err
	}
	r, err := e.w.RputBuf(b, target, disp, tcount, tt)
	return rmaReq(r, err, req)
}

func xRget(rp unsafe.Pointer, rcount int, rt *datatype.Type, target, disp, tcount int, tt *datatype.Type, e *winEntry, req *C.int) error {
	b, err := buf("MPI_Rget", rp, rcount, rt)
	if err != nil {
		return err
	}
	r, err := e.w.RgetBuf(b, target, disp, tcount, tt)
	return rmaReq(r, err, req)
}

func xRaccumulate(op unsafe.Pointer, ocount int, ot *datatype.Type, target, disp, tcount int, tt *datatype.Type, o *mpi.Op, e *winEntry, req *C.int) error {
	b, err := buf("MPI_Raccumulate", op, ocount, ot)
	if err != nil {
		return err
	}
	r, err := e.w.RaccumulateBuf(b, target, disp, tcount, tt, o)
	return rmaReq(r, err, req)
}

func xRget_accumulate(op unsafe.Pointer, ocount int, ot *datatype.Type, rp unsafe.Pointer, rcount int, rt *datatype.Type, target, disp, tcount int, tt *datatype.Type, o *mpi.Op, e *winEntry, req *C.int) error {
	ob, rb, err := getAccBufs("MPI_Rget_accumulate", op, ocount, ot, rp, rcount, rt, o)
	if err != nil {
		return err
	}
	r, err := e.w.RgetAccumulateBuf(ob, rb, target, disp, tcount, tt, o)
	return rmaReq(r, err, req)
}
