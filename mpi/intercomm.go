package mpi

import (
	"encoding/binary"
	"slices"

	"github.com/adimpi/adimpi/datatype"
)

// Intercommunicators: two disjoint groups, the local one (Rank, Size,
// Group) and the remote one (RemoteSize, RemoteGroup); point-to-point calls
// on an intercommunicator name ranks of the remote group. The collectives
// on intercommunicators are in intercoll.go; IntercommMerge makes an
// intracommunicator of both groups.

// IsInter reports whether c is an intercommunicator (MPI_Comm_test_inter).
func (c *Comm) IsInter() bool { return c != nil && c.inter }

// RemoteSize is the size of an intercommunicator's remote group (0 for an
// intracommunicator or nil; MPI_Comm_remote_size).
func (c *Comm) RemoteSize() int {
	if c == nil || !c.inter {
		return 0
	}
	return len(c.world)
}

// RemoteGroup returns an intercommunicator's remote group
// (MPI_Comm_remote_group).
func (c *Comm) RemoteGroup() (*Group, error) {
	g, err := c.remoteGroup()
	return g, c.raise(err)
}

// remoteGroup is RemoteGroup without the error handler.
func (c *Comm) remoteGroup() (*Group, error) {
	const op = "MPI_Comm_remote_group"
	if err := checkComm(op, c); err != nil {
		return nil, err
	}
	if !c.inter {
		return nil, errorf(ErrComm, op, "%s is not an intercommunicator", c.name)
	}
	return newGroup(c.world), nil
}

func putInts(v []int) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(x)))
	}
	return b
}

func getInts(b []byte) []int {
	v := make([]int, len(b)/8)
	for i := range v {
		v[i] = int(int64(binary.LittleEndian.Uint64(b[8*i:])))
	}
	return v
}

// exchangeLeaders runs at a group's leader: it swaps msg with the other
// group's leader through send/recv functions and returns the other's.
func exchangeLeaders(sendrecv func(sb, rb []byte) error, msg []byte) ([]byte, error) {
	n := make([]byte, 8)
	if err := sendrecv(putInts([]int{len(msg)}), n); err != nil {
		return nil, err
	}
	other := make([]byte, getInts(n)[0])
	if err := sendrecv(msg, other); err != nil {
		return nil, err
	}
	return other, nil
}

// bcastBytes broadcasts a variable-length message from root over e's
// processes (length first, then data); e must be used for nothing else.
func bcastBytes(e *coll, msg []byte, root int) ([]byte, error) {
	n := putInts([]int{len(msg)})
	if err := e.bcast(n, root); err != nil {
		return nil, err
	}
	if e.rank != root {
		msg = make([]byte, getInts(n)[0])
	}
	if err := e.bcast(msg, root); err != nil {
		return nil, err
	}
	return msg, nil
}

// IntercommCreate makes an intercommunicator between the group of local
// and another, disjoint group (MPI_Intercomm_create). It is collective over
// local and over the other group's communicator. localLeader is a rank of
// local; peer is a communicator containing both leaders (only significant
// at localLeader), remoteLeader the other leader's rank in peer, and tag the
// tag the leaders use on peer for their exchange.
func IntercommCreate(local *Comm, localLeader int, peer *Comm, remoteLeader, tag int) (*Comm, error) {
	n, err := intercommCreate(local, localLeader, peer, remoteLeader, tag)
	return n, local.raise(err)
}

