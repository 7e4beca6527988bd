package via

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/internal/shm"
	"golang.org/x/sys/unix"
)

// Shared DMA. An RDMA read or write between two NICs of one host, at
// least shareMin bytes and contiguous on both sides, is moved by both
// NICs: the initiator's (the thread that executes the descriptor) and the
// target's (its engine, or its application while it helps), as the
// requester's and the responder's DMA engines of a real NIC each carry
// one end of an RDMA transfer. The initiator publishes the transfer as a
// job in the job line of the target's VI (in the target NIC's memory),
// counts it in the target's offShare word and rings the target's
// doorbell; then both NICs claim pieces (sharePiece: smaller towards the
// end) with an atomic
// operation on the job's claim word and copy them, the initiator with
// process_vm_readv/writev on the target's memory, the target the other
// way round on the initiator's. The initiator completes the descriptor
// once every piece is in place. On two cores the copy and the kernel's
// pinning of the other process's pages run on both, where one DMA leaves
// the target's core idle (or spinning in its wait). A target that is busy
// elsewhere claims nothing and the initiator moves it all, as before; a
// piece the target's kernel refuses it gives back (jRedo) for the
// initiator to copy.
//
// The job line (jobOff into the target's VI header, one cache line):
// state u32 (generation<<2 | direction; direction 0: no job), the
// initiator's pid u32, the target's address u64, the initiator's address
// u64, length u64, a reserved u32, the target's memory handle u32, the claim
// word u64 (generation<<40 | next offset), the bytes copied u64 and the
// piece to redo u64 (offset+1; 0: none). The initiator writes the claim
// word first, then the fields, then the state: a target that read a
// stale job's fields fails its claim, whose compare-and-swap expects the
// generation it read in the state.
const (
	shareMin      = 64 << 10  // smaller transfers are one DMA
	sharePieceMin = 32 << 10  // a piece's copy outweighs its system call and claim
	sharePieceMax = 512 << 10 // bounds the wait for the last piece

	jobOff    = 64 // the job line's offset in a VI header
	jState    = 0
	jPid      = 4
	jTAddr    = 8
	jIAddr    = 16
	jLen      = 24
	jHandle   = 36
	jNext     = 40
	jCopied   = 48
	jRedo     = 56
	dirToInit = 1 // an RDMA read: target memory → initiator memory
	dirToTarg = 2 // an RDMA write: initiator memory → target memory
	genBits   = 22
	offBits   = 40
	offMask   = 1<<offBits - 1
)

// sharePiece is the piece of a shared transfer of n bytes that starts at
// offset off: a quarter of what is left from off, in multiples of 16 KiB
// within [sharePieceMin, sharePieceMax] (and no more than is left). The
// pieces shrink towards the end of the transfer (guided scheduling), so
// that the NIC that copies the last piece keeps the other waiting for a
// small piece's copy, not an eighth of the transfer; both NICs compute a
// piece from its offset alone.
func sharePiece(n, off uint64) uint64 {
	const unit = 16 << 10
	left := n - off
	p := (left/4 + unit - 1) &^ (unit - 1)
	return min(max(p, sharePieceMin), sharePieceMax, left)
}

// sharePieces is how many pieces a shared transfer of n bytes has.
func sharePieces(n uint64) int {
	k := 0
	for off := uint64(0); off < n; off += sharePiece(n, off) {
		k++
	}
	return k
}

// shareClaim claims the next piece of the job of generation gen whose
// claim word is w: its offset and length, or ok false when the job has no
// piece left or is not gen's any more.
func shareClaim(w *uint64, gen, size uint64) (off, k uint64, ok bool) {
	for {
		c := atomic.LoadUint64(w)
		off = c & offMask
		if c>>offBits != gen || off >= size {
			return 0, 0, false
		}
		k = sharePiece(size, off)
		if atomic.CompareAndSwapUint64(w, c, c+k) {
			return off, k, true
		}
	}
}

