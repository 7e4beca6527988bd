package wire

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The non-blocking calls on a message's path (a read, a writev, a zero
// timeout epoll_wait) return at once, so they skip the Go runtime's
// bookkeeping for a call that may block (entersyscall and exitsyscall,
// which hand the processor over and take it back): raw system calls, as
// the runtime itself makes for calls that cannot block. A transfer larger
// than rawMax may spend long in the kernel copying, and goes through the
// ordinary path so that the scheduler may run other goroutines meanwhile.

// rawMax is the largest write made with a raw system call, and
// rawReadMax the largest read buffer (a connection's input buffer: a read
// copies only what has arrived).
const (
	rawMax     = 64 << 10
	rawReadMax = inCap
)

// readFD reads from the non-blocking fd into b. It returns the error as
// an Errno (0: none): an idle Poll's read ends in EAGAIN, which an error
// interface would cost a conversion and comparisons.
func readFD(fd int, b []byte) (int, unix.Errno) {
	if len(b) > rawReadMax {
		n, err := unix.Read(fd, b)
		if err != nil {
			if e, ok := err.(unix.Errno); ok {
				return 0, e
			}
			return 0, unix.EIO
		}
		return n, 0
	}
	if len(b) == 0 {
		return 0, 0
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), e
}

// writeFD writes b to the non-blocking fd.
func writeFD(fd int, b []byte) (int, error) {
	if len(b) > rawMax {
		return unix.Write(fd, b)
	}
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// writevFD writes a then b (both non-empty) to the non-blocking fd with
// one writev.
func writevFD(fd int, a, b []byte) (int, error) {
	if len(a)+len(b) > rawMax {
		return unix.Writev(fd, [][]byte{a, b})
	}
	iov := [2]unix.Iovec{{Base: &a[0]}, {Base: &b[0]}}
	iov[0].SetLen(len(a))
	iov[1].SetLen(len(b))
	n, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), 2)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// epollNow is epoll_wait with a zero timeout: the events ready now.
func epollNow(ep int, events []unix.EpollEvent) int {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0
	}
	return int(n)
}
