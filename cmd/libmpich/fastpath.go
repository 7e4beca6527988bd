//go:build cgo

package main

/*
#include <stdlib.h>
#include "fastpath.h"
*/
import "C"

import (
	"os"
	"strconv"
	"unsafe"

	"github.com/adimpi/adimpi/devices/bip"
	"github.com/adimpi/adimpi/devices/netvm"
	"github.com/adimpi/adimpi/mpi"
)

// The Go side of the C fast path of MPI_Send and MPI_Recv (fastpath.c):
// fastSetup gives it netvm's rings at MPI_Init, and fastGate, run at the
// end of every call into Go, opens it only while nothing could race with
// a message it moves or be overtaken by one (docs/c-abi.md, "The C fast
// path").

// fastSpinPolls is how many times MPI_Recv's fast path looks at the ring
// (a pause between looks) before it calls into Go, which goes on polling,
// yielding the CPU, and then sleeps: a few microseconds, enough for a
// running partner's reply, and short enough not to keep a CPU from a
// partner that waits for one. ADIMPI_CFAST_SPIN sets another count.
const fastSpinPolls = 256

// fast is the fast path's state on the Go side: dev is nil when it is off
// for the run (neither netvm nor bip, MPI_THREAD_MULTIPLE asked for,
// ADIMPI_CFAST=off),
// spoiled once a request was freed that may still run on in a goroutine;
// level is the thread level the library provides while it is on.
var fast struct {
	dev     fastDevice
	spoiled bool
	level   mpi.ThreadLevel
}

// fastDevice is what fastGate asks of a device with a fast path: whether
// it holds nothing that a message the C side moves could overtake or race
// with (netvm's and bip's FastQuiet).
type fastDevice interface{ FastQuiet() bool }

// fastSetup turns the fast path on after MPI_Init (required: the thread
// level the program asked for, MPI_THREAD_SINGLE for MPI_Init), when the
// device is netvm or bip and the program asked for at most
// MPI_THREAD_SERIALIZED: it then provides that level, as MPICH does, and
// not adimpi's MPI_THREAD_MULTIPLE, under which two threads could move
// one ring's cursors at once. It reports whether the fast path is on.
func fastSetup(required mpi.ThreadLevel) bool {
	fastOff()
	if os.Getenv("ADIMPI_CFAST") == "off" || required > mpi.ThreadSerialized {
		return false
	}
	var dev fastDevice
	switch d := mpi.QuietDevice().(type) {
	case *netvm.Device:
		if !netvmSetup(d) {
			return false
		}
		dev = d
	case *bip.Device:
		if !bipSetup(d) {
			return false
		}
		dev = d
	default:
		return false
	}
	st := &C.adimpi_fast
	w := mpi.World()
	for i, t := range builtinTypes {
		st.tsize[i], st.sig[i] = 0, 0
		if i < C.ADIMPI_FAST_TYPES && t != nil && t.Contiguous() && t.TrueLB() == 0 && t.Size() > 0 {
			st.tsize[i], st.sig[i] = C.uint32_t(t.Size()), C.uint32_t(t.Signature())
		}
	}
	st.rank, st.size, st.ctx = C.int32_t(w.Rank()), C.int32_t(w.Size()), C.uint32_t(w.PointToPointContext())
	st.spin = fastSpinPolls
	if n, err := strconv.Atoi(os.Getenv("ADIMPI_CFAST_SPIN")); err == nil && n >= 0 {
		st.spin = C.int32_t(min(n, 1<<30))
	}
	fast.dev, fast.spoiled, fast.level = dev, false, max(required, mpi.ThreadSingle)
	fastGate()
	return true
}