// shareDMA moves an RDMA transfer of vi jointly with the target NIC p: the
// initiator's one contiguous piece local and the target's remote, in
// direction dir. It reports false (moving nothing) when the transfer does
// not qualify; else the error of the transfer, if any. The caller holds
// n.eng.mu.
func (n *NIC) shareDMA(vi *VI, p *view, dir uint32, local []byte, remote shm.RemoteSeg, h MemHandle) (bool, error) {
	size := uint64(len(local))
	if !n.o.SharedDMA || p == n.self || size < shareMin || remote.Len != size || size > offMask {
		return false, nil
	}
	if dir == dirToTarg && p.hostBytes(remote.Addr, remote.Len) != nil {
		return false, nil // the target's host memory: one plain copy (scatter)
	}
	j := p.viOff(vi.peerVI) + jobOff
	gen := uint64(atomic.LoadUint32(p.u32(j+jState))>>2+1) & (1<<genBits - 1)
	if gen == 0 {
		gen = 1
	}
	atomic.StoreUint64(p.u64(j+jNext), gen<<offBits) // stale claims fail from here on
	atomic.StoreUint32(p.u32(j+jPid), uint32(n.self.pid))
	atomic.StoreUint64(p.u64(j+jTAddr), remote.Addr)
	atomic.StoreUint64(p.u64(j+jIAddr), Addr(local))
	atomic.StoreUint64(p.u64(j+jLen), size)
	atomic.StoreUint32(p.u32(j+jHandle), uint32(h))
	atomic.StoreUint64(p.u64(j+jCopied), 0)
	atomic.StoreUint64(p.u64(j+jRedo), 0)
	state := dir
	if dir == dirToInit && stageTake(p) {
		state = dirStaged // dmastage.go
	} else if dir == dirToInit && p.lay.stage != 0 {
		n.stageCnt.busy.Add(1)
	}
	atomic.StoreUint32(p.u32(j+jState), uint32(gen)<<2|state)
	atomic.AddUint32(p.u32(offShare), 1)
	// The target's engine is rung only while its application sleeps: an
	// application that waits in progress finds the job in its next Help,
	// and waking the engine as well would put a third thread on the two
	// cores the copy needs (one the scheduler then takes from the copy,
	// and a piece whose copier is preempted holds up the whole transfer).
	// An application busy outside MPI helps with nothing: the initiator
	// moves the pieces itself.
	if atomic.LoadUint32(p.u32(offAppSleep)) > 0 {
		p.ringNIC()
	}
	defer func() {
		// No claim of this job succeeds any more, even by a target that
		// read its state before it closed (an initiator that failed
		// returns with pieces still unclaimed).
		atomic.StoreUint64(p.u64(j+jNext), gen<<offBits|offMask)
		atomic.StoreUint32(p.u32(j+jState), uint32(gen)<<2)
		atomic.AddUint32(p.u32(offShare), ^uint32(0))
	}()
	if state == dirStaged {
		return true, n.stageRead(p, j, gen, local, remote)
	}
	move := func(off, k uint64) error {
		err := vmCopy(p.pid, local[off:off+k], remote.Addr+off, dir == dirToTarg)
		if err == nil {
			atomic.AddUint64(p.u64(j+jCopied), k)
		}
		return err
	}
	for {
		off, k, ok := shareClaim(p.u64(j+jNext), gen, size)
		if !ok {
			break
		}
		if err := move(off, k); err != nil {
			return true, err
		}
		n.shared.init.Add(1)
	}
	// The target may still copy its last piece, or have given one back.
	var since time.Time
	for i := 0; atomic.LoadUint64(p.u64(j+jCopied)) < size; i++ {
		if redo := atomic.LoadUint64(p.u64(j + jRedo)); redo != 0 {
			if err := move(redo-1, sharePiece(size, redo-1)); err != nil {
				return true, err
			}
			atomic.StoreUint64(p.u64(j+jRedo), 0)
			continue
		}
		if i < 64 {
			continue
		}
		runtime.Gosched()
		if i%1024 == 0 {
			if since.IsZero() {
				since = time.Now()
			} else if time.Since(since) > 10*time.Millisecond && !shm.Alive(p.pid) {
				return true, fmt.Errorf("via: process %d died during an RDMA transfer", p.pid)
			}
		}
	}
	return true, nil
}

