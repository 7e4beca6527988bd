package fm

import "unsafe"

// This file opens the packet regions of the peers on this host to a fast
// path written in C (cmd/libmpich): a C program's small blocking sends and
// receives write and consume one-packet eager messages themselves, with
// FM's credit accounting, without calling into Go. The C side moves the
// very counters the Go side moves (cursors), so a packet the C side did
// not take is Extract's next one, as if the C side had never looked, and
// a credit it owes is returned by whichever side gets to it first:
// piggybacked on its next packet to the sender (either side's),
// explicitly once three quarters of a region are owed (either side), or
// explicitly by Extract's rule of the next pass but one, which counts
// passes in a word the C side reads.

// cursors are one peer's region positions and FM credits (the Endpoint's
// send and receive state). They stay in the Go peer, where the Go side's
// every packet finds them without a pointer to follow; C code that keeps
// a pointer to them must pin them (FastPeer).
type cursors struct {
	sent     uint64 // packets reserved in its region
	returned uint64 // credits it piggybacked on its packets
	sendAt   int    // byte offset in out of packet number sent (no division per packet)
	head     uint64 // its packets consumed
	headAt   int    // byte offset in in of packet number head
	owedPass uint64 // the Extract pass in which owed became non-zero
	owed     uint32 // packets consumed, credit not yet returned
}

// FastCursorLayout is the cursors' size and the offsets of their fields in
// the order sent, returned, sendAt, head, headAt, owedPass, owed (sendAt
// and headAt are ints), for C code to check its copy of the layout
// against.
var FastCursorLayout = [...]uintptr{
	unsafe.Sizeof(cursors{}),
	unsafe.Offsetof(cursors{}.sent), unsafe.Offsetof(cursors{}.returned), unsafe.Offsetof(cursors{}.sendAt),
	unsafe.Offsetof(cursors{}.head), unsafe.Offsetof(cursors{}.headAt),
	unsafe.Offsetof(cursors{}.owedPass), unsafe.Offsetof(cursors{}.owed),
}

// The encoding of a packet and of the MPI device's eager message, for C
// code that writes and consumes one-packet messages. A packet is
// FastPacketHeader bytes — flags (u32, stored last; FastShortFlags for a
// one-packet stream), handler (u16, FastHandler), payload bytes (u16),
// stream id (u32, not looked at in a one-packet stream), credits
// piggybacked (u32), the message's length (u64) — then the payload: the
// MPI header of FastMPIHeader bytes (kind u8 = FastEagerKind, three zero
// bytes, context u32, tag i32, type signature u32, size u64, sid u32, rid
// u32) and the data.
const (
	FastPacketHeader = HeaderSize
	FastShortFlags   = flagValid | flagFirst | flagLast
	FastHandler      = hMPI
	FastMPIHeader    = mpiHeader
	FastEagerKind    = kEager
)

// FastPeer is the link to one peer on this host as C code sees it: the
// addresses of what SendShort and Extract read and write, all outside
// Go's heap but Cursors, which the caller must pin (runtime.Pinner) for as
// long as C code keeps it.
type FastPeer struct {
	Out      uintptr        // my packet region in its segment
	In       uintptr        // its packet region in my segment
	Doorbell uintptr        // *uint32: its doorbell (futex word)
	Sleepers uintptr        // *uint32: how many of its threads sleep on it
	Mailbox  uintptr        // *uint64, in my segment: credits it returned explicitly
	Report   uintptr        // *uint64, in its segment: credits I returned explicitly
	Cursors  unsafe.Pointer // *cursors, in Go's heap: see FastCursorLayout
}

// FastShape is the regions' shape and the credit rules: Slots packets of
// Packet bytes per region (Slots credits per sender), owed credits
// returned explicitly at once from RetAt on, Eager the largest message
// the device sends in one eager packet, Pass the address (*uint64, in
// Go's heap: the caller pins it as Cursors) of the Extract pass counter.
type FastShape struct {
	Packet, Slots, Eager int
	RetAt                uint32
	Pass                 unsafe.Pointer
}

// FastShape returns the regions' shape.
func (d *Device) FastShape() FastShape {
	e := d.e
	return FastShape{Packet: e.packet, Slots: e.slots, Eager: min(d.rndv, e.payload-mpiHeader), RetAt: e.retAt, Pass: unsafe.Pointer(&e.pass)}
}

// FastPeer returns the link to rank for the C fast path, false when there
// is none: rank is this process or runs on another host.
func (d *Device) FastPeer(rank int) (FastPeer, bool) {
	e := d.e
	if rank == e.rank || rank < 0 || rank >= e.size {
		return FastPeer{}, false
	}
	p := e.peers[rank]
	if p.net || len(p.out) == 0 {
		return FastPeer{}, false
	}
	return FastPeer{
		Out:      uintptr(unsafe.Pointer(&p.out[0])),
		In:       uintptr(unsafe.Pointer(&p.in[0])),
		Doorbell: uintptr(unsafe.Pointer(p.doorbell)),
		Sleepers: uintptr(unsafe.Pointer(p.sleepers)),
		Mailbox:  uintptr(unsafe.Pointer(p.mailbox)),
		Report:   uintptr(unsafe.Pointer(p.report)),
		Cursors:  unsafe.Pointer(&p.cursors),
	}, true
}

// FastQuiet reports whether the device holds nothing that a message the C
// fast path writes or consumes could overtake or starve: no queued
// message or control message (which a written packet would overtake, and
// which only Progress pushes), no posted receive (which a consumed
// message might have to match first), no unexpected message (which an
// earlier message from the same peer may be), no rendezvous in flight, and
// in FM itself no stream half way through a packet or an incoming one,
// no doorbell left to ring, no protocol error and no peer found gone. The
// caller must make sure nothing else calls into the device meanwhile
// (mpi.QuietDevice).
func (d *Device) FastQuiet() bool {
	if d.queued != 0 || len(d.sends) != 0 || len(d.recvs) != 0 || len(d.unexp) != 0 ||
		d.eng.Posted() != 0 || d.eng.Unexpected() != 0 {
		return false
	}
	e := d.e
	if len(e.unrung) != 0 || e.netErr != nil || len(e.lostNew) != 0 {
		return false
	}
	for _, p := range e.peers {
		if p.open != nil || p.busy || len(p.streams) != 0 || !e.Alive(p.rank) {
			return false
		}
	}
	return true
}
