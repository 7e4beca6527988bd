package via

import (
	"sync/atomic"
	"unsafe"
)

// This file opens the receive queues of the VIs connected on this host to
// a fast path written in C (cmd/libmpich): a C program's small blocking
// sends and receives do themselves what the inline doorbell and
// RecvDone do for an eager message, without calling into Go. A send is
// the NIC's execution of a send descriptor, done by the caller as the
// inline doorbell does: it takes the peer's oldest posted receive
// descriptor (the slot at the head this VI keeps of the peer's queue),
// copies the MPI header and the data into the buffer the descriptor's
// cached segment names (which lies in the peer's host memory), and writes
// the descriptor's completion into its slot — length, immediate data,
// status last — as execute does. A receive is RecvDone, the device's
// arrive and its repost of the buffer at once: it takes the completed
// descriptor at the head of its own queue and posts the same descriptor
// again at the tail, which, with every buffer posted, is the very slot
// it came from. Every counter involved is the Go side's own, read and
// moved in place (FastLink), so a message the C side did not take is
// RecvDone's next one, as if the C side had never looked.

// The encoding of a receive queue and of an eager message, for C code to
// check its copy against: the VI header's bytes, a slot's bytes, the
// offsets in a slot of its completion and cached segments, the MPI
// header's bytes, the eager message's type and a completion's status.
var FastEncoding = [...]uint32{viHdrSize, slotSize, slotComp, slotSeg0, hdrSize, mEager, StatusDone}

// FastLink is the link to one peer on this host as C code sees it. The
// first group is in the shared segments (outside Go's heap); VI and Peer
// are in Go's heap and the caller must pin them (runtime.Pinner) for as
// long as C code keeps the pointers into them.
type FastLink struct {
	PeerRQ      uintptr // the peer VI's receive-queue header in its segment, as mapped here
	PeerRQLen   uint32  // its slots
	PeerHost    uintptr // the peer's host memory as mapped here
	PeerHostVA  uint64  // where it starts in the peer's process
	PeerHostLen uint64
	PeerApp     uintptr // the peer's application doorbell (u32 futex); its sleepers at FastAppSleep from the segment's
	PeerNIC     uintptr // the peer NIC's doorbell (u32 futex); the engine's sleep word follows it
	RQ          uintptr // my VI's receive-queue header in my segment
	RQLen       uint32

	VI, Peer unsafe.Pointer // to pin
	// In VI: the head and tail it keeps of the peer's queue, RecvDone's
	// count, and the posted receive descriptors' ring: its length, head
	// and count (ints). In Peer: the device's credits and owed (ints).
	RQHead, RQTail, RQApp, RingLen, RingHead, RingN, Credits, Owed unsafe.Pointer
}

// fastPeer reports whether C code may complete vi's peer's receive
// descriptors as the inline doorbell does: vi is connected to a VI on
// this host whose descriptors are cached in their slots (AT2 or AT3 with
// desccache on) and whose receive queue reports to no CQ, so that a
// completion is the slot's alone and not also a CQ entry, which only the
// Go side appends. A VI's CQs are fixed when it is created, before a peer
// can connect to it, so the answer holds for the connection's life and
// the C side need not read the peer's VI header on every send (a cache
// line its owner writes on every repost).
func (vi *VI) fastPeer() bool {
	pv := vi.peer
	if vi.net != nil || pv == nil || pv.o.AT == AT1 || !pv.o.DescCache {
		return false
	}
	return atomic.LoadUint32(pv.u32(pv.viOff(vi.peerVI)+20)) == 0
}

// FastAppSleep is the distance from a segment's application doorbell to
// the count of its sleepers.
const FastAppSleep = offAppSleep - offAppBell

// FastShape is the device's eager limit and credits per peer.
func (d *Device) FastShape() (eager, credits int) { return d.eager, d.credits }

// FastLink returns the link to rank for the C fast path, false when there
// is none: rank is this process, runs on another host, its receive
// queue's descriptors are not cached in its slots in the form this
// process's NIC executes them (AT2 or AT3 with desccache on, host memory),
// or its receive queue reports to a CQ (fastPeer).
func (d *Device) FastLink(rank int) (FastLink, bool) {
	if rank == d.rank || rank < 0 || rank >= len(d.peers) {
		return FastLink{}, false
	}
	p := d.peers[rank]
	vi := p.vi
	pv := vi.peer
	n := d.nic
	if !vi.fastPeer() || pv.hostVA == 0 || n.o.AT == AT1 || !n.o.DescCache {
		return FastLink{}, false
	}
	base := func(v *view) uintptr { return uintptr(unsafe.Pointer(&v.seg.Mem[0])) }
	ring := &vi.recvPosted
	return FastLink{
		PeerRQ: base(pv) + uintptr(pv.viOff(vi.peerVI)), PeerRQLen: pv.lay.rqLen,
		PeerHost: base(pv) + uintptr(pv.lay.host), PeerHostVA: pv.hostVA, PeerHostLen: uint64(pv.lay.total - pv.lay.host),
		PeerApp: base(pv) + offAppBell, PeerNIC: base(pv) + offNICBell,
		RQ: base(n.self) + uintptr(n.self.viOff(vi.id)), RQLen: n.lay.rqLen,
		VI: unsafe.Pointer(vi), Peer: unsafe.Pointer(p),
		RQHead: unsafe.Pointer(&vi.rqHead), RQTail: unsafe.Pointer(&vi.rqTail), RQApp: unsafe.Pointer(&vi.rqApp),
		RingLen:  unsafe.Add(unsafe.Pointer(&ring.d), unsafe.Sizeof(uintptr(0))),
		RingHead: unsafe.Pointer(&ring.head), RingN: unsafe.Pointer(&ring.n),
		Credits: unsafe.Pointer(&p.credits), Owed: unsafe.Pointer(&p.owed),
	}, true
}

// FastSettle does at once what the next Progress would do first and
// what, left undone, would keep the fast path closed until then: it posts
// the receive buffers emptied again (a receive on the fast path takes a
// message only with every buffer posted) and takes back the send
// descriptors the NIC has completed (a send on the fast path goes only
// with none outstanding). An error it meets keeps the fast path closed
// (FastQuiet) and is the next Progress's to report. The caller must make
// sure nothing else calls into the device meanwhile.
func (d *Device) FastSettle() {
	if d.settleErr != nil {
		return
	}
	if len(d.repost) > 0 {
		if d.settleErr = d.reposts(); d.settleErr != nil {
			return
		}
	}
	d.sendsDone()
}

// FastQuiet reports whether the device holds nothing that a message the C
// fast path moves could overtake or race with: no message, RDMA
// descriptor or FIN queued, no send descriptor posted and not yet taken
// back (the NIC's engine may then still work on the VI, and a fast send
// would overtake it), no rendezvous in flight, no posted receive and no
// unexpected message, no receive buffer waiting to be posted again, no
// credit message due, no work for the NIC, and no peer found gone or
// connection lost. The caller must make sure nothing else calls into the
// device meanwhile (mpi.QuietDevice).
func (d *Device) FastQuiet() bool {
	if d.settleErr != nil || len(d.sends) != 0 || len(d.recvs) != 0 || d.liveSends != 0 || len(d.repost) != 0 || d.repostNow ||
		d.eng.Posted() != 0 || d.eng.Unexpected() != 0 || d.nic.Busy() || d.nic.LostGen() != d.lostSeen {
		return false
	}
	for _, p := range d.peers {
		if len(p.out) != 0 || len(p.data) != 0 || p.inSQ != 0 || p.owed >= d.credits/2 || !d.alive(p) {
			return false
		}
	}
	return true
}