// netvmSetup gives the C side netvm's rings, if the device's ring
// encoding is the one fastpath.h has.
func netvmSetup(d *netvm.Device) bool {
	if netvm.FastSlots != C.ADIMPI_FAST_SLOTS || netvm.FastSlotSize != C.ADIMPI_FAST_SLOT_SIZE || netvm.FastInlineMax != C.ADIMPI_FAST_INLINE {
		return false
	}
	w := mpi.World()
	n := w.Size()
	st := &C.adimpi_fast
	if st.rings == nil {
		st.rings = (*C.adimpi_fast_ring)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.adimpi_fast_ring{}))))
	}
	rings := unsafe.Slice(st.rings, n)
	for r := range rings {
		f, ok := d.FastRing(r)
		if !ok {
			rings[r] = C.adimpi_fast_ring{}
			continue
		}
		rings[r] = C.adimpi_fast_ring{
			out: (*C.uint8_t)(addrPointer(f.Out)), out_tail: (*C.uint64_t)(addrPointer(f.OutTail)), out_head: (*C.uint64_t)(addrPointer(f.OutHead)),
			doorbell: (*C.uint32_t)(addrPointer(f.Doorbell)), sleepers: (*C.uint32_t)(addrPointer(f.Sleepers)),
			in: (*C.uint8_t)(addrPointer(f.In)), in_head: (*C.uint64_t)(addrPointer(f.InHead)), in_reported: (*C.uint64_t)(addrPointer(f.InReported)),
			report: (*C.uint64_t)(addrPointer(f.Report)),
		}
	}
	st.kind, st.eager_type = C.ADIMPI_FAST_NETVM, C.uint32_t(netvm.FastEagerType)
	return true
}

// fastOff turns the fast path off for the rest of the run (MPI_Finalize).
func fastOff() {
	fast.dev = nil
	C.adimpi_fast.open = 0
}

// fastGate opens the fast path for the C calls that follow this call into
// Go when nothing but those calls can touch the device until the next
// call into Go, and nothing the device holds could be overtaken by a
// message the fast path moves: no request handle alive (its operation may
// be pending, or run on in a goroutine), no request freed while it may
// have been running, the core quiet (mpi.QuietDevice), and the device
// quiet (netvm's FastQuiet). Every generated call runs it on its way out
// (guard).
func fastGate() {
	if fast.dev == nil {
		return
	}
	open := !fast.spoiled && requests.live.Load() == 0 && mpi.QuietDevice() != nil && fast.dev.FastQuiet()
	if open {
		C.adimpi_fast.open = 1
	} else {
		C.adimpi_fast.open = 0
	}
}

// bipSetup gives the C side bip's queues and credit counters, if the
// cursors' layout is the one fastpath.h has and an 8-byte message is
// eager.
func bipSetup(d *bip.Device) bool {
	var c C.adimpi_bip_cursors
	want := [...]uintptr{
		unsafe.Sizeof(c),
		unsafe.Offsetof(c.tail), unsafe.Offsetof(c.tail_at), unsafe.Offsetof(c.seen_head),
		unsafe.Offsetof(c.head), unsafe.Offsetof(c.head_at),
		unsafe.Offsetof(c.used), unsafe.Offsetof(c.granted), unsafe.Offsetof(c.consumed), unsafe.Offsetof(c.reported),
	}
	sh := d.FastShape()
	if want != bip.FastCursorLayout || sh.Eager < C.ADIMPI_FAST_INLINE {
		return false
	}
	n := mpi.World().Size()
	st := &C.adimpi_fast
	if st.bip == nil {
		st.bip = (*C.adimpi_bip_queue)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.adimpi_bip_queue{}))))
	}
	queues := unsafe.Slice(st.bip, n)
	for r := range queues {
		f, ok := d.FastQueue(r)
		if !ok {
			queues[r] = C.adimpi_bip_queue{}
			continue
		}
		queues[r] = C.adimpi_bip_queue{
			out: (*C.uint8_t)(addrPointer(f.Out)), in: (*C.uint8_t)(addrPointer(f.In)),
			doorbell: (*C.uint32_t)(addrPointer(f.Doorbell)), sleepers: (*C.uint32_t)(addrPointer(f.Sleepers)),
			cur: (*C.adimpi_bip_cursors)(addrPointer(f.Cursors)),
		}
	}
	st.kind = C.ADIMPI_FAST_BIP
	st.bip_off_queue, st.bip_slot_bytes, st.bip_queue = C.int64_t(sh.OffQueue), C.int64_t(sh.SlotBytes), C.int64_t(sh.Queue)
	st.bip_credit, st.bip_eager_type, st.bip_credit_type = C.uint32_t(sh.Credit), C.uint32_t(bip.FastEagerType), C.uint32_t(bip.FastCreditType)
	st.bip_block_head, st.bip_block_wait = C.int32_t(bip.FastBlockHead), C.int32_t(bip.FastBlockWaitSpace)
	st.bip_slot_header, st.bip_header = C.int32_t(bip.FastSlotHeader), C.int32_t(bip.FastHeader)
	return true
}
