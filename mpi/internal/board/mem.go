package board

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func u64(mem []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&mem[off])) }

func u32(mem []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }

func closeFD(fd int) error { return unix.Close(fd) }
