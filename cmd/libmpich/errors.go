//go:build cgo

package main

/*
#include <stdint.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/mpi"
)

// MPICH's error classes for adimpi's (mpi.Class values differ from MPI's
// numbering, which is MPICH's).
var classCode = map[mpi.Class]int32{
	mpi.ErrBuffer: 1, mpi.ErrCount: 2, mpi.ErrType: 3, mpi.ErrTag: 4, mpi.ErrComm: 5,
	mpi.ErrRank: 6, mpi.ErrRoot: 7, mpi.ErrGroup: 8, mpi.ErrOp: 9, mpi.ErrTopology: 10,
	mpi.ErrDims: 11, mpi.ErrArg: 12, mpi.ErrUnknown: 13, mpi.ErrTruncate: 14, mpi.ErrOther: 15,
	mpi.ErrIntern: 16, mpi.ErrInStatus: 17, mpi.ErrPending: 18, mpi.ErrRequest: 19,
	mpi.ErrNotSupported: errUnsupported, mpi.ErrName: 33, mpi.ErrPort: 38, mpi.ErrService: 41, mpi.ErrSpawn: 42,
	adi.ErrWin: 45, adi.ErrBase: 46, adi.ErrLocktype: 47, adi.ErrRMAConflict: 49, adi.ErrRMASync: 50,
	adi.ErrSize: 51, adi.ErrDisp: 52, adi.ErrAssert: 53, adi.ErrRMARange: 55, adi.ErrRMAAttach: 56,
	adi.ErrRMAShared: 57, adi.ErrRMAFlavor: 58,
}

const (
	errUnsupported = 44 // MPI_ERR_UNSUPPORTED_OPERATION
	errKeyval      = 48 // MPI_ERR_KEYVAL
	errInfoNokey   = 31 // MPI_ERR_INFO_NOKEY
	lastClass      = 127
)

// classNames are the MPI names of MPICH's classes this layer returns.
var classNames = map[int32]string{
	0: "MPI_SUCCESS", 1: "MPI_ERR_BUFFER", 2: "MPI_ERR_COUNT", 3: "MPI_ERR_TYPE", 4: "MPI_ERR_TAG",
	5: "MPI_ERR_COMM", 6: "MPI_ERR_RANK", 7: "MPI_ERR_ROOT", 8: "MPI_ERR_GROUP", 9: "MPI_ERR_OP",
	10: "MPI_ERR_TOPOLOGY", 11: "MPI_ERR_DIMS", 12: "MPI_ERR_ARG", 13: "MPI_ERR_UNKNOWN",
	14: "MPI_ERR_TRUNCATE", 15: "MPI_ERR_OTHER", 16: "MPI_ERR_INTERN", 17: "MPI_ERR_IN_STATUS",
	18: "MPI_ERR_PENDING", 19: "MPI_ERR_REQUEST", 28: "MPI_ERR_INFO", 29: "MPI_ERR_INFO_KEY",
	30: "MPI_ERR_INFO_VALUE", 31: "MPI_ERR_INFO_NOKEY", 44: "MPI_ERR_UNSUPPORTED_OPERATION",
	48: "MPI_ERR_KEYVAL", 33: "MPI_ERR_NAME", 34: "MPI_ERR_NO_MEM", 38: "MPI_ERR_PORT", 41: "MPI_ERR_SERVICE",
	42: "MPI_ERR_SPAWN", 45: "MPI_ERR_WIN", 46: "MPI_ERR_BASE", 47: "MPI_ERR_LOCKTYPE",
	49: "MPI_ERR_RMA_CONFLICT", 50: "MPI_ERR_RMA_SYNC", 51: "MPI_ERR_SIZE", 52: "MPI_ERR_DISP",
	53: "MPI_ERR_ASSERT", 55: "MPI_ERR_RMA_RANGE", 56: "MPI_ERR_RMA_ATTACH", 57: "MPI_ERR_RMA_SHARED",
	58: "MPI_ERR_RMA_FLAVOR",
}

// localErr is an error this layer found itself (a bad handle, an
// unsupported function or type): unlike the errors the mpi package
// returns, no error handler has seen it yet.
type localErr struct{ err error }

func (e *localErr) Error() string { return e.err.Error() }
func (e *localErr) Unwrap() error { return e.err }

// newErr makes a localErr of class c for the MPI call fn.
func newErr(c mpi.Class, fn, format string, args ...any) error {
	return &localErr{adi.Errorf(c, fn, format, args...)}
}

// unraised makes an error no error handler has seen this layer's, so that
// done runs the call's handler (MPI_COMM_WORLD's if it has no
// communicator) for it as for the errors this layer finds: those of
// package datatype and of the mpi package's Info objects, and of the mpi
// calls without a communicator (ports, the name service).
func unraised(err error) error {
	var le *localErr
	if err == nil || errors.As(err, &le) {
		return err
	}
	return &localErr{err}
}

// fail runs c's error handler (MPI_COMM_WORLD's for nil) for an error this
// layer found, and returns its code.
func fail(c *mpi.Comm, err error) C.int {
	if c == nil {
		c = mpi.World()
	}
	if mpi.Initialized() && !mpi.Finalized() {
		c.CallErrhandler(err)
	} else {
		// No handler outside MPI_Init..MPI_Finalize: say it here.
		fmt.Fprintf(os.Stderr, "adimpi libmpich: %v\n", err)
	}
	return C.int(codeOf(err))
}

// guard turns a panic in a call's translation into MPI_ERR_INTERN for the
// call fn, so that a bug there fails the call instead of the process; a
// panic with an error of this layer fails the call with that error.
// It also recomputes the C fast path's gate (fastGate) for the C calls
// that follow.
func guard(rc *C.int, fn string) {
	fastGate()
	if p := recover(); p != nil {
		var le *localErr
		if e, ok := p.(error); ok && errors.As(e, &le) {
			*rc = fail(nil, e) // an argument check that panicked (narrow)
			return
		}
		*rc = fail(nil, errorf(16, fn, "internal error in adimpi's libmpich: %v", p))
	}
}

// done is a call's return value: 0, or the code of its error, having run
// c's error handler for an error the mpi package did not raise.
func done(c *mpi.Comm, err error) C.int {
	if err == nil {
		return 0
	}
	var le *localErr
	if errors.As(err, &le) {
		return fail(c, err)
	}
	return C.int(codeOf(err))
}

// codeClass is the MPICH class of an error.
func codeClass(err error) int32 {
	var ce *classErr
	if errors.As(err, &ce) {
		return ce.class
	}
	if c, ok := classCode[mpi.ErrorClass(err)]; ok {
		return c
	}
	return 15
}

// classErr carries an MPICH class that adimpi's classes do not have.
type classErr struct {
	class int32
	msg   string
}

func (e *classErr) Error() string { return e.msg }

// errorf is a localErr of an MPICH class outside adimpi's set.
func errorf(class int32, fn, format string, args ...any) error {
	return &localErr{&classErr{class, fn + ": " + classNames[class] + ": " + fmt.Sprintf(format, args...)}}
}

// Error codes are class | slot<<7, the slot indexing a ring of the last
// messages, so that MPI_Error_string gives the message of the error itself
// and MPI_Error_class recovers the class from any code.
const ringSize = 1024

var ring struct {
	mu   sync.Mutex
	next int32
	code [ringSize]int32
	msg  [ringSize]string
}

func codeOf(err error) int32 {
	class := codeClass(err)
	ring.mu.Lock()
	defer ring.mu.Unlock()
	slot := ring.next%(ringSize-1) + 1
	ring.next++
	code := class | slot<<7
	ring.code[slot], ring.msg[slot] = code, err.Error()
	return code
}

// errorString is the text of an error code.
func errorString(code int32) string {
	if slot := code >> 7; slot > 0 && slot < ringSize {
		ring.mu.Lock()
		defer ring.mu.Unlock()
		if ring.code[slot] == code {
			return ring.msg[slot]
		}
	}
	if n, ok := classNames[code&lastClass]; ok {
		return n
	}
	return fmt.Sprintf("MPI error code %d", code)
}

// adimpi_unsupported is what the stubs of zstubs.c return: the function
// with index i in unsupportedNames fails with MPI_ERR_UNSUPPORTED_OPERATION.
//
//export adimpi_unsupported
func adimpi_unsupported(i C.int) C.int {
	name := "an unknown MPI function"
	if int(i) >= 0 && int(i) < len(unsupportedNames) {
		name = unsupportedNames[i]
	}
	// A program whose error handler returns may never look at the code:
	// say it on standard error, once per function and process.
	if _, seen := unsupportedSeen.LoadOrStore(name, true); !seen {
		fmt.Fprintf(os.Stderr, "adimpi libmpich: %s is not implemented; it returns MPI_ERR_UNSUPPORTED_OPERATION (docs/c-abi.md lists what is)\n", name)
	}
	return fail(nil, errorf(errUnsupported, name, "adimpi's libmpich does not implement %s (docs/c-abi.md lists what it does)", name))
}

// unsupportedSeen holds the names of the unimplemented functions this
// process has called.
var unsupportedSeen sync.Map

// MPICH's C++ bindings (libmpichcxx.so.12) register C++ trampolines for
// user operations, error handlers and attribute callbacks through these
// three functions. adimpi does not call through such trampolines, so the
// object is withdrawn: its later use fails with an invalid-handle error
// instead of calling a C++ function with C arguments, and the registration
// itself fails the way an unsupported function does.

// MPII_Op_set_cxx withdraws a user operation made through the C++ bindings.
//
//export MPII_Op_set_cxx
func MPII_Op_set_cxx(op C.int, proxy unsafe.Pointer) {
	ops.del(int32(op))
	fail(nil, errorf(errUnsupported, "MPI::Op::Init", "adimpi's libmpich does not support user operations of MPI's C++ bindings"))
}

// MPII_Errhandler_set_cxx withdraws an error handler made through the C++
// bindings.
//
//export MPII_Errhandler_set_cxx
func MPII_Errhandler_set_cxx(h C.int, proxy unsafe.Pointer) {
	errhs.del(int32(h))
	fail(nil, errorf(errUnsupported, "MPI::Comm::Create_errhandler", "adimpi's libmpich does not support error handlers of MPI's C++ bindings"))
}

// MPII_Keyval_set_proxy withdraws an attribute key made through the C++
// bindings.
//
//export MPII_Keyval_set_proxy
func MPII_Keyval_set_proxy(k C.int, copyProxy, deleteProxy unsafe.Pointer) {
	keyvals.del(int32(k))
	fail(nil, errorf(errUnsupported, "MPI::Comm::Create_keyval", "adimpi's libmpich does not support attribute keys of MPI's C++ bindings"))
}

// adimpi_unsupported_name is adimpi_unsupported for the internal entry
// points of MPICH's Fortran bindings that abi.c stubs, by the name of the
// MPI function they serve.
//
//export adimpi_unsupported_name
func adimpi_unsupported_name(name *C.char) C.int {
	n := C.GoString(name)
	return fail(nil, errorf(errUnsupported, n, "adimpi's libmpich does not implement %s (docs/c-abi.md lists what it does)", n))
}
