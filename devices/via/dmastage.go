package via

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/adimpi/adimpi/internal/shm"
)

// Staged RDMA reads. A large RDMA read between two NICs of one host is
// moved as a real NIC pair moves it: the target's NIC (the responder)
// reads the registered source from its host memory into buffers in its
// own NIC memory, and the initiator's NIC (the requester) writes each
// buffer, as it arrives, into the registered destination in its host
// memory. Here NIC memory is the target's segment, which the initiator
// maps, so both are plain copies of a process's own memory into or out of
// shared memory: no system call and no pinning of another process's
// pages, which for 4 KiB pages cost more than the copy itself (the shared
// DMA of dmashare.go, where each side copies its pieces with
// process_vm_readv/writev). The two copies run on two cores, one chunk
// apart, in buffers that stay in cache.
//
// The staging buffers are one area per NIC (stageSlots chunks of
// stageChunk bytes, each with a state word on a line of its own), owned by
// one transfer at a time: an initiator that finds them taken by another
// initiator's transfer, or a transfer that is an RDMA write, takes the
// shared DMA instead. A staged read is published like a shared one (the
// job line of the target's VI, dmashare.go) with direction dirStaged;
// chunks are claimed in order on the job's claim word, the target claiming
// chunk k only when buffer k mod stageSlots is empty. A filled buffer's
// state word holds the job's generation and k+1; the initiator empties it
// (copies it out, stores 0). When nothing has arrived for stageIdle (the
// target computes outside MPI, sleeps, or lost its core), the initiator
// claims the next chunks itself, a run at a time (stageRun), and reads
// them with process_vm_readv, as the shared DMA does, so a staged read
// never waits for an absent target; the target's chunks already claimed
// still come, one copy each. In the
// same way a target that finds the next buffer still full for stageSpin
// polls writes that chunk straight into the initiator's memory
// (process_vm_writev), so it never waits for a lagging initiator either.
const (
	stageChunk = 32 << 10 // a chunk: small enough that the copies overlap well, large enough that its hand-over is cheap
	stageSlots = 16       // chunks in flight: the target may run this far ahead of a lagging initiator
	stageHdr   = 4096     // owner word, then a state line per buffer
	stageBytes = stageHdr + stageSlots*stageChunk
	// stageIdle is how long the initiator waits for a chunk before it
	// copies the next chunk itself. A longer wait for a target that is
	// awake or already copying (15 and 25 µs) was tried and measured
	// worse in NetPIPE (docs/via-bandwidth.md): the initiator's own chunk
	// read while the target is late is work done in parallel.
	stageIdle = 5 * time.Microsecond
	// stageRunMax bounds the initiator's own reads (stageRun).
	stageRunMax = 256 << 10
	// stageSpin is how many polls the target makes for an empty buffer
	// before it writes the chunk straight into the initiator's memory.
	stageSpin = 1 << 10
	dirStaged = 3 // job direction: a staged RDMA read (target memory → initiator memory)
)

// stageState is buffer s's state word in v's staging area.
func (v *view) stageState(s uint64) *uint64 { return v.u64(v.lay.stage + 64 + uint32(s)*64) }

// stageBuf is buffer s of v's staging area.
func (v *view) stageBuf(s uint64) []byte {
	o := uint64(v.lay.stage) + stageHdr + s*stageChunk
	return v.seg.Mem[o : o+stageChunk : o+stageChunk]
}

// stageTake takes p's staging buffers for a transfer and empties their
// state words; false when p has none or another transfer holds them.
func stageTake(p *view) bool {
	if p.lay.stage == 0 || !atomic.CompareAndSwapUint64(p.u64(p.lay.stage), 0, 1) {
		return false
	}
	for s := range uint64(stageSlots) {
		atomic.StoreUint64(p.stageState(s), 0)
	}
	return true
}

// stageClaim claims up to max bytes (whole chunks, or what is left) of a
// staged job of size bytes whose claim word is w, at the offset read in
// c: their length, or 0 when c is stale.
func stageClaim(w *uint64, c, size, max uint64) uint64 {
	k := min(max, size-c&offMask)
	if !atomic.CompareAndSwapUint64(w, c, c+k) {
		return 0
	}
	return k
}

// stageRun is how much of a staged read of size bytes the initiator claims
// at offset off when it reads itself: a quarter of what is left, in whole
// chunks, within [stageChunk, stageRunMax]. One process_vm_readv of many
// pages costs less per page than several of one chunk each, and reading
// itself is what the initiator
// does while the target is absent; the run shrinks towards the end, so
// that a target that comes back does not wait long for the initiator's
// last run.
func stageRun(size, off uint64) uint64 {
	r := (size - off) / 4 &^ (stageChunk - 1)
	return min(max(r, stageChunk), stageRunMax)
}

