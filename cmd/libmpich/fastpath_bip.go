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
	"github.com/adimpi/adimpi/devices/bip"
	"github.com/adimpi/adimpi/mpi"
)

// bipSetup gives the C side (fastpath_bip.c) bip's queues and credit
// counters, if dev is bip, the cursors' layout is the one fastpath.h has
// and an 8-byte message is eager.
func bipSetup(dev adi.Device) fastDevice {
	d, ok := dev.(*bip.Device)
	if !ok {
		return nil
	}
	var c C.adimpi_bip_cursors
	want := [...]uintptr{
		unsafe.Sizeof(c),
		unsafe.Offsetof(c.tail), unsafe.Offsetof(c.tail_at), unsafe.Offsetof(c.seen_head),
		unsafe.Offsetof(c.head), unsafe.Offsetof(c.head_at),
		unsafe.Offsetof(c.used), unsafe.Offsetof(c.granted), unsafe.Offsetof(c.consumed), unsafe.Offsetof(c.reported),
	}
	sh := d.FastShape()
	if want != bip.FastCursorLayout || sh.Eager < C.ADIMPI_FAST_INLINE {
		return nil
	}
	n := mpi.World().Size()
	st := &C.adimpi_fast.bip
	if st.queues == nil {
		st.queues = (*C.adimpi_bip_queue)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.adimpi_bip_queue{}))))
	}
	queues := unsafe.Slice(st.queues, n)
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
	st.off_queue, st.slot_bytes, st.queue = C.int64_t(sh.OffQueue), C.int64_t(sh.SlotBytes), C.int64_t(sh.Queue)
	st.credit, st.eager_type, st.credit_type = C.uint32_t(sh.Credit), C.uint32_t(bip.FastEagerType), C.uint32_t(bip.FastCreditType)
	st.block_head, st.block_wait = C.int32_t(bip.FastBlockHead), C.int32_t(bip.FastBlockWaitSpace)
	st.slot_header, st.header = C.int32_t(bip.FastSlotHeader), C.int32_t(bip.FastHeader)
	C.adimpi_fast.kind = C.ADIMPI_FAST_BIP
	return d
}
