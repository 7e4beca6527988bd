package shm

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations (linux/futex.h); the shared, non-private variants.
const (
	futexWait = 0
	futexWake = 1
)

// FutexWait sleeps while *addr == val, for at most timeout (0 means no limit).
// addr must lie in shared memory; the wait is process-shared (not
// FUTEX_PRIVATE). It returns nil on wake-up, on a value change, on timeout
// and on a signal: callers re-check their condition in every case.
func FutexWait(addr *uint32, val uint32, timeout time.Duration) error {
	var tsp unsafe.Pointer
	var ts unix.Timespec
	if timeout > 0 {
		ts = unix.NsecToTimespec(timeout.Nanoseconds())
		tsp = unsafe.Pointer(&ts)
	}
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val), uintptr(tsp), 0, 0)
	switch e {
	case 0, unix.EAGAIN, unix.ETIMEDOUT, unix.EINTR:
		return nil
	}
	return e
}

// FutexWake wakes up to n waiters sleeping on addr in any process.
func FutexWake(addr *uint32, n int) error {
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, uintptr(n), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
