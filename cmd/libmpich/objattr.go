//go:build cgo

package main

/*
#include "callbacks.h"
*/
import "C"

import (
	"maps"
	"slices"
	"sync"
	"unsafe"

	"github.com/adimpi/adimpi/mpi"
)

// User attributes and error handlers of windows and datatypes. The core
// keeps a communicator's attributes (mpi.Keyval); a window's or a
// datatype's live here, keyed by the window or the datatype handle (the
// predefined types share adimpi types, so the handle tells MPI_INT from
// MPI_INTEGER4), with the program's copy and delete functions called when
// the standard says.

// Keyval kinds: what a keyval of the keyvals table was made for.
const (
	kindComm = iota
	kindWin
	kindType
)

var kindNames = [...]string{"communicators", "windows", "datatypes"}

// objAttrs holds the attributes of windows (*winEntry) and datatypes
// (int32 handles): object -> keyval handle -> the program's value.
var objAttrs struct {
	sync.Mutex
	m map[any]map[int32]uintptr
}

// createObjKeyval is MPI_Win_create_keyval and MPI_Type_create_keyval.
func createObjKeyval(kind int, copyFn, deleteFn unsafe.Pointer, out *C.int, extra uintptr) error {
	*out = C.int(keyvals.add(&keyval{kind: kind, copyFn: copyFn, deleteFn: deleteFn, extra: extra}))
	return nil
}

// objKeyvalOf decodes a keyval handle made for kind.
func objKeyvalOf(fn string, kind int, h int32) (*keyval, error) {
	kv, ok := keyvals.get(h)
	if !ok {
		return nil, errorf(errKeyval, fn, "invalid keyval %#x", uint32(h))
	}
	if kv.kind != kind {
		return nil, errorf(errKeyval, fn, "keyval %#x was made for %s", uint32(h), kindNames[kv.kind])
	}
	return kv, nil
}

// freeObjKeyval is MPI_Win_free_keyval and MPI_Type_free_keyval; the
// attributes set with it stay until deleted, as MPI says.
func freeObjKeyval(fn string, kind int, h *C.int) error {
	if _, err := objKeyvalOf(fn, kind, int32(*h)); err != nil {
		return err
	}
	keyvals.del(int32(*h))
	*h = C.int(hKeyvalInvalid)
	return nil
}

// runDelete runs kv's delete function, if it has one, for value v of the
// object with handle oh.
func (kv *keyval) runDelete(fn string, oh, key int32, v uintptr) error {
	if kv == nil || kv.deleteFn == nil {
		return nil
	}
	if rc := C.call_delete(kv.deleteFn, C.int(oh), C.int(key), C.uintptr_t(v), C.uintptr_t(kv.extra)); rc != 0 {
		return errorf(15, fn, "the delete function of keyval %#x returned %d", uint32(key), int(rc)) // MPI_ERR_OTHER
	}
	return nil
}

// setObjAttr stores v under key on obj (handle oh), first deleting the
// value it replaces.
func setObjAttr(fn string, kind int, obj any, oh, key int32, v uintptr) error {
	kv, err := objKeyvalOf(fn, kind, key)
	if err != nil {
		return err
	}
	objAttrs.Lock()
	old, had := objAttrs.m[obj][key]
	objAttrs.Unlock()
	if had {
		if err := kv.runDelete(fn, oh, key, old); err != nil {
			return err
		}
	}
	objAttrs.Lock()
	defer objAttrs.Unlock()
	if objAttrs.m == nil {
		objAttrs.m = map[any]map[int32]uintptr{}
	}
	if objAttrs.m[obj] == nil {
		objAttrs.m[obj] = map[int32]uintptr{}
	}
	objAttrs.m[obj][key] = v
	return nil
}

// getObjAttr returns the value under key on obj.
func getObjAttr(fn string, kind int, obj any, key int32, out *uintptr, flag *C.int) error {
	if _, err := objKeyvalOf(fn, kind, key); err != nil {
		*flag = 0
		return err
	}
	objAttrs.Lock()
	v, ok := objAttrs.m[obj][key]
	objAttrs.Unlock()
	*flag = cbool(ok)
	if ok {
		*out = v
	}
	return nil
}

// deleteObjAttr removes the value under key from obj, running the
// keyval's delete function.
func deleteObjAttr(fn string, kind int, obj any, oh, key int32) error {
	kv, err := objKeyvalOf(fn, kind, key)
	if err != nil {
		return err
	}
	objAttrs.Lock()
	v, ok := objAttrs.m[obj][key]
	objAttrs.Unlock()
	if !ok {
		return nil
	}
	if err := kv.runDelete(fn, oh, key, v); err != nil {
		return err
	}
	objAttrs.Lock()
	delete(objAttrs.m[obj], key)
	objAttrs.Unlock()
	return nil
}

