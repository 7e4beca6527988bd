package bip

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file opens the short-message queues of the peers on this host to a
// fast path written in C (cmd/libmpich): a C program's small blocking
// sends and receives write and consume eager messages themselves, with
// MPI-BIP's credit accounting, without calling into Go. The C side moves
// the very counters the Go side moves (cursors, outside Go's heap), so a
// message the C side did not take is the Go side's next one, as if the C
// side had never looked.

// cursors are one peer's queue positions (the Endpoint's) and MPI-BIP
// credits (the Device's). They live outside Go's heap, so that C code may
// keep pointers to them; one cache line per peer.
type cursors struct {
	tail     uint64 // short messages written to it
	tailAt   int    // offset in out of the slot for message tail+1 (0 until the first send)
	seenHead uint64 // its head word when last read: read again only when the queue looks full, so that the line the reader writes at every message does not move to this sender at every message
	head     uint64 // its short messages consumed
	headAt   int    // offset in in of the slot of message head+1 (0 until the first look)

	used, granted      uint32 // counted messages I sent it; its cumulative grant
	consumed, reported uint32 // its counted messages I consumed; the count I last sent back
	_                  uint64
}

// newCursors maps zeroed cursors for n peers outside Go's heap.
func newCursors(n int) ([]cursors, []byte, error) {
	size := n * int(unsafe.Sizeof(cursors{}))
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, fmt.Errorf("bip: mapping the queue cursors: %w", err)
	}
	return unsafe.Slice((*cursors)(unsafe.Pointer(&mem[0])), n), mem, nil
}

// FastCursorLayout is the cursors' size and the offsets of their fields in
// the order tail, tailAt, seenHead, head, headAt, used, granted, consumed,
// reported (tailAt and headAt are ints), for C code to check its copy of
// the layout against.
var FastCursorLayout = [...]uintptr{
	unsafe.Sizeof(cursors{}),
	unsafe.Offsetof(cursors{}.tail), unsafe.Offsetof(cursors{}.tailAt), unsafe.Offsetof(cursors{}.seenHead),
	unsafe.Offsetof(cursors{}.head), unsafe.Offsetof(cursors{}.headAt),
	unsafe.Offsetof(cursors{}.used), unsafe.Offsetof(cursors{}.granted),
	unsafe.Offsetof(cursors{}.consumed), unsafe.Offsetof(cursors{}.reported),
}

// The encoding of a queue, for C code that writes and consumes its slots.
// A sender's block (in the receiver's segment) holds the receiver's head
// word (u64) at FastBlockHead and the sender's waitSpace flag (u32) at
// FastBlockWaitSpace; a slot holds the message's number plus one (u64,
// stored last), its length (u32) and BIP tag (u32), then FastSlotHeader
// bytes in, the MPI-BIP header of FastHeader bytes: ctx u32, tag i32,
// sig u32, id u32, size u64, credits u32, aux u32, flags u32 (TrySend,
// next, putHdr). FastEagerType and FastCreditType are the BIP tags of an
// eager message and of an explicit credit return.
const (
	FastBlockHead      = int(blkHead)
	FastBlockWaitSpace = int(blkWaitSpace)
	FastSlotHeader     = qHdr
	FastHeader         = hdrSize
	FastEagerType      = msgEager
	FastCreditType     = msgCredit
)

// FastQueue is the link to one peer on this host as C code sees it: the
// addresses, all outside Go's heap (the segments and the cursors), of what
// TrySend and next read and write, and the queues' shape.
type FastQueue struct {
	Out      uintptr // my block in the peer's segment
	In       uintptr // its block in my segment
	Doorbell uintptr // *uint32: the peer's doorbell (futex word)
	Sleepers uintptr // *uint32: how many of the peer's threads sleep on it
	Cursors  uintptr // *cursors: see FastCursorLayout
}

// FastShape is the queues' shape and MPI-BIP's credit bound: Queue slots
// of SlotBytes from OffQueue in a block, Credit counted messages per
// receiver, Eager payload bytes at most in an eager message.
type FastShape struct {
	OffQueue, SlotBytes, Queue, Eager int
	Credit                            uint32
}

// FastShape returns the queues' shape.
func (d *Device) FastShape() FastShape {
	e := d.ep
	return FastShape{OffQueue: e.offQueue, SlotBytes: e.slotBytes, Queue: e.opt.Queue, Eager: d.eager, Credit: d.credit}
}

// FastQueue returns the link to rank for the C fast path, false when there
// is none: rank is this process or runs on another host.
func (d *Device) FastQueue(rank int) (FastQueue, bool) {
	e := d.ep
	if rank == e.rank || rank < 0 || rank >= e.size {
		return FastQueue{}, false
	}
	p := e.peers[rank]
	if p.net != nil || p.seg == nil {
		return FastQueue{}, false
	}
	return FastQueue{
		Out:      uintptr(unsafe.Pointer(&p.out[0])),
		In:       uintptr(unsafe.Pointer(&p.in[0])),
		Doorbell: uintptr(unsafe.Pointer(p.doorbell)),
		Sleepers: uintptr(unsafe.Pointer(p.sleepers)),
		Cursors:  uintptr(unsafe.Pointer(p.cursors)),
	}, true
}

// FastQuiet reports whether the device holds nothing that a message the C
// fast path writes or consumes could overtake or starve: no posted receive
// (which a consumed message might have to match first), no unexpected
// message (which an earlier message from the same peer may be), no
// backlog (which a written message would overtake), no long operation or
// held completion, no protocol error and no peer found gone. The caller
// must make sure nothing else calls into the device meanwhile
// (mpi.QuietDevice).
func (d *Device) FastQuiet() bool {
	if d.err != nil || d.lost != nil || len(d.held) != 0 || len(d.sends) != 0 ||
		len(d.ep.sends) != 0 || len(d.ep.recvs) != 0 || d.eng.Posted() != 0 || d.eng.Unexpected() != 0 {
		return false
	}
	for i, p := range d.pc {
		if len(p.backlog) != 0 || len(p.waitSlot) != 0 || len(p.waitSend) != 0 || d.ep.peers[i].gone != nil {
			return false
		}
	}
	return true
}
