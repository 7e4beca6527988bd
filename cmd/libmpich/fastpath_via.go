//go:build cgo

package main

/*
#include <stdlib.h>
#include "fastpath.h"

// The encoding fastpath_via.c has, for viaSetup to check against via's.
enum { via_vi_hdr = 128, via_slot = 128, via_comp = 16, via_seg0 = 32, via_hdr = 48, via_eager = 1, via_done = 1 };
*/
import "C"

import (
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/devices/via"
	"github.com/adimpi/adimpi/mpi"
)

// viaSetup gives the C side (fastpath_via.c) via's receive queues and the
// device's credit counters, if dev is via and the queues' and messages'
// encoding is the one fastpath_via.c has.
func viaSetup(dev adi.Device) fastDevice {
	d, ok := dev.(*via.Device)
	if !ok || via.FastEncoding != [...]uint32{C.via_vi_hdr, C.via_slot, C.via_comp, C.via_seg0, C.via_hdr, C.via_eager, C.via_done} {
		return nil
	}
	eager, credits := d.FastShape()
	n := mpi.World().Size()
	st := &C.adimpi_fast.via
	if st.links == nil {
		st.links = (*C.adimpi_via_link)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.adimpi_via_link{}))))
	}
	links := unsafe.Slice(st.links, n)
	for r := range links {
		f, ok := d.FastLink(r)
		if !ok {
			links[r] = C.adimpi_via_link{}
			continue
		}
		fast.pin.Pin(f.VI)
		fast.pin.Pin(f.Peer)
		links[r] = C.adimpi_via_link{
			peer_rq: (*C.uint8_t)(addrPointer(f.PeerRQ)), peer_host: (*C.uint8_t)(addrPointer(f.PeerHost)),
			peer_host_va: C.uint64_t(f.PeerHostVA), peer_host_len: C.uint64_t(f.PeerHostLen),
			peer_app: (*C.uint32_t)(addrPointer(f.PeerApp)), peer_nic: (*C.uint32_t)(addrPointer(f.PeerNIC)),
			rq: (*C.uint8_t)(addrPointer(f.RQ)), peer_rq_len: C.uint32_t(f.PeerRQLen), rq_len: C.uint32_t(f.RQLen),
			rq_head: (*C.uint64_t)(f.RQHead), rq_tail: (*C.uint64_t)(f.RQTail), rq_app: (*C.uint64_t)(f.RQApp),
			ring_len: (*C.int64_t)(f.RingLen), ring_head: (*C.int64_t)(f.RingHead), ring_n: (*C.int64_t)(f.RingN),
			credits: (*C.int64_t)(f.Credits), owed: (*C.int64_t)(f.Owed),
		}
	}
	st.app_sleep, st.eager, st.credits = C.uint32_t(via.FastAppSleep), C.int32_t(min(eager, C.ADIMPI_FAST_INLINE)), C.int64_t(credits)
	C.adimpi_fast.kind = C.ADIMPI_FAST_VIA
	return viaGate{d}
}

// viaGate is via's side of fastGate: before it asks the device whether it
// is quiet, it settles what the device's next Progress would do first
// (via.Device.FastSettle), so that a receive or send that went through Go
// does not keep the fast path closed for the next call too.
type viaGate struct{ d *via.Device }

// FastQuiet settles the device and reports whether it is quiet.
func (g viaGate) FastQuiet() bool {
	g.d.FastSettle()
	return g.d.FastQuiet()
}
