package xsk

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is one of the four single-producer single-consumer rings a socket
// shares with the kernel. Its producer and consumer indexes live in the
// shared mapping and are read and written atomically; the side that is not
// the owner of an index only reads it.
type ring struct {
	mem      []byte
	producer *uint32
	consumer *uint32
	flags    *uint32
	desc     unsafe.Pointer
	mask     uint32
	size     uint32
}

// mapRing maps the ring of n entries of entry bytes at page offset pgoff of
// the socket fd, with the layout off the kernel gave.
func mapRing(fd int, pgoff int64, n, entry uint32, off unix.XDPRingOffset) (ring, error) {
	length := int(off.Desc) + int(n*entry)
	mem, err := unix.Mmap(fd, pgoff, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ring{}, fmt.Errorf("mmap of ring at %#x: %w", pgoff, err)
	}
	base := unsafe.Pointer(&mem[0])
	return ring{
		mem:      mem,
		producer: (*uint32)(unsafe.Add(base, off.Producer)),
		consumer: (*uint32)(unsafe.Add(base, off.Consumer)),
		flags:    (*uint32)(unsafe.Add(base, off.Flags)),
		desc:     unsafe.Add(base, off.Desc),
		mask:     n - 1,
		size:     n,
	}, nil
}

func (r *ring) unmap() {
	if r.mem != nil {
		_ = unix.Munmap(r.mem)
		r.mem = nil
	}
}

// needWakeup reports whether the kernel asks for a syscall to process the
// ring (XDP_RING_NEED_WAKEUP).
func (r *ring) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// free is the number of entries a producer may still add.
func (r *ring) free() uint32 {
	return r.size - (atomic.LoadUint32(r.producer) - atomic.LoadUint32(r.consumer))
}

// ready is the number of entries a consumer may take.
func (r *ring) ready() uint32 {
	return atomic.LoadUint32(r.producer) - atomic.LoadUint32(r.consumer)
}

// addr is the address entry i of a FILL or COMPLETION ring.
func (r *ring) addr(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.desc, uintptr(i&r.mask)*8))
}

// xdpDesc is entry i of an RX or TX ring.
func (r *ring) xdpDesc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.desc, uintptr(i&r.mask)*unsafe.Sizeof(unix.XDPDesc{})))
}
