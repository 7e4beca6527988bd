//go:build cgo

package main

/*
#include <stdint.h>
*/
import "C"

import (
	"sync"

	"github.com/adimpi/adimpi/mpi"
)

// Communicator info hints (MPI_Comm_set_info, MPI_Comm_get_info). adimpi
// acts on none of them, and MPI lets an implementation ignore hints; it
// keeps every key a program gives, so that MPI_Comm_get_info returns what
// MPI_Comm_dup_with_info, MPI_Comm_idup_with_info and MPI_Comm_set_info set
// (set_info adds to and replaces the keys already held, as MPICH does), and
// MPI_Comm_dup and MPI_Comm_idup copy the hints of the communicator they
// duplicate. Other constructors (split, create, topologies) start without
// hints.

// commHints holds each communicator's hints: *mpi.Comm to *mpi.Info, for
// the communicators that have any.
var commHints sync.Map

// setHints makes a copy of info n's hints (none for a nil info).
func setHints(n *mpi.Comm, info *mpi.Info) error {
	if info == nil {
		return nil
	}
	d, err := info.Dup()
	if err != nil {
		return err
	}
	commHints.Store(n, d)
	return nil
}

// copyHints gives n a copy of c's hints (MPI_Comm_dup).
func copyHints(c, n *mpi.Comm) error {
	if v, ok := commHints.Load(c); ok {
		return setHints(n, v.(*mpi.Info))
	}
	return nil
}

// dropHints forgets a freed communicator's hints.
func dropHints(c *mpi.Comm) { commHints.Delete(c) }

// xComm_get_info returns a new info object holding c's hints.
func xComm_get_info(c *mpi.Comm, out *C.int) error {
	i := mpi.NewInfo()
	if v, ok := commHints.Load(c); ok {
		d, err := v.(*mpi.Info).Dup()
		if err != nil {
			return unraised(err)
		}
		i = d
	}
	*out = C.int(infos.add(i))
	return nil
}

// xComm_set_info adds info's keys to c's hints, replacing the values of
// keys c already holds.
func xComm_set_info(c *mpi.Comm, h int32) error {
	const fn = "MPI_Comm_set_info"
	info, err := infoOf(fn, h)
	if err != nil {
		return err
	}
	return unraised(mergeHints(c, info))
}

// mergeHints adds info's keys to c's hints.
func mergeHints(c *mpi.Comm, info *mpi.Info) error {
	n, err := info.NKeys()
	if err != nil {
		return err
	}
	held := mpi.NewInfo()
	if v, ok := commHints.Load(c); ok {
		if held, err = v.(*mpi.Info).Dup(); err != nil {
			return err
		}
	}
	for k := range n {
		key, err := info.NthKey(k)
		if err != nil {
			return err
		}
		val, _, err := info.Get(key)
		if err != nil {
			return err
		}
		if err := held.Set(key, val); err != nil {
			return err
		}
	}
	commHints.Store(c, held)
	return nil
}