// intercommCreate is IntercommCreate without the error handler.
func intercommCreate(local *Comm, localLeader int, peer *Comm, remoteLeader, tag int) (*Comm, error) {
	const op = "MPI_Intercomm_create"
	r, err := collStart(op, local)
	if err != nil {
		return nil, err
	}
	if localLeader < 0 || localLeader >= local.Size() {
		return nil, errorf(ErrRank, op, "local leader %d is out of range [0, %d)", localLeader, local.Size())
	}
	leader := local.rank == localLeader
	if leader {
		if err := checkComm(op, peer); err != nil {
			return nil, err
		}
		if err := checkPeer(op, peer, remoteLeader, false); err != nil {
			return nil, err
		}
		if err := checkTag(op, tag, false); err != nil {
			return nil, err
		}
	}
	mask := r.ids.snapshot()
	e := local.newColl(r, op)
	if err := e.allreduce(mask, reducer{true, builtin(opBand, uint64Type())}, 8); err != nil {
		return nil, err
	}
	// The leaders swap (mask, group) and AND the masks.
	var msg []byte
	if leader {
		other, err := exchangeLeaders(func(sb, rb []byte) error {
			_, err := SendrecvBuf(peer, bytesBuf(sb), remoteLeader, tag, bytesBuf(rb), remoteLeader, tag)
			return err
		}, append(slices.Clone(mask), putInts(local.world)...))
		if err != nil {
			return nil, err
		}
		if len(other) < len(mask) {
			return nil, errorf(ErrOther, op, "the remote leader sent %d bytes", len(other))
		}
		for i := range mask {
			other[i] &= mask[i]
		}
		msg = other
	}
	msg, err = bcastBytes(local.newColl(r, op), msg, localLeader)
	if err != nil {
		return nil, err
	}
	pair := lowest(msg[:len(mask)])
	if pair < 0 {
		return nil, errorf(ErrOther, op, "no free context id: %d communicators are alive", idupLo-2)
	}
	r.ids.take(pair)
	remote := getInts(msg[len(mask):])
	for _, w := range remote {
		if _, ok := local.local[w]; ok {
			return nil, errorf(ErrComm, op, "the groups overlap (world rank %d is in both)", w)
		}
	}
	c := newComm(local.name+".inter", uint32(2*pair), local.rank, remote)
	c.owned, c.inter, c.lworld = true, true, slices.Clone(local.world)
	noteComm(c)
	c.inheritErrhandler(local)
	return c, nil
}

// IntercommMerge makes an intracommunicator of both groups of an
// intercommunicator (MPI_Intercomm_merge). The group whose processes pass
// high = false comes first; if both groups pass the same value, the group
// whose leader (rank 0) has the lower world rank comes first. It is
// collective over both groups.
func (c *Comm) IntercommMerge(high bool) (*Comm, error) {
	n, err := c.intercommMerge(high)
	return n, c.raise(err)
}

// intercommMerge is IntercommMerge without the error handler.
func (c *Comm) intercommMerge(high bool) (*Comm, error) {
	const op = "MPI_Intercomm_merge"
	r, err := current(op)
	if err != nil {
		return nil, err
	}
	if err := checkComm(op, c); err != nil {
		return nil, err
	}
	if !c.inter {
		return nil, errorf(ErrComm, op, "%s is not an intercommunicator", c.name)
	}
	// The local group's collectives and the leaders' exchange share the
	// intercommunicator's collective context: their peers never overlap.
	seqColl := func(world []int, rank int) *coll {
		e := c.newColl(r, op)
		e.world, e.rank, e.size = world, rank, len(world)
		return e
	}
	mask := r.ids.snapshot()
	if err := seqColl(c.lworld, c.rank).allreduce(mask, reducer{true, builtin(opBand, uint64Type())}, 8); err != nil {
		return nil, err
	}
	hi := 0
	if high {
		hi = 1
	}
	x := seqColl(c.world, c.rank) // leader exchange: peer 0 is the remote leader
	var msg []byte
	if c.rank == 0 {
		other, err := exchangeLeaders(func(sb, rb []byte) error { return x.sendrecv(0, sb, 0, rb) }, append(slices.Clone(mask), putInts([]int{hi})...))
		if err != nil {
			return nil, err
		}
		for i := range mask {
			other[i] &= mask[i]
		}
		msg = other
	}
	msg, err = bcastBytes(seqColl(c.lworld, c.rank), msg, 0)
	if err != nil {
		return nil, err
	}
	pair := lowest(msg[:len(mask)])
	if pair < 0 {
		return nil, errorf(ErrOther, op, "no free context id: %d communicators are alive", idupLo-2)
	}
	r.ids.take(pair)
	remoteHigh := getInts(msg[len(mask):])[0] == 1
	localFirst := !high && remoteHigh
	if high == remoteHigh {
		localFirst = c.lworld[0] < c.world[0]
	}
	var world []int
	rank := c.rank
	if localFirst {
		world = slices.Concat(c.lworld, c.world)
	} else {
		world = slices.Concat(c.world, c.lworld)
		rank += len(c.world)
	}
	n := newComm(c.name+".merge", uint32(2*pair), rank, world)
	n.owned = true
	n.inheritErrhandler(c)
	return n, nil
}

func bytesBuf(b []byte) Buffer { return Buffer{Mem: b, Count: len(b), Type: datatype.Uint8} }

func uint64Type() *datatype.Type { return datatype.Uint64 }
