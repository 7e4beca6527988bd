package mpi

import (
	"strconv"
	"sync/atomic"

	"github.com/adimpi/adimpi/internal/goid"
)

// ThreadLevel is an MPI thread support level (MPI_THREAD_SINGLE, ...): how
// freely the program's threads, in Go its goroutines, may call MPI.
type ThreadLevel int

// The thread levels, in increasing order of support.
const (
	ThreadSingle     ThreadLevel = iota // MPI_THREAD_SINGLE: one thread only
	ThreadFunneled                      // MPI_THREAD_FUNNELED: only the thread that called Init calls MPI
	ThreadSerialized                    // MPI_THREAD_SERIALIZED: one call at a time, from any thread
	ThreadMultiple                      // MPI_THREAD_MULTIPLE: any thread, any time
)

// String is the level's MPI name.
func (l ThreadLevel) String() string {
	switch l {
	case ThreadSingle:
		return "MPI_THREAD_SINGLE"
	case ThreadFunneled:
		return "MPI_THREAD_FUNNELED"
	case ThreadSerialized:
		return "MPI_THREAD_SERIALIZED"
	case ThreadMultiple:
		return "MPI_THREAD_MULTIPLE"
	}
	return "ThreadLevel(" + strconv.Itoa(int(l)) + ")"
}

// provided is the level adimpi gives every program: every entry into a
// device holds the runtime's one lock, waits sleep without it, and matching
// (including Mprobe's claim) happens under it, so any goroutine may call
// MPI at any time.
const provided = ThreadMultiple

// InitThread starts MPI like Init (MPI_Init_thread) and returns the thread
// level provided, which is always ThreadMultiple whatever required is: the
// runtime serialises its device calls internally. required outside
// [ThreadSingle, ThreadMultiple] is an ErrArg error.
func InitThread(required ThreadLevel) (ThreadLevel, error) {
	if required < ThreadSingle || required > ThreadMultiple {
		return ThreadSingle, errorf(ErrArg, "MPI_Init_thread", "required thread level %d is not one of ThreadSingle..ThreadMultiple", int(required))
	}
	if err := Init(); err != nil {
		return ThreadSingle, err
	}
	return provided, nil
}

// QueryThread returns the thread level MPI provides (MPI_Query_thread):
// ThreadMultiple, however MPI was started.
func QueryThread() (ThreadLevel, error) {
	if _, err := current("MPI_Query_thread"); err != nil {
		return ThreadSingle, err
	}
	return provided, nil
}

// IsThreadMain reports whether the calling goroutine is the one that
// called Init, InitWith or InitThread (MPI_Is_thread_main). Go has no
// thread identity a program sees; the goroutine is MPI's "thread" here.
func IsThreadMain() (bool, error) {
	if _, err := current("MPI_Is_thread_main"); err != nil {
		return false, err
	}
	return goid.ID() == mainGoroutine.Load(), nil
}

// mainGoroutine is the id of the goroutine that started MPI (Init).
var mainGoroutine atomic.Int64