// stageRead is the initiator's part of a staged read of job line j (of
// generation gen) in p's VI: it copies the target's chunks out of p's
// staging buffers into local as they arrive, and claims and reads chunks
// itself (process_vm_readv at remote) while none arrive. It returns when
// all of local is in place. The caller holds n.eng.mu and closes the job.
func (n *NIC) stageRead(p *view, j uint32, gen uint64, local []byte, remote shm.RemoteSeg) error {
	size := uint64(len(local))
	claim := p.u64(j + jNext)
	copied := p.u64(j + jCopied) // the target's chunks written straight into local
	var got uint64
	var idleSince int64
	started := false // a chunk of the target's has come
	for i := 0; got+atomic.LoadUint64(copied) < size; i++ {
		if redo := atomic.LoadUint64(p.u64(j + jRedo)); redo != 0 {
			off := redo - 1
			k := min(stageChunk, size-off)
			if err := vmCopy(p.pid, local[off:off+k], remote.Addr+off, false); err != nil {
				return err
			}
			got += k
			atomic.StoreUint64(p.u64(j+jRedo), 0)
			continue
		}
		moved := false
		for s := range uint64(stageSlots) {
			st := atomic.LoadUint64(p.stageState(s))
			if st>>32 != gen || uint32(st) == 0 {
				continue
			}
			off := uint64(uint32(st)-1) * stageChunk
			k := min(stageChunk, size-off)
			copy(local[off:off+k], p.stageBuf(s)[:k])
			atomic.StoreUint64(p.stageState(s), 0)
			got += k
			moved, started = true, true
			n.stageCnt.staged.Add(1)
		}
		if moved {
			idleSince, i = 0, 0
			continue
		}
		// Nothing arrived: serve this NIC's own targets first (two NICs
		// that read from each other would otherwise wait on each other).
		if n.shareHelp() {
			continue
		}
		if i < 64 || i&63 != 0 {
			continue // the clock costs more than a poll
		}
		now := time.Now().UnixNano()
		if idleSince == 0 {
			idleSince = now
			continue
		}
		if time.Duration(now-idleSince) < stageIdle {
			continue
		}
		c := atomic.LoadUint64(claim)
		if off := c & offMask; c>>offBits == gen && off < size {
			if k := stageClaim(claim, c, size, stageRun(size, off)); k > 0 {
				if err := vmCopy(p.pid, local[off:off+k], remote.Addr+off, false); err != nil {
					return err // the buffers stay taken: a chunk of the target's may still come
				}
				got += k
				n.stageCnt.reads.Add(1)
				chunks := int64((k + stageChunk - 1) / stageChunk)
				n.shared.init.Add(chunks)
				if started {
					n.stageCnt.late.Add(chunks)
				} else {
					n.stageCnt.early.Add(chunks)
				}
			}
			continue
		}
		// Every chunk is claimed: the target's last ones are on their way.
		if time.Duration(now-idleSince) > 10*time.Millisecond && !shm.Alive(p.pid) {
			return fmt.Errorf("via: process %d died during an RDMA transfer", p.pid)
		}
	}
	atomic.StoreUint64(p.u64(p.lay.stage), 0) // every claimed chunk has come: the buffers are free
	return nil
}

// stageHelp is the target's part of staged job j of generation gen: it
// copies chunks of its registered memory [taddr, taddr+size) of region h
// into its staging buffers as buffers are empty, until the job has no
// chunk left. When the initiator has not emptied the next buffer for
// stageSpin polls (it lost its core, or copies more slowly), the chunk
// goes straight into the initiator's memory at iaddr of process pid
// (process_vm_writev, counted in the job's copied word), as the shared
// DMA moves it, so that the target never waits on a lagging initiator.
// It reports whether it moved anything. The caller holds n.eng.mu.
func (n *NIC) stageHelp(j uint32, gen, taddr, size uint64, h MemHandle, pid int, iaddr uint64) (did bool) {
	mem := n.regionBytes(h, taddr, size)
	if mem == nil || n.lay.stage == 0 {
		return false // the initiator copies it all
	}
	claim := n.self.u64(j + jNext)
	for spins := 0; atomic.LoadUint64(n.self.u64(j+jRedo)) == 0; {
		c := atomic.LoadUint64(claim)
		off := c & offMask
		if c>>offBits != gen || off >= size {
			return did
		}
		s := off / stageChunk % stageSlots
		direct := false
		if atomic.LoadUint64(n.self.stageState(s)) != 0 {
			if spins++; spins < stageSpin {
				continue
			}
			direct = true // the initiator lags: write this chunk into its memory
		}
		k := stageClaim(claim, c, size, stageChunk)
		if k == 0 {
			continue
		}
		// The claim stands: the fields read before it are this job's.
		spins, did = 0, true
		n.shared.target.Add(1)
		if direct {
			if vmCopy(pid, mem[off:off+k], iaddr+off, true) != nil {
				atomic.StoreUint64(n.self.u64(j+jRedo), off+1) // the initiator reads it
				return did
			}
			atomic.AddUint64(n.self.u64(j+jCopied), k)
			n.stageCnt.direct.Add(1)
			continue
		}
		copy(n.self.stageBuf(s)[:k], mem[off:off+k])
		atomic.StoreUint64(n.self.stageState(s), gen<<32|(off/stageChunk+1))
	}
	return did
}
