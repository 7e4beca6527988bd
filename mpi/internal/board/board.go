// Package board is the shared-memory board that the MPI core runs a
// communicator's collectives on when all its ranks share a host, whatever
// the device: one memfd segment (internal/shm) that one member exports and
// every other member maps, holding for every member two 64-byte lines, a
// doorbell and two data slots. It implements adi.Board with communicator
// ranks for p, so that the core's board algorithms (mpi/collboard.go) run
// unchanged on it as on a device's own board.
//
// A line carries a sequence word (the last round of its parity posted), a
// waiting flag and a few dozen data bytes, so that a peer that sees a round
// posted has small data in the same cache line. Every member's lines lie
// side by side in the segment's first pages, apart from the slots: a look
// at every member's post (a Barrier's, an Allreduce's) touches one page,
// not one per member, which matters where ranks outnumber cores and each
// waiter's turn on a CPU starts with an empty TLB. A member that may sleep
// raises its flag and sleeps on the board's doorbell, one futex word that
// every member sleeps on; a post that completes a round, or one marked
// wakeAll, rings it once if any peer's flag is up: one system call wakes
// every sleeper, where a doorbell per member took one per sleeper (at
// np 16 fifteen system calls by the last arrival of a Barrier before
// anyone could go on).
package board

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/shm"
)

// Layout of a segment for n members, after the segment's own header: the
// doorbell's line (which also holds the arrival count, Arrive), the release
// line (Release), every member's two lines from linesOff on (member p's
// at linesOff+128p, a 128-byte-aligned pair that an adjacent-line prefetch
// keeps to one member), every member's identity line (its process id and
// probe address), then past the next page boundary every member's two slots,
// each member's a page further than the last one's end (slotStride): the
// same offset in every member's slot, which a fold and a copy-out read one
// member after another, then falls in different cache sets instead of one.
const (
	lineSize   = 64
	offBell    = 0 // u32: the board's doorbell, bumped by every ring
	offArrive  = 8 // u64: the round of the latest arrival (above arriveBits) and how many members have arrived at it
	offRelease = lineSize
	linesOff   = 2*lineSize + (shm.HeaderSize+2*lineSize)%(2*lineSize)
	seqOff     = 0 // u64 in each line: the last round of the line's parity posted
	waitOff    = 8 // u32 in each line: non-zero while the member may sleep
	dataOff    = 16
	inline     = lineSize - dataOff // the line's data bytes
	pidOff     = 0                  // u64 in an identity line: the member's process id, once it has mapped the segment
	probeOff   = 8                  // u64 in an identity line: the address of the member's probe word
	pageSize   = 4096
	// In the release line: the last round released (u64), its status
	// (u32) and ReleaseSize result bytes.
	relStatusOff = 8
	relDataOff   = 16
	arriveBits   = 24 // the bits of an arrival word that count members
)

// LineData is how many data bytes a member's line holds (BoardLine).
const LineData = inline

// ReleaseSize is how many result bytes a release carries (ReleaseData).
const ReleaseSize = lineSize - relDataOff

// SlotSize is the size of each slot: an Allreduce of 1 MiB passes through
// the slots in one segment.
const SlotSize = 1 << 20

// headSize is where the slots of a board of n members start: the first
// page boundary after the lines, counted from the end of the segment's
// header, as before the lines moved. A slot then starts a header's length
// (64 bytes) past a page boundary: a copy or fold between it and a
// page-aligned buffer (a large Go allocation) does not have its loads and
// stores a multiple of 4 KiB apart.
func headSize(n int) int { return (linesOff + 3*n*lineSize + pageSize - 1) &^ (pageSize - 1) }

// slotStride is the distance between two members' first slots.
const slotStride = 2*SlotSize + pageSize

// Size is the bytes a board segment for n members needs.
func Size(n int) int { return headSize(n) + n*slotStride }

// Board is one member's view of a board segment. It is safe to call from
// several goroutines for different rounds only as the core does: posts in
// round order.
type Board struct {
	seg    *shm.Segment
	mem    []byte
	rank   int
	n      int             // members
	pids   []int           // member -> process id, for liveness and remote reads
	looks  []atomic.Uint32 // failed looks at each member since the last liveness check
	probed bool            // readable holds
	// readable: this process may read and write every member's memory.
	readable bool
}

// probe is the word whose address a member publishes so that the others
// can try a remote read and write on it (BoardReadable).
var probe uint64

// Export creates a board segment for n members, to be mapped by the others
// (shm.Import with the segment's Pid, FD and Key, then New).
func Export(name string, n int) (*shm.Segment, error) {
	return shm.Export(name, Size(n))
}

