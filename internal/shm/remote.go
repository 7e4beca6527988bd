package shm

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxIov bounds the iovecs handed to one process_vm_* call (the kernel's IOV_MAX).
const maxIov = 1024

// RemoteWrite copies the local pieces, in order, into process pid's virtual
// memory starting at remote: a single copy, without the peer's involvement
// (NetVM remote write). It returns the first error, wrapped.
func RemoteWrite(pid int, remote uintptr, pieces [][]byte) error {
	return remoteCopy(pid, remote, pieces, true)
}

// RemoteRead copies process pid's memory starting at remote into the local
// pieces, in order (NetVM remote read).
func RemoteRead(pid int, remote uintptr, pieces [][]byte) error {
	return remoteCopy(pid, remote, pieces, false)
}

func remoteCopy(pid int, remote uintptr, pieces [][]byte, write bool) error {
	local := make([]unix.Iovec, 0, min(len(pieces), maxIov))
	for len(pieces) > 0 {
		local = local[:0]
		total := 0
		for len(pieces) > 0 && len(local) < maxIov {
			p := pieces[0]
			pieces = pieces[1:]
			if len(p) == 0 {
				continue
			}
			iv := unix.Iovec{Base: &p[0]}
			iv.SetLen(len(p))
			local = append(local, iv)
			total += len(p)
		}
		for total > 0 {
			r := []unix.RemoteIovec{{Base: remote, Len: total}}
			var n int
			var err error
			if write {
				n, err = unix.ProcessVMWritev(pid, local, r, 0)
			} else {
				n, err = unix.ProcessVMReadv(pid, local, r, 0)
			}
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				op := "process_vm_readv"
				if write {
					op = "process_vm_writev"
				}
				return fmt.Errorf("shm: %s pid %d addr %#x len %d: %w", op, pid, remote, total, err)
			}
			if n == 0 {
				return fmt.Errorf("shm: remote copy to pid %d made no progress", pid)
			}
			remote += uintptr(n)
			total -= n
			local = advance(local, n)
		}
	}
	return nil
}

// advance drops the first n bytes from the iovec list (after a short transfer).
func advance(iov []unix.Iovec, n int) []unix.Iovec {
	for n > 0 && len(iov) > 0 {
		l := int(iov[0].Len)
		if n < l {
			iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), n))
			iov[0].SetLen(l - n)
			return iov
		}
		n -= l
		iov = iov[1:]
	}
	return iov
}

// CanRemoteWrite reports whether this process may write into process pid's
// memory at addr (a word the peer published for this probe). Containers and
// Yama may forbid process_vm_writev; devices then fall back to copies through
// shared memory.
func CanRemoteWrite(pid int, addr uintptr) bool {
	var b [8]byte
	if err := RemoteRead(pid, addr, [][]byte{b[:]}); err != nil {
		return false
	}
	return RemoteWrite(pid, addr, [][]byte{b[:]}) == nil
}

// Alive reports whether process pid still exists (and is not a zombie we can
// see as such).
func Alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}
