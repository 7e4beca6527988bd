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

// RemoteSeg is a piece of another process's memory: an address in its
// virtual address space and a length.
type RemoteSeg struct {
	Addr uint64
	Len  uint64
}

// RemoteScatter writes the local pieces, in order, into the remote pieces
// of process pid, in order (a gather/scatter remote write): a single copy
// from a non-contiguous source into a non-contiguous destination. The two
// lists must cover the same number of bytes.
func RemoteScatter(pid int, local [][]byte, remote []RemoteSeg) error {
	li, loff := 0, 0 // next local piece, bytes of it already written
	ri, roff := 0, uint64(0)
	liov := make([]unix.Iovec, 0, maxIov)
	riov := make([]unix.RemoteIovec, 0, maxIov)
	for {
		for li < len(local) && loff == len(local[li]) {
			li, loff = li+1, 0
		}
		for ri < len(remote) && roff == remote[ri].Len {
			ri, roff = ri+1, 0
		}
		if li == len(local) || ri == len(remote) {
			if li != len(local) || ri != len(remote) {
				return fmt.Errorf("shm: scatter to pid %d: local and remote pieces cover different byte counts", pid)
			}
			return nil
		}
		// Build one call's worth of iovecs covering the same byte count.
		liov, riov = liov[:0], riov[:0]
		ltot, rtot := 0, 0
		for j, off := li, loff; j < len(local) && len(liov) < maxIov; j, off = j+1, 0 {
			p := local[j][off:]
			if len(p) == 0 {
				continue
			}
			iv := unix.Iovec{Base: &p[0]}
			iv.SetLen(len(p))
			liov = append(liov, iv)
			ltot += len(p)
		}
		for j, off := ri, roff; j < len(remote) && len(riov) < maxIov; j, off = j+1, 0 {
			s := remote[j]
			if s.Len == off {
				continue
			}
			riov = append(riov, unix.RemoteIovec{Base: uintptr(s.Addr + off), Len: int(s.Len - off)})
			rtot += int(s.Len - off)
		}
		want := min(ltot, rtot)
		trimLocal(&liov, want)
		trimRemote(&riov, want)
		n, err := unix.ProcessVMWritev(pid, liov, riov, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("shm: process_vm_writev pid %d (%d pieces): %w", pid, len(riov), err)
		}
		if n == 0 {
			return fmt.Errorf("shm: scatter to pid %d made no progress", pid)
		}
		// Advance both cursors by n bytes.
		for k := n; k > 0; {
			step := min(k, len(local[li])-loff)
			loff += step
			k -= step
			if loff == len(local[li]) && k > 0 {
				li, loff = li+1, 0
			}
		}
		for k := uint64(n); k > 0; {
			step := min(k, remote[ri].Len-roff)
			roff += step
			k -= step
			if roff == remote[ri].Len && k > 0 {
				ri, roff = ri+1, 0
			}
		}
	}
}

func trimLocal(iov *[]unix.Iovec, want int) {
	v := *iov
	for i := range v {
		l := int(v[i].Len)
		if want <= l {
			v[i].SetLen(want)
			*iov = v[:i+1]
			return
		}
		want -= l
	}
}

func trimRemote(iov *[]unix.RemoteIovec, want int) {
	v := *iov
	for i := range v {
		if want <= v[i].Len {
			v[i].Len = want
			*iov = v[:i+1]
			return
		}
		want -= v[i].Len
	}
}
