package datatype

import (
	"errors"
	"fmt"
)

// The error classes of this package. Every error the package returns wraps
// exactly one of them, so callers test with errors.Is. Package mpi maps them
// to its classes of the same names (MPI_ERR_TYPE, MPI_ERR_ARG, MPI_ERR_COUNT);
// package datatype cannot use adi's classes because adi imports datatype.
var (
	// ErrType: a nil, freed, uncommitted or otherwise unusable datatype.
	ErrType = errors.New("MPI_ERR_TYPE")
	// ErrArg: an invalid argument other than a count or a datatype, such as
	// mismatched slice lengths, an out-of-range window or a short buffer.
	ErrArg = errors.New("MPI_ERR_ARG")
	// ErrCount: a negative count or block length, or sizes that overflow.
	ErrCount = errors.New("MPI_ERR_COUNT")
)

// Error is an error raised by a datatype operation. It wraps its Class, one
// of ErrType, ErrArg and ErrCount.
type Error struct {
	Class  error  // ErrType, ErrArg or ErrCount
	Op     string // the MPI call, e.g. "MPI_Type_vector"
	Detail string // what was wrong
}

// Error formats the error as "MPI_Type_vector: MPI_ERR_COUNT: count -1 is negative".
func (e *Error) Error() string { return e.Op + ": " + e.Class.Error() + ": " + e.Detail }

// Unwrap returns the error's class.
func (e *Error) Unwrap() error { return e.Class }

// Is reports whether target is an error class with the same MPI name as this
// error's class, so that errors.Is(err, mpi.ErrType) holds for a datatype
// error of class ErrType.
func (e *Error) Is(target error) bool { return target != nil && target.Error() == e.Class.Error() }

func errorf(class error, op, format string, args ...any) error {
	return &Error{Class: class, Op: op, Detail: fmt.Sprintf(format, args...)}
}

// limit bounds every byte quantity (sizes, displacements, bounds) a type may
// have, so that sums of a few of them never overflow an int.
const limit = 1 << 60

// calc does checked arithmetic: once a result leaves [-limit, limit] it
// records the overflow and the caller reports it.
type calc struct{ bad bool }

func (c *calc) ok(v int) int {
	if v > limit || v < -limit {
		c.bad = true
		return 0
	}
	return v
}

func (c *calc) add(a, b int) int { return c.ok(a + b) }

func (c *calc) mul(a, b int) int {
	if a == 0 || b == 0 {
		return 0
	}
	if a > limit || a < -limit || b > limit || b < -limit {
		c.bad = true
		return 0
	}
	p := a * b
	if p/b != a {
		c.bad = true
		return 0
	}
	return c.ok(p)
}
