package netvm

import (
	"sync/atomic"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/shm"
)

// The board (adi.Board): a sequence word and two slots of boardSlot bytes in
// every process's segment, which every peer has mapped. Peers read a board
// directly, as processes read each other's reflective memory in seed 002;
// the core runs Barrier and small broadcasts and reductions on it.
const boardSlot = 8 << 10

// BoardSlotSize is the size of one board slot.
func (d *Device) BoardSlotSize() int { return boardSlot }

// BoardSlot returns slot i of world rank p's board as mapped here.
func (d *Device) BoardSlot(p, i int) []byte {
	off := d.offBoard + i*boardSlot
	return d.peers[p].seg.Mem[off : off+boardSlot : off+boardSlot]
}

// BoardPost publishes k in this process's sequence word. A post that
// completes round k (every process has posted k), or one with wakeAll,
// rings every peer that sleeps; any other post leaves them asleep, since
// what they wait for is a whole round or a root. Of two processes posting
// the last two posts of a round at once, each stores its word before
// reading the other's, so at least one of them sees the round complete.
func (d *Device) BoardPost(k uint64, wakeAll bool) {
	atomic.StoreUint64(d.seg.Uint64(offBoardSeq), k)
	if !wakeAll {
		for _, p := range d.peers {
			if atomic.LoadUint64(p.seg.Uint64(offBoardSeq)) < k {
				return
			}
		}
	}
	for _, p := range d.peers {
		if p.seg != d.seg {
			ring(p.doorbell, p.sleepers)
		}
	}
}

// BoardPosted reads world rank p's sequence word. Liveness comes from the
// progress engine's periodic check (peer.gone), not from a system call per
// look.
func (d *Device) BoardPosted(p int, k uint64) (bool, error) {
	q := d.peers[p]
	if atomic.LoadUint64(q.seg.Uint64(offBoardSeq)) >= k {
		return true, nil
	}
	if q.gone.Load() {
		return false, adi.Errorf(adi.ErrOther, "board", "rank %d (pid %d) exited before reaching collective %d", q.rank, q.pid, k)
	}
	return false, nil
}

// BoardReadable reports whether process_vm_readv into every peer works
// (probed at Init, and not switched off with cma=off).
func (d *Device) BoardReadable() bool {
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