// shareHelp is the target NIC's part of shared transfers: it copies the
// pieces it can claim of every open job in its VIs' job lines, one after
// the other until the job has none left (the initiator claims on at the
// same time), and reports whether it copied anything. The target is the
// side that waits for the transfer (an application in progress, or its
// idle engine), so staying on a job costs it nothing, while going back to
// its wait loop between two pieces left the initiator most of them. The
// caller holds n.eng.mu.
func (n *NIC) shareHelp() (did bool) {
	if atomic.LoadUint32(n.self.u32(offShare)) == 0 {
		return false
	}
	for _, vi := range *n.active.Load() {
		if vi.net != nil {
			continue
		}
		j := n.self.viOff(vi.id) + jobOff
		s := atomic.LoadUint32(n.self.u32(j + jState))
		dir, gen := s&3, uint64(s>>2)
		if dir == 0 {
			continue
		}
		pid := int(atomic.LoadUint32(n.self.u32(j + jPid)))
		taddr := atomic.LoadUint64(n.self.u64(j + jTAddr))
		iaddr := atomic.LoadUint64(n.self.u64(j + jIAddr))
		size := atomic.LoadUint64(n.self.u64(j + jLen))
		h := MemHandle(atomic.LoadUint32(n.self.u32(j + jHandle)))
		if dir == dirStaged {
			if n.stageHelp(j, gen, taddr, size, h, pid, iaddr) {
				did = true
			}
			continue
		}
		for atomic.LoadUint64(n.self.u64(j+jRedo)) == 0 {
			off, k, ok := shareClaim(n.self.u64(j+jNext), gen, size)
			if !ok {
				break
			}
			// The claim stands: the fields read before it are this job's.
			did = true
			mem := n.regionBytes(h, taddr+off, k)
			if mem == nil || vmCopy(pid, mem, iaddr+off, dir == dirToInit) != nil {
				atomic.StoreUint64(n.self.u64(j+jRedo), off+1) // the initiator copies it
				break
			}
			atomic.AddUint64(n.self.u64(j+jCopied), k)
			n.shared.target.Add(1)
		}
	}
	if did {
		n.sharedAt.Store(time.Now().UnixNano())
	}
	return did
}

// sharing reports whether a peer's shared transfer is open in this NIC's
// memory, or this NIC copied a piece of one within the last d: a stream
// of transfers is under way, whose next job comes soon.
func (n *NIC) sharing(d time.Duration) bool {
	if atomic.LoadUint32(n.self.u32(offShare)) > 0 {
		return true
	}
	t := n.sharedAt.Load()
	return t != 0 && time.Duration(time.Now().UnixNano()-t) < d
}

// regionBytes is this process's memory at [addr, addr+k) if it lies in
// registered region h, else nil.
func (n *NIC) regionBytes(h MemHandle, addr, k uint64) []byte {
	r := n.region(h)
	if r == nil || addr < r.base || addr+k > r.base+uint64(len(r.mem)) {
		return nil
	}
	off := addr - r.base
	return r.mem[off : off+k : off+k]
}

// vmCopy copies between local and process pid's memory at remote: into it
// (write) with process_vm_writev, else out of it with process_vm_readv,
// going on after a partial transfer.
func vmCopy(pid int, local []byte, remote uint64, write bool) error {
	for len(local) > 0 {
		liov := [1]unix.Iovec{{Base: &local[0]}}
		liov[0].SetLen(len(local))
		riov := [1]unix.RemoteIovec{{Base: uintptr(remote), Len: len(local)}}
		var k int
		var err error
		if write {
			k, err = unix.ProcessVMWritev(pid, liov[:], riov[:], 0)
		} else {
			k, err = unix.ProcessVMReadv(pid, liov[:], riov[:], 0)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			call := "process_vm_readv"
			if write {
				call = "process_vm_writev"
			}
			return fmt.Errorf("via: %s pid %d: %w", call, pid, err)
		}
		if k <= 0 {
			return fmt.Errorf("via: remote copy with pid %d moved nothing at %#x", pid, remote)
		}
		local, remote = local[k:], remote+uint64(k)
	}
	return nil
}
