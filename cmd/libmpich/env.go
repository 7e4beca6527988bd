//go:build cgo

package main

/*
#include <stdint.h>
#include <string.h>
*/
import "C"

import (
	"unsafe"

	"github.com/adimpi/adimpi/mpi"
)

// C programs get MPI's default error handler, MPI_ERRORS_ARE_FATAL, on the
// predefined communicators (Go programs get ErrorsReturn).
func fatalDefaults() {
	_ = mpi.World().SetErrhandler(mpi.ErrorsAreFatal)
	_ = mpi.Self().SetErrhandler(mpi.ErrorsAreFatal)
}

// xInit ignores argc and argv: the launcher passes everything through the
// environment (PMI-1), so there is nothing to strip from the command line.
func xInit(argc, argv unsafe.Pointer) error {
	if err := mpi.Init(); err != nil {
		return err
	}
	fatalDefaults()
	fastSetup(mpi.ThreadSingle)
	return nil
}

func xInit_thread(argc, argv unsafe.Pointer, required int, provided *C.int) error {
	l, err := mpi.InitThread(mpi.ThreadLevel(required))
	if err != nil {
		return err
	}
	fatalDefaults()
	if fastSetup(mpi.ThreadLevel(required)) {
		l = fast.level
	}
	*provided = C.int(l)
	return nil
}

func xFinalize() error {
	fastOff()
	return mpi.Finalize()
}

func xInitialized(flag *C.int) error {
	*flag = cbool(mpi.Initialized())
	return nil
}

func xFinalized(flag *C.int) error {
	*flag = cbool(mpi.Finalized())
	return nil
}

func xAbort(c *mpi.Comm, code int) error { return mpi.Abort(c, code) }

func xQuery_thread(p *C.int) error {
	l, err := mpi.QueryThread()
	if err == nil && fast.dev != nil {
		l = fast.level
	}
	*p = C.int(l)
	return err
}

func xIs_thread_main(flag *C.int) error {
	ok, err := mpi.IsThreadMain()
	*flag = cbool(ok)
	return err
}

func xComm_rank(c *mpi.Comm, rank *C.int) error {
	*rank = C.int(c.Rank())
	return nil
}

func xComm_size(c *mpi.Comm, size *C.int) error {
	*size = C.int(c.Size())
	return nil
}

// putString copies s into the C buffer dst of max bytes (with its NUL) and
// stores its length.
func putString(s string, dst *C.char, max int, n *C.int) {
	if len(s) > max-1 {
		s = s[:max-1]
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(dst)), len(s)+1)
	copy(out, s)
	out[len(s)] = 0
	if n != nil {
		*n = C.int(len(s))
	}
}

// MPICH's string limits (mpi.h).
const (
	maxProcessorName = 128
	maxLibraryVer    = 8192
	maxErrorString   = 512
	maxObjectName    = 128
	maxInfoKey       = 255
	maxInfoVal       = 1024
)

func xGet_processor_name(name *C.char, n *C.int) error {
	putString(mpi.ProcessorName(), name, maxProcessorName, n)
	return nil
}

func xGet_version(v, sv *C.int) error {
	a, b := mpi.GetVersion()
	*v, *sv = C.int(a), C.int(b)
	return nil
}

func xGet_library_version(s *C.char, n *C.int) error {
	putString(mpi.GetLibraryVersion()+" (adimpi libmpich, MPICH ABI)", s, maxLibraryVer, n)
	return nil
}

func xError_string(code int, s *C.char, n *C.int) error {
	putString(errorString(int32(code)), s, maxErrorString, n)
	return nil
}

func xError_class(code int, class *C.int) error {
	*class = C.int(int32(code) & lastClass)
	return nil
}

func xPcontrol(level int) error { return mpi.Pcontrol(level) }

// MPI_Wtime is MPI_Wtime for C programs (a double or MPI_Aint result, so written by hand).
//
//export MPI_Wtime
func MPI_Wtime() C.double { return C.double(mpi.Wtime()) }

// PMPI_Wtime is MPI_Wtime for C programs (a double or MPI_Aint result, so written by hand).
//
//export PMPI_Wtime
func PMPI_Wtime() C.double { return C.double(mpi.Wtime()) }

// MPI_Wtick is MPI_Wtick for C programs (a double or MPI_Aint result, so written by hand).
//
//export MPI_Wtick
func MPI_Wtick() C.double { return C.double(mpi.Wtick()) }

// PMPI_Wtick is MPI_Wtick for C programs (a double or MPI_Aint result, so written by hand).
//
//export PMPI_Wtick
func PMPI_Wtick() C.double { return C.double(mpi.Wtick()) }

// MPI_Aint_add is MPI_Aint_add for C programs (a double or MPI_Aint result, so written by hand).
//
//export MPI_Aint_add
func MPI_Aint_add(base, disp C.long) C.long { return base + disp }

// PMPI_Aint_add is MPI_Aint_add for C programs (a double or MPI_Aint result, so written by hand).
//
//export PMPI_Aint_add
func PMPI_Aint_add(base, disp C.long) C.long { return base + disp }

// MPI_Aint_diff is MPI_Aint_diff for C programs (a double or MPI_Aint result, so written by hand).
//
//export MPI_Aint_diff
func MPI_Aint_diff(a, b C.long) C.long { return a - b }

// PMPI_Aint_diff is MPI_Aint_diff for C programs (a double or MPI_Aint result, so written by hand).
//
//export PMPI_Aint_diff
func PMPI_Aint_diff(a, b C.long) C.long { return a - b }
