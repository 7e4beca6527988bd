package netvm

import (
	"sync/atomic"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/shm"
)

// The board (adi.Board): two cache lines, then two slots of boardSlot
// bytes, in every process's segment, which every peer has mapped. Peers
// read a board directly, as processes read each other's reflective memory
// in seed 002; the core runs small collectives on it. Line i serves rounds
// k with k%2 == i: it holds the sequence word (the last such round posted),
// a copy of the waiting flag and boardInline bytes of data, so a peer that
// sees the round posted has its data in the same cache line. Every process
// posts every round in order, so "posted k or later" is line k%2's word
// ≥ k. The lines are the board's own: the doorbell, which every sender
// bumps, lives elsewhere, so polling a peer's sequence word does not miss
// on unrelated traffic. The slots hold 1 MiB each, so that the core can
// stage large collectives through them (mpi/collboard.go: Allreduce in
// 1 MiB segments; Bcast and Alltoall when ranks outnumber cores), since a
// user copy from a mapped slot outruns process_vm_readv. A slot's
// pages cost memory only once a collective has touched them.
const (
	boardLine    = 64
	boardHead    = 2 * boardLine
	boardSlot    = 1 << 20
	boardSeq     = 0  // u64: the last round of this line's parity posted
	boardWaiting = 8  // u32: non-zero while this process may sleep in a board wait
	boardData    = 16 // the line's data bytes
	boardInline  = boardLine - boardData
)

func (d *Device) boardWord(p *peer, k uint64) *uint64 {
	return p.seg.Uint64(d.offBoard + int(k%2)*boardLine + boardSeq)
}

func (d *Device) boardFlag(p *peer, k uint64) *uint32 {
	return p.seg.Uint32(d.offBoard + int(k%2)*boardLine + boardWaiting)
}

// BoardSlotSize is the size of one board slot.
func (d *Device) BoardSlotSize() int { return boardSlot }

// BoardSlot returns slot i of world rank p's board as mapped here.
func (d *Device) BoardSlot(p, i int) []byte {
	off := d.offBoard + boardHead + i*boardSlot
	return d.peers[p].seg.Mem[off : off+boardSlot : off+boardSlot]
}

// BoardLine returns the data bytes of line i of world rank p's board.
func (d *Device) BoardLine(p, i int) []byte {
	off := d.offBoard + i*boardLine + boardData
	return d.peers[p].seg.Mem[off : off+boardInline : off+boardInline]
}

// BoardPost publishes k in this process's sequence word. A post that
// completes round k (every process has posted k), or one with wakeAll,
// rings the peers that announced they may sleep (BoardWaiting); any other
// post leaves them be, since what they wait for is a whole round or a root.
// Of two processes posting the last two posts of a round at once, each
// stores its word before reading the other's, so at least one of them sees
// the round complete. Likewise a waiter raises its flag before it looks at
// the words again, so a poster either sees the flag or the waiter sees the
// post.
func (d *Device) BoardPost(k uint64, wakeAll bool) {
	atomic.StoreUint64(d.boardWord(d.peers[d.rank], k), k)
	if !wakeAll {
		for _, p := range d.peers {
			if atomic.LoadUint64(d.boardWord(p, k)) < k {
				return
			}
		}
	}
	for _, p := range d.peers {
		if p.seg != d.seg && atomic.LoadUint32(d.boardFlag(p, k)) != 0 {
			p.wake()
		}
	}
}

// BoardWaiting raises or lowers this process's waiting flag (both lines'
// copies).
func (d *Device) BoardWaiting(on bool) {
	v := uint32(0)
	if on {
		v = 1
	}
	me := d.peers[d.rank]
	atomic.StoreUint32(d.boardFlag(me, 0), v)
	atomic.StoreUint32(d.boardFlag(me, 1), v)
}

// BoardPosted reads world rank p's sequence word. Liveness comes from the
// progress engine's periodic check (d.live), not from a system call per
// look.
func (d *Device) BoardPosted(p int, k uint64) (bool, error) {
	q := d.peers[p]
	if atomic.LoadUint64(d.boardWord(q, k)) >= k {
		return true, nil
	}
	if !d.live.Alive(p) {
		return false, adi.Errorf(adi.ErrOther, "board", "rank %d (pid %d) exited before reaching collective %d", q.rank, q.pid, k)
	}
	return false, nil
}

// BoardReadable reports whether process_vm_readv into every peer works
// (probed at Init, and not switched off with cma=off): never when a peer
// runs on another host, whose memory and board this process cannot see.
func (d *Device) BoardReadable() bool {
	if d.ep != nil {
		return false
	}
	for _, p := range d.peers {
		if p.seg != d.seg && !p.remoteOK {
			return false
		}
	}
	return d.cma
}

// BoardRead reads peer p's memory at addr into dst (process_vm_readv).
func (d *Device) BoardRead(p int, addr uintptr, dst []byte) error {
	q := d.peers[p]
	if err := shm.RemoteRead(q.pid, addr, [][]byte{dst}); err != nil {
		return adi.Errorf(adi.ErrOther, "board", "reading %d bytes of rank %d: %v", len(dst), p, err)
	}
	return nil
}

// BoardWrite writes src into peer p's memory at addr (process_vm_writev).
func (d *Device) BoardWrite(p int, addr uintptr, src []byte) error {
	q := d.peers[p]
	if err := shm.RemoteWrite(q.pid, addr, [][]byte{src}); err != nil {
		return adi.Errorf(adi.ErrOther, "board", "writing %d bytes to rank %d: %v", len(src), p, err)
	}
	return nil
}
