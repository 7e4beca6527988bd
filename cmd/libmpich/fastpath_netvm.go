//go:build cgo

package main

/*
#include <stdlib.h>
#include "fastpath.h"
*/
import "C"

import (
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/devices/netvm"
	"github.com/adimpi/adimpi/mpi"
)

// netvmSetup gives the C side (fastpath_netvm.c) netvm's rings, if dev is
// netvm and its ring encoding is the one fastpath.h has.
func netvmSetup(dev adi.Device) fastDevice {
	d, ok := dev.(*netvm.Device)
	if !ok || netvm.FastSlots != C.ADIMPI_FAST_SLOTS || netvm.FastSlotSize != C.ADIMPI_FAST_SLOT_SIZE || netvm.FastInlineMax != C.ADIMPI_FAST_INLINE {
		return nil
	}
	w := mpi.World()
	n := w.Size()
	st := &C.adimpi_fast.netvm
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
	st.eager_type = C.uint32_t(netvm.FastEagerType)
	C.adimpi_fast.kind = C.ADIMPI_FAST_NETVM
	return d
}
