package adi

import "fmt"

// Class is an MPI error class. Each class is itself an error, so the sentinel
// values below can be matched with errors.Is against any error a call
// returns.
type Class int

// The MPI error classes.
const (
	ErrBuffer Class = iota + 1
	ErrCount
	ErrType
	ErrTag
	ErrComm
	ErrRank
	ErrRequest
	ErrRoot
	ErrGroup
	ErrOp
	ErrTopology
	ErrDims
	ErrArg
	ErrUnknown
	ErrTruncate
	ErrOther
	ErrIntern
	ErrInStatus
	ErrPending
	ErrNotSupported
)

var classNames = map[Class]string{
	ErrBuffer: "MPI_ERR_BUFFER", ErrCount: "MPI_ERR_COUNT", ErrType: "MPI_ERR_TYPE",
	ErrTag: "MPI_ERR_TAG", ErrComm: "MPI_ERR_COMM", ErrRank: "MPI_ERR_RANK",
	ErrRequest: "MPI_ERR_REQUEST", ErrRoot: "MPI_ERR_ROOT", ErrGroup: "MPI_ERR_GROUP",
	ErrOp: "MPI_ERR_OP", ErrTopology: "MPI_ERR_TOPOLOGY", ErrDims: "MPI_ERR_DIMS",
	ErrArg: "MPI_ERR_ARG", ErrUnknown: "MPI_ERR_UNKNOWN", ErrTruncate: "MPI_ERR_TRUNCATE",
	ErrOther: "MPI_ERR_OTHER", ErrIntern: "MPI_ERR_INTERN", ErrInStatus: "MPI_ERR_IN_STATUS",
	ErrPending: "MPI_ERR_PENDING", ErrNotSupported: "MPI_ERR_UNSUPPORTED_OPERATION",
}

// Error is the class's MPI name.
func (c Class) Error() string {
	if n, ok := classNames[c]; ok {
		return n
	}
	return fmt.Sprintf("MPI error class %d", int(c))
}

// Error is an error of a given class raised by a named MPI call.
type Error struct {
	Class  Class
	Op     string // the call, e.g. "MPI_Send"
	Detail string // what was wrong, naming the bad value
}

// Error formats the error as "MPI_Send: MPI_ERR_RANK: dest 7 out of range [0,4)".
func (e *Error) Error() string {
	if e.Op == "" {
		return e.Class.Error() + ": " + e.Detail
	}
	return e.Op + ": " + e.Class.Error() + ": " + e.Detail
}

// Unwrap gives the class, so errors.Is(err, ErrRank) works.
func (e *Error) Unwrap() error { return e.Class }

// Errorf builds an *Error of class c for call op.
func Errorf(c Class, op, format string, args ...any) error {
	return &Error{Class: c, Op: op, Detail: fmt.Sprintf(format, args...)}
}
