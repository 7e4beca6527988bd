//go:build cgo

package main

/*
#include <stdlib.h>
#include "fastpath.h"

// The encoding fastpath_fm.c has, for fmSetup to check against fm's.
enum { fm_packet_header = 24, fm_short_flags = 7, fm_handler = 1, fm_mpi_header = 32, fm_eager_kind = 1 };
*/
import "C"

import (
	"unsafe"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/devices/fm"
	"github.com/adimpi/adimpi/mpi"
)

// fmSetup gives the C side (fastpath_fm.c) fm's packet regions, credit
// counters and Extract's pass counter, if dev is fm, the cursors' layout
// and the packet encoding are the ones fastpath_fm.c has, and a message of
// ADIMPI_FAST_INLINE bytes fits one eager packet (else as many bytes as
// do).
func fmSetup(dev adi.Device) fastDevice {
	d, ok := dev.(*fm.Device)
	if !ok {
		return nil
	}
	var c C.adimpi_fm_cursors
	want := [...]uintptr{
		unsafe.Sizeof(c),
		unsafe.Offsetof(c.sent), unsafe.Offsetof(c.returned), unsafe.Offsetof(c.send_at),
		unsafe.Offsetof(c.head), unsafe.Offsetof(c.head_at),
		unsafe.Offsetof(c.owed_pass), unsafe.Offsetof(c.owed),
	}
	if want != fm.FastCursorLayout || fm.FastPacketHeader != C.fm_packet_header || fm.FastShortFlags != C.fm_short_flags ||
		fm.FastHandler != C.fm_handler || fm.FastMPIHeader != C.fm_mpi_header || fm.FastEagerKind != C.fm_eager_kind {
		return nil
	}
	sh := d.FastShape()
	if sh.Eager < 0 {
		return nil
	}
	n := mpi.World().Size()
	st := &C.adimpi_fast.fm
	if st.peers == nil {
		st.peers = (*C.adimpi_fm_peer)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.adimpi_fm_peer{}))))
	}
	peers := unsafe.Slice(st.peers, n)
	for r := range peers {
		f, ok := d.FastPeer(r)
		if !ok {
			peers[r] = C.adimpi_fm_peer{}
			continue
		}
		fast.pin.Pin(f.Cursors) // in fm's peer, in Go's heap
		peers[r] = C.adimpi_fm_peer{
			out: (*C.uint8_t)(addrPointer(f.Out)), in: (*C.uint8_t)(addrPointer(f.In)),
			doorbell: (*C.uint32_t)(addrPointer(f.Doorbell)), sleepers: (*C.uint32_t)(addrPointer(f.Sleepers)),
			mailbox: (*C.uint64_t)(addrPointer(f.Mailbox)), report: (*C.uint64_t)(addrPointer(f.Report)),
			cur: (*C.adimpi_fm_cursors)(f.Cursors),
		}
	}
	fast.pin.Pin(sh.Pass)
	st.pass = (*C.uint64_t)(sh.Pass)
	st.packet, st.region, st.slots = C.int64_t(sh.Packet), C.int64_t(sh.Packet*sh.Slots), C.uint64_t(sh.Slots)
	st.ret_at, st.eager = C.uint32_t(sh.RetAt), C.int32_t(min(sh.Eager, C.ADIMPI_FAST_INLINE))
	C.adimpi_fast.kind = C.ADIMPI_FAST_FM
	return d
}
