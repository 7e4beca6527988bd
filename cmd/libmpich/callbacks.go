//go:build cgo

package main

/*
#include <stdlib.h>
#include "callbacks.h"
*/
import "C"

import (
	"unsafe"

	"github.com/adimpi/adimpi/mpi"
)

// User operations: MPI_Op_create's function is called by the reductions
// with the two buffers, the count and the datatype handle.

func xOp_create(f unsafe.Pointer, commute int, out *C.int) error {
	if f == nil {
		return newErr(mpi.ErrOp, "MPI_Op_create", "user function is NULL")
	}
	o := mpi.NewOp(func(in, inout mpi.Buffer) {
		if in.Count == 0 {
			return
		}
		n, dt := C.int(in.Count), C.int(typeHandle(in.Type))
		org := in.Type.Origin()
		C.call_user_fn(f, unsafe.Pointer(&in.Mem[org]), unsafe.Pointer(&inout.Mem[org]), &n, &dt)
	}, commute != 0)
	*out = C.int(ops.add(o))
	return nil
}

func xOp_free(h *C.int) error {
	o, err := opOf("MPI_Op_free", int32(*h))
	if err != nil {
		return err
	}
	if _, ok := ops.get(int32(*h)); !ok {
		return newErr(mpi.ErrOp, "MPI_Op_free", "cannot free a predefined operation")
	}
	ops.del(int32(*h))
	*h = C.int(hOpNull)
	return o.Free()
}

func xOp_commutative(o *mpi.Op, flag *C.int) error {
	*flag = cbool(o.Commutative())
	return nil
}

// Error handlers.

func xComm_create_errhandler(f unsafe.Pointer, out *C.int) error {
	if f == nil {
		return newErr(mpi.ErrArg, "MPI_Comm_create_errhandler", "function is NULL")
	}
	e := mpi.NewErrhandler(func(c *mpi.Comm, err error) {
		h, code := C.int(commHandle(c)), C.int(codeOf(err))
		C.call_errh(f, &h, &code)
	})
	*out = C.int(errhs.add(e))
	return nil
}

func xComm_set_errhandler(c *mpi.Comm, h int32) error {
	e, err := errhOf("MPI_Comm_set_errhandler", h)
	if err != nil {
		return err
	}
	if h == hErrorsAbort {
		e = mpi.ErrorsAreFatal
	}
	if _, win := winErrhandlers.Load(e); win {
		return newErr(mpi.ErrArg, "MPI_Comm_set_errhandler", "error handler %#x was made for windows (MPI_Win_create_errhandler)", uint32(h))
	}
	return c.SetErrhandler(e)
}

func xComm_get_errhandler(c *mpi.Comm, out *C.int) error {
	e, err := c.GetErrhandler()
	if err != nil {
		return err
	}
	*out = C.int(errhHandle(e))
	return nil
}

func xErrhandler_free(h *C.int) error {
	errhs.del(int32(*h))
	*h = C.int(hErrhandlerNull)
	return nil
}

func xComm_call_errhandler(c *mpi.Comm, code int) error {
	c.CallErrhandler(&classErr{int32(code) & lastClass, errorString(int32(code))})
	return nil
}

// Attributes: a keyval's C copy and delete functions run from the Go
// callbacks of an mpi.Keyval; values are the C program's void pointers.

type keyval struct {
	k     *mpi.Keyval // a communicator keyval's (kindComm)
	extra uintptr
	// kind is what the keyval is for; a window's or datatype's keyval
	// keeps the program's functions (objattr.go).
	kind             int
	copyFn, deleteFn unsafe.Pointer
}

// predefinedKeys maps MPICH's predefined attribute keys to adimpi's.
var predefinedKeys = map[int32]*mpi.Keyval{
	0x64400001: mpi.KeyTagUB, 0x64400003: mpi.KeyHost, 0x64400005: mpi.KeyIO,
	0x64400007: mpi.KeyWtimeIsGlobal, 0x64400009: mpi.KeyUniverseSize, 0x6440000d: mpi.KeyAppNum,
}

// attrStore holds the ints a predefined attribute's value points to: C
// memory, since the program keeps the pointer.
var attrStore = (*[16]C.int)(C.calloc(16, C.size_t(unsafe.Sizeof(C.int(0)))))

func xComm_create_keyval(copyFn, deleteFn unsafe.Pointer, out *C.int, extra uintptr) error {
	kv := &keyval{k: &mpi.Keyval{}, extra: extra}
	h := keyvals.add(kv)
	if copyFn != nil {
		kv.k.Copy = func(old *mpi.Comm, v any) (any, bool) {
			var nv C.uintptr_t
			var flag C.int
			rc := C.call_copy(copyFn, C.int(commHandle(old)), C.int(h), C.uintptr_t(kv.extra), C.uintptr_t(v.(uintptr)), &nv, &flag)
			if rc != 0 || flag == 0 {
				return nil, false
			}
			return uintptr(nv), true
		}
	}
	if deleteFn != nil {
		kv.k.Delete = func(c *mpi.Comm, v any) error {
			if rc := C.call_delete(deleteFn, C.int(commHandle(c)), C.int(h), C.uintptr_t(v.(uintptr)), C.uintptr_t(kv.extra)); rc != 0 {
				return errorf(15, "MPI_Comm_delete_attr", "the keyval's delete function returned %d", int(rc))
			}
			return nil
		}
	}
	*out = C.int(h)
	return nil
}

func xComm_free_keyval(h *C.int) error {
	if _, err := objKeyvalOf("MPI_Comm_free_keyval", kindComm, int32(*h)); err != nil {
		return err
	}
	keyvals.del(int32(*h))
	*h = C.int(hKeyvalInvalid)
	return nil
}

func keyOf(fn string, h int32) (*mpi.Keyval, error) {
	if k, ok := predefinedKeys[h]; ok {
		return k, nil
	}
	kv, err := objKeyvalOf(fn, kindComm, h)
	if err != nil {
		return nil, err
	}
	return kv.k, nil
}

func xComm_set_attr(c *mpi.Comm, h int32, v uintptr) error {
	k, err := keyOf("MPI_Comm_set_attr", h)
	if err != nil {
		return err
	}
	return c.SetAttr(k, v)
}

func xComm_get_attr(c *mpi.Comm, h int32, out *uintptr, flag *C.int) error {
	if h == 0x6440000b { // MPI_LASTUSEDCODE: no user codes
		attrStore[15] = 78
		*out, *flag = uintptr(unsafe.Pointer(&attrStore[15])), 1
		return nil
	}
	k, err := keyOf("MPI_Comm_get_attr", h)
	if err != nil {
		return err
	}
	v, ok := c.Attr(k)
	*flag = cbool(ok)
	if !ok {
		return nil
	}
	if _, pre := predefinedKeys[h]; pre {
		i := (h & 0xff) >> 1
		switch x := v.(type) {
		case int:
			attrStore[i] = C.int(x)
		case bool:
			attrStore[i] = cbool(x)
		}
		*out = uintptr(unsafe.Pointer(&attrStore[i]))
		return nil
	}
	*out = v.(uintptr)
	return nil
}

func xComm_delete_attr(c *mpi.Comm, h int32) error {
	k, err := keyOf("MPI_Comm_delete_attr", h)
	if err != nil {
		return err
	}
	return c.DeleteAttr(k)
}
