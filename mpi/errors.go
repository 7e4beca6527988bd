package mpi

import (
	"errors"

	"github.com/adimpi/adimpi/adi"
)

// Class is an MPI error class; every error a call returns carries one.
type Class = adi.Class

// Error is the error type of MPI calls: a class, the call and the bad value.
type Error = adi.Error

// The MPI error classes, testable with errors.Is(err, mpi.ErrRank).
const (
	ErrBuffer       = adi.ErrBuffer
	ErrCount        = adi.ErrCount
	ErrType         = adi.ErrType
	ErrTag          = adi.ErrTag
	ErrComm         = adi.ErrComm
	ErrRank         = adi.ErrRank
	ErrRequest      = adi.ErrRequest
	ErrRoot         = adi.ErrRoot
	ErrGroup        = adi.ErrGroup
	ErrOp           = adi.ErrOp
	ErrTopology     = adi.ErrTopology
	ErrDims         = adi.ErrDims
	ErrArg          = adi.ErrArg
	ErrUnknown      = adi.ErrUnknown
	ErrTruncate     = adi.ErrTruncate
	ErrOther        = adi.ErrOther
	ErrIntern       = adi.ErrIntern
	ErrInStatus     = adi.ErrInStatus
	ErrPending      = adi.ErrPending
	ErrNotSupported = adi.ErrNotSupported
)

// ErrorClass returns the MPI error class an error carries (0 for nil, and
// ErrOther for an error from outside MPI).
func ErrorClass(err error) Class {
	if err == nil {
		return 0
	}
	var c Class
	if errors.As(err, &c) {
		return c
	}
	for _, c := range []Class{ErrType, ErrArg, ErrCount} { // datatype's classes
		if errors.Is(err, c) {
			return c
		}
	}
	return ErrOther
}

func errorf(c Class, op, format string, args ...any) error {
	return adi.Errorf(c, op, format, args...)
}

// named attributes an error a device raised to the MPI call op.
func named(op string, err error) error {
	var e *adi.Error
	if errors.As(err, &e) && e.Op != op {
		return &adi.Error{Class: e.Class, Op: op, Detail: e.Detail}
	}
	return err
}