// dropObjAttrs deletes every attribute of obj (handle oh) as the object is
// freed, in key order; a keyval freed meanwhile has no delete function left
// to run.
func dropObjAttrs(fn string, obj any, oh int32) error {
	objAttrs.Lock()
	attrs := objAttrs.m[obj]
	delete(objAttrs.m, obj)
	objAttrs.Unlock()
	keys := make([]int32, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var first error
	for _, k := range keys {
		kv, _ := keyvals.get(k)
		if err := kv.runDelete(fn, oh, k, attrs[k]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// copyTypeAttrs gives the duplicate nh of datatype oh the attributes whose
// copy functions ask for it (MPI_Type_dup).
func copyTypeAttrs(oh, nh int32) error {
	objAttrs.Lock()
	attrs := maps.Clone(objAttrs.m[oh])
	objAttrs.Unlock()
	for k, v := range attrs {
		kv, ok := keyvals.get(k)
		if !ok || kv.copyFn == nil {
			continue
		}
		var nv C.uintptr_t
		var flag C.int
		if rc := C.call_copy(kv.copyFn, C.int(oh), C.int(k), C.uintptr_t(kv.extra), C.uintptr_t(v), &nv, &flag); rc != 0 {
			return errorf(15, "MPI_Type_dup", "the copy function of keyval %#x returned %d", uint32(k), int(rc))
		}
		if flag != 0 {
			if err := setObjAttr("MPI_Type_dup", kindType, nh, nh, k, uintptr(nv)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Windows.

func xWin_create_keyval(copyFn, deleteFn unsafe.Pointer, out *C.int, extra uintptr) error {
	return createObjKeyval(kindWin, copyFn, deleteFn, out, extra)
}

func xWin_free_keyval(h *C.int) error { return freeObjKeyval("MPI_Win_free_keyval", kindWin, h) }

func xWin_set_attr(wh, key int32, v uintptr) error {
	e, err := winOf("MPI_Win_set_attr", wh)
	if err != nil {
		return err
	}
	return setObjAttr("MPI_Win_set_attr", kindWin, e, wh, key, v)
}

func xWin_delete_attr(wh, key int32) error {
	e, err := winOf("MPI_Win_delete_attr", wh)
	if err != nil {
		return err
	}
	return deleteObjAttr("MPI_Win_delete_attr", kindWin, e, wh, key)
}

// winErrhandlers maps the error handlers MPI_Win_create_errhandler made to
// the program's functions.
var winErrhandlers sync.Map // *mpi.Errhandler -> unsafe.Pointer

func xWin_create_errhandler(f unsafe.Pointer, out *C.int) error {
	if f == nil {
		return newErr(mpi.ErrArg, "MPI_Win_create_errhandler", "function is NULL")
	}
	// The handler proper is made per window (userWinErrhandler): the
	// program's function gets the window's handle, which the core does
	// not know.
	e := mpi.NewWinErrhandler(func(*mpi.Win, error) {})
	winErrhandlers.Store(e, f)
	*out = C.int(errhs.add(e))
	return nil
}

// userWinErrhandler returns the error handler that calls f with window
// handle wh, or nil when e is not one of MPI_Win_create_errhandler's.
func userWinErrhandler(e *mpi.Errhandler, wh int32) *mpi.Errhandler {
	f, ok := winErrhandlers.Load(e)
	if !ok {
		return nil
	}
	return mpi.NewWinErrhandler(func(_ *mpi.Win, err error) {
		h, code := C.int(wh), C.int(codeOf(err))
		C.call_errh(f.(unsafe.Pointer), &h, &code)
	})
}

// Datatypes.

func xType_create_keyval(copyFn, deleteFn unsafe.Pointer, out *C.int, extra uintptr) error {
	return createObjKeyval(kindType, copyFn, deleteFn, out, extra)
}

func xType_free_keyval(h *C.int) error { return freeObjKeyval("MPI_Type_free_keyval", kindType, h) }

func xType_set_attr(th, key int32, v uintptr) error {
	if _, err := typeOf("MPI_Type_set_attr", th); err != nil {
		return err
	}
	return setObjAttr("MPI_Type_set_attr", kindType, th, th, key, v)
}

func xType_get_attr(th, key int32, out *uintptr, flag *C.int) error {
	if _, err := typeOf("MPI_Type_get_attr", th); err != nil {
		return err
	}
	return getObjAttr("MPI_Type_get_attr", kindType, th, key, out, flag)
}

func xType_delete_attr(th, key int32) error {
	if _, err := typeOf("MPI_Type_delete_attr", th); err != nil {
		return err
	}
	return deleteObjAttr("MPI_Type_delete_attr", kindType, th, th, key)
}
