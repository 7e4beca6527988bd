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
	ErrSpawn        = adi.ErrSpawn
	ErrPort         = adi.ErrPort
	ErrService      = adi.ErrService
	ErrName         = adi.ErrName
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

// named attributes err, raised under the MPI call op that the program made
// (by the device, or by a step of the call that named it after itself), to
// op. The class stays, once, with the detail. An error from outside MPI
// becomes an ErrOther of op.
func named(op string, err error) error {
	return restated(op, err, nil, false)
}

// restated is named for the error of a receive: a message it failed on is
// described as the program knows it, the sender by the rank that rank gives
// for the sender's world rank (nil: the world rank), and the tag unless coll
// says the message was a collective's, whose tags are the implementation's
// own.
func restated(op string, err error, rank func(world int) int, coll bool) error {
	if err == nil {
		return nil
	}
	e, ok := err.(*adi.Error)
	if !ok {
		if c, ok := err.(Class); ok {
			return &adi.Error{Class: c, Op: op}
		}
		return &adi.Error{Class: ErrorClass(err), Op: op, Detail: err.Error()}
	}
	if e.Msg == nil {
		if e.Op == op {
			return err
		}
		return e.Restate(op, 0, 0)
	}
	src, tag := e.Msg.Source, e.Msg.Tag
	if rank != nil {
		src = rank(src)
	}
	if coll {
		tag = adi.NoTag
	}
	return e.Restate(op, src, tag)
}
