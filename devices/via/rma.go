package via

import (
	"fmt"
	"time"

	"github.com/adimpi/adimpi/adi"
)

// via offers one-sided communication's remote memory access natively, as
// the extended ADI of DMPI asks of a network with remote write and read:
// a window's memory is registered with its owner's NIC when the window is
// made (ExposeMemory; the memory handle is the key the origins name it
// by), and an origin's Put or Get is an RDMA write or read descriptor on
// its VI to the target. The NICs carry it out — on one host the origin's
// engine writes (reads) the target's registered pages, across hosts the
// target's engine does — so the target's process never takes part: a
// passive target computing without any MPI call still sees the data.
var _ adi.RemoteMemory = (*Device)(nil)

// rmaBounce is the largest transfer that goes through the device's own
// registered buffer (a copy) rather than registering the caller's memory.
const rmaBounce = 4096

// rmaSpins is how many idle polls an RMA wait makes (each yields the CPU)
// before it sleeps on the NIC's completion futex.
const rmaSpins = 64

// assistRDMA runs one pass of the engine on the caller's thread, unless
// the engine is in one: a descriptor the caller just posted and now waits
// for is executed by the waiting thread, without waiting for the engine
// goroutine to wake up and for it to wake the waiter in turn (two trips
// through the scheduler per operation on a loaded machine). It reports
// whether the pass did anything. Across hosts Device.Progress assists
// (NIC.Assist); this is the same for a NIC without a network port.
func (n *NIC) assistRDMA() bool {
	if n.port.Load() != nil || !n.eng.mu.TryLock() {
		return false
	}
	defer n.eng.mu.Unlock()
	did, _ := n.pass(false)
	return did
}

// rmaState is the device's one-sided communication state.
type rmaState struct {
	off    bool // option rma=off: offer no remote memory access (the core's agent does it all)
	buf    []byte
	h      MemHandle // buf's registration
	writes int64     // RDMA writes and reads posted for RemoteWrite and RemoteRead
	reads  int64
}

// RemoteAccess reports whether rank p's memory is reachable by RDMA: every
// live peer's (on this host or another), unless rma=off.
func (d *Device) RemoteAccess(p int) bool {
	if d.rma.off || p < 0 || p >= len(d.peers) || p == d.rank {
		return false
	}
	return d.alive(d.peers[p])
}

// ExposeMemory registers mem with this process's NIC; the key is the
// memory handle, which the origins put in their RDMA descriptors.
func (d *Device) ExposeMemory(mem []byte) (uint64, error) {
	h, err := d.nic.RegisterMem(mem)
	for err != nil && d.evict() { // out of regions: the registration cache gives some back
		h, err = d.nic.RegisterMem(mem)
	}
	if err != nil {
		return 0, err
	}
	return uint64(h), nil
}

// UnexposeMemory deregisters memory ExposeMemory registered.
func (d *Device) UnexposeMemory(key uint64) error { return d.nic.DeregisterMem(MemHandle(key)) }

// RemoteWrite RDMA-writes src into rank p's memory at addr, inside the
// region p registered as key, and returns once the NIC reports it written.
func (d *Device) RemoteWrite(p int, key uint64, addr uintptr, src []byte) error {
	return d.rdma(OpRDMAWrite, p, key, addr, src)
}

// RemoteRead RDMA-reads len(dst) bytes of rank p's memory at addr, inside
// the region p registered as key, into dst.
func (d *Device) RemoteRead(p int, key uint64, addr uintptr, dst []byte) error {
	return d.rdma(OpRDMARead, p, key, addr, dst)
}

// rdma posts the RDMA descriptors (op) that move buf to or from rank p's
// (key, addr) and drives the device until they complete. A small buf goes
// through the device's registered bounce buffer; a larger one is
// registered (and kept, in the registration cache).
func (d *Device) rdma(op uint32, p int, key uint64, addr uintptr, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	q := d.peers[p]
	what := "write to"
	if op == OpRDMARead {
		what = "read from"
	}
	if !d.alive(q) {
		return fmt.Errorf("via: RDMA %s rank %d: %w", what, p, d.exited("RMA", q))
	}
	local, h := buf, MemHandle(0)
	if len(buf) <= rmaBounce {
		if d.rma.buf == nil {
			b := make([]byte, rmaBounce)
			bh, err := d.nic.RegisterMem(b)
			if err != nil {
				return fmt.Errorf("via: registering the RMA buffer: %v", err)
			}
			d.rma.buf, d.rma.h = b, bh
		}
		local, h = d.rma.buf[:len(buf)], d.rma.h
		if op == OpRDMAWrite {
			copy(local, buf)
		}
	} else {
		var err error
		if h, err = d.register(buf); err != nil {
			return fmt.Errorf("via: RDMA %s rank %d: registering %d bytes: %v", what, p, len(buf), err)
		}
		defer d.release(h)
	}
	pending := 0
	var failed error
	for off := 0; off < len(local); off += maxPiece {
		n := min(maxPiece, len(local)-off)
		desc := &Descriptor{Control: op, RemoteHandle: MemHandle(key), RemoteAddr: uint64(addr) + uint64(off),
			DS: []DataSegment{Seg(h, local[off:off+n])}}
		pending++
		d.post(q, &outItem{rdma: desc, onSent: func(err error) {
			pending--
			if err != nil && failed == nil {
				failed = err
			}
		}})
	}
	if op == OpRDMAWrite {
		d.rma.writes++
	} else {
		d.rma.reads++
	}
	for spins := 0; pending > 0; {
		seq := d.nic.Seq()
		did := d.nic.assistRDMA()
		got, err := d.Progress()
		if err != nil {
			return err
		}
		if pending == 0 || did || got {
			continue
		}
		if !d.alive(q) {
			return fmt.Errorf("via: RDMA %s rank %d: %w", what, p, d.exited("RMA", q))
		}
		if spins++; spins > rmaSpins {
			d.nic.Sleep(seq, time.Millisecond)
		}
	}
	if failed != nil {
		return fmt.Errorf("via: RDMA %s rank %d: %v", what, p, failed)
	}
	if op == OpRDMARead && len(buf) <= rmaBounce {
		copy(buf, local)
	}
	return nil
}
