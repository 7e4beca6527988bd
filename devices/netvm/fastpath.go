package netvm

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file opens the shared-memory control rings to a fast path written
// in C (cmd/libmpich): a C program's small blocking sends and receives
// put and take eager slots themselves, without calling into Go. The C side
// moves the very cursors the Go side moves (cursors, outside Go's heap),
// so the two share one sequence per ring: a slot the C side did not take
// is the Go side's next one, as if the C side had never looked.

// cursors are the control ring cursors of one peer's link: my tail in my
// ring to it, my head in its ring to me and the head last reported to it
// (shmRing.release). They live outside Go's heap, so that C code may keep
// pointers to them; one cache line per peer.
type cursors struct {
	outTail    uint64
	inHead     uint64
	inReported uint64
	_          [5]uint64
}

// newCursors maps zeroed cursors for n peers outside Go's heap.
func newCursors(n int) ([]cursors, []byte, error) {
	size := n * int(unsafe.Sizeof(cursors{}))
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, fmt.Errorf("netvm: mapping the ring cursors: %w", err)
	}
	return unsafe.Slice((*cursors)(unsafe.Pointer(&mem[0])), n), mem, nil
}

// The control ring's encoding, for C code that reads and writes its
// slots: FastSlots slots of FastSlotSize bytes, fields typ (the type in
// the low 8 bits, the lap above: slotWord), ctx, tag, id (for an eager
// message its type signature), addr (an inline payload, little-endian),
// n (its length) at the offsets of ring.go; an eager message of at most
// FastInlineMax bytes travels in its slot; a reader reports its head every
// FastSlots/2 slots.
const (
	FastSlots     = ringSlots
	FastSlotSize  = slotSize
	FastInlineMax = inlineMax
	FastEagerType = ctlEager
)

// FastRing is the link to one peer on this host as C code sees it: the
// addresses, all outside Go's heap (the peers' segments and the cursors),
// of what shmRing.putSmall and shmRing.next read and write.
type FastRing struct {
	Out        uintptr // my ring's first slot, in the peer's segment
	OutTail    uintptr // *uint64: my tail in it
	OutHead    uintptr // *uint64: the peer's head in it, as it last reported
	Doorbell   uintptr // *uint32: the peer's doorbell (futex word)
	Sleepers   uintptr // *uint32: how many of the peer's threads sleep on it
	In         uintptr // its ring's first slot, in my segment
	InHead     uintptr // *uint64: my head in it
	InReported uintptr // *uint64: the head I last reported
	Report     uintptr // *uint64: where I report my head, in the peer's segment
}

// FastRing returns the link to rank for the C fast path, false when there
// is none: rank is this process, runs on another host, or the job runs
// MPIN's protocol (eager=0), whose small messages are not eager slots.
func (d *Device) FastRing(rank int) (FastRing, bool) {
	if _, ok := d.proto.(*matched); !ok || rank == d.rank || rank < 0 || rank >= d.size {
		return FastRing{}, false
	}
	p := d.peers[rank]
	if p.net != nil || d.eager < inlineMax {
		return FastRing{}, false
	}
	l := &p.link
	return FastRing{
		Out:        uintptr(unsafe.Pointer(&l.out[0])),
		OutTail:    uintptr(unsafe.Pointer(&l.cur.outTail)),
		OutHead:    uintptr(unsafe.Pointer(l.cmaHeadAt)),
		Doorbell:   uintptr(unsafe.Pointer(l.doorbell)),
		Sleepers:   uintptr(unsafe.Pointer(l.sleepers)),
		In:         uintptr(unsafe.Pointer(&l.in[0])),
		InHead:     uintptr(unsafe.Pointer(&l.cur.inHead)),
		InReported: uintptr(unsafe.Pointer(&l.cur.inReported)),
		Report:     uintptr(unsafe.Pointer(l.reportCMA)),
	}, true
}

// FastQuiet reports whether the device holds nothing that a message the C
// fast path puts on or takes off a ring could overtake or starve: no posted
// receive (which a taken message might have to match first), no unexpected
// message (which an earlier message from the same peer may be), no backlog
// (which a put message would overtake), no rendezvous in flight, and no
// peer found gone. The caller must make sure nothing else calls into the
// device meanwhile (mpi.QuietDevice).
func (d *Device) FastQuiet() bool {
	m, ok := d.proto.(*matched)
	return ok && !d.lostPeer && d.backlogged == 0 &&
		m.eng.Posted() == 0 && m.eng.Unexpected() == 0 &&
		len(d.sends) == 0 && len(d.recvs) == 0 && len(d.pulls) == 0 &&
		len(d.scatters) == 0 && len(d.offerQ) == 0 && len(d.taken) == 0
}
