package mpi

import (
	"bytes"
	"slices"

	"github.com/adimpi/adimpi/mpi/internal/interjob"
)

// descLen is the room for one process's inter-job address (its
// interjob.Peer, encoded) in the exchanges below.
const descLen = 192

// joinGroups makes the intercommunicator between the processes of local
// (an intracommunicator) and a group they meet through root's talk: every
// spawn, accept, connect and join ends here. It is collective over local.
// talk, called at root only, sends this group's half of the exchange to
// the other group's root and returns the other half: the other group's
// free context-id mask and its processes' inter-job addresses, in rank
// order. Both roots AND the masks and take the lowest pair, so both groups
// agree on the new communicator's contexts without another round.
func joinGroups(op string, local *Comm, root int, talk func(msg []byte) ([]byte, error), name string) (*Comm, error) {
	r, err := collStart(op, local)
	if err != nil {
		return nil, err
	}
	if local.inter {
		return nil, errorf(ErrComm, op, "%s is an intercommunicator; want an intracommunicator", local.name)
	}
	if root < 0 || root >= local.Size() {
		return nil, errorf(ErrRoot, op, "root %d is out of range [0, %d)", root, local.Size())
	}
	n, err := r.joinNet(op)
	if err != nil {
		return nil, err
	}
	mask := r.ids.snapshot()
	if err := local.newColl(r, op).allreduce(mask, reducer{true, builtin(opBand, uint64Type())}, 8); err != nil {
		return nil, err
	}
	mine := make([]byte, descLen)
	copy(mine, n.Self().Encode())
	descs := make([]byte, descLen*local.Size())
	if err := local.newColl(r, op).allgather(mine, descs); err != nil {
		return nil, err
	}
	// The root's verdict goes to its group first: [1, agreed mask, the
	// other group's addresses], or [0, what went wrong].
	var msg []byte
	if local.rank == root {
		other, err := talk(append(slices.Clone(mask), descs...))
		switch {
		case err != nil:
			msg = append([]byte{0}, err.Error()...)
		case len(other) < len(mask) || (len(other)-len(mask))%descLen != 0:
			msg = append([]byte{0}, errorf(ErrOther, op, "the other group's root sent %d bytes", len(other)).Error()...)
		default:
			for i := range mask {
				other[i] &= mask[i]
			}
			msg = append([]byte{1}, other...)
		}
	}
	msg, err = bcastBytes(local.newColl(r, op), msg, root)
	if err != nil {
		return nil, err
	}
	if len(msg) == 0 || msg[0] != 1 {
		return nil, errorf(ErrPort, op, "%s", msg[min(1, len(msg)):])
	}
	msg = msg[1:]
	pair := lowest(msg[:len(mask)])
	if pair < 0 {
		return nil, errorf(ErrOther, op, "no context id is free in both groups")
	}
	remote, err := learnPeers(r, n, msg[len(mask):])
	if err != nil {
		return nil, errorf(ErrOther, op, "%v", err)
	}
	if _, err := learnPeers(r, n, descs); err != nil {
		return nil, errorf(ErrOther, op, "%v", err)
	}
	r.ids.take(pair)
	c := newComm(name, uint32(2*pair), local.rank, remote)
	c.owned, c.inter, c.lworld = true, true, slices.Clone(local.world)
	noteComm(c)
	c.inheritErrhandler(local)
	return c, nil
}

// learnPeers tells the inter-job channel how to reach each process of a
// list of encoded addresses and returns their numbers, in order.
func learnPeers(r *runtime, n *interjob.Net, descs []byte) ([]int, error) {
	idx := make([]int, 0, len(descs)/descLen)
	r.mu.Lock()
	defer r.mu.Unlock()
	for off := 0; off+descLen <= len(descs); off += descLen {
		d := descs[off : off+descLen]
		if i := bytes.IndexByte(d, 0); i >= 0 {
			d = d[:i]
		}
		p, err := interjob.ParsePeer(string(d))
		if err != nil {
			return nil, err
		}
		idx = append(idx, n.Learn(p))
	}
	return idx, nil
}
