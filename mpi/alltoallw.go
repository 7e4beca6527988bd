package mpi

import "github.com/adimpi/adimpi/datatype"

// alltoallwPlan checks MPI_Alltoallw's arguments: per peer, a count, a byte
// displacement into the memory and a datatype, on both sides.
func alltoallwPlan(op string, c *Comm, send []byte, scounts, sdispls []int, stypes []*datatype.Type,
	recv []byte, rcounts, rdispls []int, rtypes []*datatype.Type) (*plan, error) {
	p, err := newPlanAny(op, c)
	if err != nil {
		return nil, err
	}
	n := c.Size()
	if c.inter {
		n = c.RemoteSize() // one block per remote process
	}
	blocks := func(what string, mem []byte, counts, displs []int, types []*datatype.Type) ([]Buffer, []int, error) {
		if len(counts) != n || len(displs) != n || len(types) != n {
			return nil, nil, errorf(ErrArg, op, "%s counts, displacements and types must each have %d entries (got %d, %d, %d)",
				what, n, len(counts), len(displs), len(types))
		}
		bufs, sizes := make([]Buffer, n), make([]int, n)
		for i := range bufs {
			if displs[i] < 0 || displs[i] > len(mem) {
				return nil, nil, errorf(ErrArg, op, "%s displacement %d for rank %d is outside the %d-byte buffer", what, displs[i], i, len(mem))
			}
			bufs[i] = Typed(mem[displs[i]:], counts[i], types[i])
			if err := checkBuffer(op, bufs[i]); err != nil {
				return nil, nil, err
			}
			sizes[i] = bufs[i].Size()
		}
		return bufs, sizes, nil
	}
	sb, ssz, err := blocks("send", send, scounts, sdispls, stypes)
	if err != nil {
		return nil, err
	}
	rb, rsz, err := blocks("receive", recv, rcounts, rdispls, rtypes)
	if err != nil {
		return nil, err
	}
	p.run = func(e *coll) error {
		soff, roff := make([]int, n+1), make([]int, n+1)
		for i := 0; i < n; i++ {
			soff[i+1], roff[i+1] = soff[i]+ssz[i], roff[i]+rsz[i]
		}
		s, r := scratch(soff[n]), scratch(roff[n])
		defer release(s, r)
		for i := 0; i < n; i++ {
			sb[i].CopyOut(0, s[soff[i]:soff[i+1]])
		}
		var err error
		if c.inter {
			err = interAlltoallv(c, e, s, soff[:n], ssz, r, roff[:n], rsz)
		} else {
			err = e.alltoallv(s, soff[:n], ssz, r, roff[:n], rsz)
		}
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			rb[i].CopyIn(0, r[roff[i]:roff[i+1]])
		}
		return nil
	}
	return p, nil
}

// Alltoallw sends to rank j scounts[j] elements of stypes[j] starting at
// byte sdispls[j] of send, and receives from rank i rcounts[i] elements of
// rtypes[i] at byte rdispls[i] of recv (MPI_Alltoallw): the most general
// all-to-all, one datatype per peer.
func Alltoallw(c *Comm, send []byte, scounts, sdispls []int, stypes []*datatype.Type,
	recv []byte, rcounts, rdispls []int, rtypes []*datatype.Type) error {
	return c.planNow(alltoallwPlan("MPI_Alltoallw", c, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes))
}

// Ialltoallw starts an Alltoallw (MPI_Ialltoallw).
func Ialltoallw(c *Comm, send []byte, scounts, sdispls []int, stypes []*datatype.Type,
	recv []byte, rcounts, rdispls []int, rtypes []*datatype.Type) (*Request, error) {
	return c.planStart(alltoallwPlan("MPI_Ialltoallw", c, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes))
}
