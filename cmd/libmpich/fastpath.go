//go:build cgo

package main

/*
#include <stdlib.h>
#include "fastpath.h"
*/
import "C"

import (
	"os"
	"runtime"
	"strconv"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/mpi"
)

// The Go side of the C fast path of MPI_Send and MPI_Recv (fastpath.c):
// fastSetup gives it the device's links at MPI_Init, and fastGate, run at the
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
// for the run (a device without one, MPI_THREAD_MULTIPLE asked for,
// ADIMPI_CFAST=off), spoiled once a request was freed that may still run on in a goroutine;
// level is the thread level the library provides while it is on.
var fast struct {
	dev     fastDevice
	spoiled bool
	level   mpi.ThreadLevel
	pin     runtime.Pinner // what of Go's heap the C side points to (fm's cursors)
}

// fastDevice is what fastGate asks of a device with a fast path: whether
// it holds nothing that a message the C side moves could overtake or race
// with (the device's FastQuiet).
type fastDevice interface{ FastQuiet() bool }

// fastDevices are the devices with a C fast path, one setup each
// (fastpath_DEVICE.go): a setup that finds its device under dev, and the
// device's encoding as its fastpath_DEVICE.c has it, gives the C side the
// device's links, sets adimpi_fast.kind and returns the device; otherwise
// it returns nil having changed nothing. Each device's C half is in
// fastpath_DEVICE.c, named in fastpath.c's table.
var fastDevices = []func(dev adi.Device) fastDevice{netvmSetup, bipSetup, fmSetup, viaSetup}

// fastSetup turns the fast path on after MPI_Init (required: the thread
// level the program asked for, MPI_THREAD_SINGLE for MPI_Init), when the
// device has one (fastDevices: netvm, bip, fm, via) and the program asked for
// at most MPI_THREAD_SERIALIZED: it then provides that level, as MPICH
// does, and not adimpi's MPI_THREAD_MULTIPLE, under which two threads
// could move one ring's cursors at once. It reports whether the fast path is on.
func fastSetup(required mpi.ThreadLevel) bool {
	fastOff()
	if os.Getenv("ADIMPI_CFAST") == "off" || required > mpi.ThreadSerialized {
		return false
	}
	var dev fastDevice
	for _, setup := range fastDevices {
		if dev = setup(mpi.QuietDevice()); dev != nil {
			break
		}
	}
	if dev == nil {
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

// fastOff turns the fast path off for the rest of the run (MPI_Finalize).
func fastOff() {
	fast.dev = nil
	C.adimpi_fast.open = 0
	fast.pin.Unpin()
}

// fastGate opens the fast path for the C calls that follow this call into
// Go when nothing but those calls can touch the device until the next
// call into Go, and nothing the device holds could be overtaken by a
// message the fast path moves: no request handle alive (its operation may
// be pending, or run on in a goroutine), no request freed while it may
// have been running, the core quiet (mpi.QuietDevice), and the device
// quiet (its FastQuiet). Every generated call runs it on its way out
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