// New makes member rank's view of seg (exported here or imported) for n
// members and publishes this process's id in it. The board is usable once
// every member has called New and then Ready (the caller synchronises them
// in between).
func New(seg *shm.Segment, rank, n int) (*Board, error) {
	mem := seg.Mem[shm.HeaderSize:]
	if len(mem) < Size(n) || rank < 0 || rank >= n {
		return nil, fmt.Errorf("board: segment of %d bytes cannot hold member %d of %d", len(mem), rank, n)
	}
	b := &Board{seg: seg, mem: mem, rank: rank, n: n, pids: make([]int, n), looks: make([]atomic.Uint32, n)}
	atomic.StoreUint64(u64(mem, b.ident(rank)+probeOff), uint64(uintptr(unsafe.Pointer(&probe))))
	atomic.StoreUint64(u64(mem, b.ident(rank)+pidOff), uint64(os.Getpid()))
	return b, nil
}

// Ready reads every member's process id, once every member has called New;
// an error names a member that has not.
func (b *Board) Ready() error {
	for p := range b.pids {
		pid := int(atomic.LoadUint64(u64(b.mem, b.ident(p)+pidOff)))
		if pid == 0 {
			return fmt.Errorf("board: member %d has not joined", p)
		}
		b.pids[p] = pid
	}
	return nil
}

// Close unmaps this member's view (peers keep theirs).
func (b *Board) Close() error { return b.seg.Close() }

// CloseFD closes the exporter's descriptor once every member has mapped
// the segment: nothing of the board outlives the last mapping.
func (b *Board) CloseFD() error {
	if b.seg.FD < 0 {
		return nil
	}
	err := closeFD(b.seg.FD)
	b.seg.FD = -1
	return err
}

// line is the offset of member p's line of round parity k%2.
func (b *Board) line(p int, k uint64) int { return linesOff + lineSize*(2*p+int(k%2)) }

// ident is the offset of member p's identity line.
func (b *Board) ident(p int) int { return linesOff + lineSize*(2*b.n+p) }

func (b *Board) word(p int, k uint64) *uint64 { return u64(b.mem, b.line(p, k)+seqOff) }

func (b *Board) flag(p int, k uint64) *uint32 { return u32(b.mem, b.line(p, k)+waitOff) }

// bell is the board's doorbell.
func (b *Board) bell() *uint32 { return u32(b.mem, offBell) }

// BoardSlotSize is the size of one slot.
func (b *Board) BoardSlotSize() int { return SlotSize }

// BoardSlot returns slot i of member p's area.
func (b *Board) BoardSlot(p, i int) []byte {
	off := headSize(b.n) + p*slotStride + i*SlotSize
	return b.mem[off : off+SlotSize : off+SlotSize]
}

// BoardLine returns the data bytes of member p's line i.
func (b *Board) BoardLine(p, i int) []byte {
	off := b.line(p, uint64(i)) + dataOff
	return b.mem[off : off+inline : off+inline]
}

// BoardPost publishes k in this member's sequence word and rings the
// doorbell, if a peer may sleep, when the post completes round k (every
// member has posted it) or wakeAll asks. Of two members posting a round's last two
// posts at once, each stores its word before it reads the other's, so one
// of them sees the round complete; a waiter raises its flag before it
// looks at the words again, so a poster sees the flag or the waiter the
// post.
func (b *Board) BoardPost(k uint64, wakeAll bool) {
	atomic.StoreUint64(b.word(b.rank, k), k)
	if !wakeAll {
		for p := range b.pids {
			if atomic.LoadUint64(b.word(p, k)) < k {
				return
			}
		}
	}
	for p := range b.pids {
		if p != b.rank && atomic.LoadUint32(b.flag(p, k)) != 0 {
			b.ring()
			return
		}
	}
}

// ring bumps the doorbell and wakes every sleeper.
func (b *Board) ring() {
	atomic.AddUint32(b.bell(), 1)
	_ = shm.FutexWake(b.bell(), 1<<30)
}

// BoardWaiting raises or lowers this member's waiting flag (both lines).
func (b *Board) BoardWaiting(on bool) {
	v := uint32(0)
	if on {
		v = 1
	}
	atomic.StoreUint32(b.flag(b.rank, 0), v)
	atomic.StoreUint32(b.flag(b.rank, 1), v)
}

// livenessLooks is how many failed looks at a member pass between two
// checks that its process still runs (a system call).
const livenessLooks = 1 << 10

// BoardPosted reports whether member p has posted k or later, or an error
// once p's process is gone without posting it.
func (b *Board) BoardPosted(p int, k uint64) (bool, error) {
	if atomic.LoadUint64(b.word(p, k)) >= k {
		return true, nil
	}
	if b.looks[p].Add(1)%livenessLooks == 0 && !shm.Alive(b.pids[p]) {
		if atomic.LoadUint64(b.word(p, k)) >= k {
			return true, nil
		}
		return false, adi.Errorf(adi.ErrOther, "board", "member %d (pid %d) exited before reaching round %d", p, b.pids[p], k)
	}
	return false, nil
}

// BoardReadable reports whether this process may read and write every
// member's memory (process_vm_readv and process_vm_writev), trying it on
// each member's probe word the first time.
func (b *Board) BoardReadable() bool {
	if !b.probed {
		b.probed, b.readable = true, true
		for p, pid := range b.pids {
			addr := uintptr(atomic.LoadUint64(u64(b.mem, b.ident(p)+probeOff)))
			if p != b.rank && !shm.CanRemoteWrite(pid, addr) {
				b.readable = false
				break
			}
		}
	}
	return b.readable
}

// BoardRead reads member p's memory at addr into dst.
func (b *Board) BoardRead(p int, addr uintptr, dst []byte) error {
	if err := shm.RemoteRead(b.pids[p], addr, [][]byte{dst}); err != nil {
		return adi.Errorf(adi.ErrOther, "board", "reading %d bytes of member %d: %v", len(dst), p, err)
	}
	return nil
}

// BoardWrite writes src into member p's memory at addr.
func (b *Board) BoardWrite(p int, addr uintptr, src []byte) error {
	if err := shm.RemoteWrite(b.pids[p], addr, [][]byte{src}); err != nil {
		return adi.Errorf(adi.ErrOther, "board", "writing %d bytes to member %d: %v", len(src), p, err)
	}
	return nil
}

// Bell reads the doorbell, before a last look at what a sleep would wait
// for: Sleep(Bell()) then returns at once if a ring came between.
func (b *Board) Bell() uint32 { return atomic.LoadUint32(b.bell()) }

// Sleep waits until the doorbell moves from seq, or timeout passes. A
// ring for another round or member wakes it too: the caller looks again.
func (b *Board) Sleep(seq uint32, timeout time.Duration) {
	_ = shm.FutexWait(b.bell(), seq, timeout)
}

var _ adi.Board = (*Board)(nil)

// The arrival rounds. A round that needs one member to act once every
// member has arrived (a small Allreduce: fold every member's line) uses
// one shared count instead of every member looking at every other's
// line: each member posts its line (PostQuiet), then Arrive; the one
// whose arrival completes the count acts and publishes the outcome in the
// release line (Release), where every other member waits for it
// (Released). Where ranks outnumber cores each member's turn on a CPU
// then touches its own line, the count and the release line, not n lines.

// PostQuiet publishes k in this member's sequence word without looking at
// the others or ringing: for arrival rounds, whose Release rings.
func (b *Board) PostQuiet(k uint64) { atomic.StoreUint64(b.word(b.rank, k), k) }

// Arrive counts this member's arrival at round k and reports whether it
// completes the round: every member has arrived (and, each having posted
// before it arrived, posted k). Exactly one member's Arrive of a round
// returns true. The count word carries its round, so a round that some
// members left early (an error) leaves no count behind for the next.
func (b *Board) Arrive(k uint64) bool {
	w := u64(b.mem, offArrive)
	tag := k << arriveBits
	for {
		old := atomic.LoadUint64(w)
		next := tag | 1
		if old>>arriveBits == k&(1<<(64-arriveBits)-1) {
			next = old + 1
		}
		if atomic.CompareAndSwapUint64(w, old, next) {
			return int(next&(1<<arriveBits-1)) == b.n
		}
	}
}

// ReleaseData returns the release line's result bytes, which the member
// that completes a round writes before Release and the others read after
// Released.
func (b *Board) ReleaseData() []byte {
	return b.mem[offRelease+relDataOff : offRelease+lineSize : offRelease+lineSize]
}

// Release publishes round k's status (and the ReleaseData written before
// it) and rings the doorbell if a member may sleep.
func (b *Board) Release(k uint64, status uint32) {
	atomic.StoreUint32(u32(b.mem, offRelease+relStatusOff), status)
	atomic.StoreUint64(u64(b.mem, offRelease), k)
	for p := range b.pids {
		if p != b.rank && atomic.LoadUint32(b.flag(p, k)) != 0 {
			b.ring()
			return
		}
	}
}

// Released reports whether round k (or a later one) has been released,
// and the status it was released with.
func (b *Board) Released(k uint64) (bool, uint32) {
	if atomic.LoadUint64(u64(b.mem, offRelease)) < k {
		return false, 0
	}
	return true, atomic.LoadUint32(u32(b.mem, offRelease+relStatusOff))
}
