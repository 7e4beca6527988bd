// Package shm is the shared-memory substrate the devices stand on: memory
// segments that one process exports under a 64-bit key and its peers import,
// cross-process futex wake-ups, and single-copy remote write/read into another
// process's virtual memory (NetVM's write/read/export/import/unexport).
//
// Segments are memfd files. The exporter keeps the descriptor open; an
// importer opens /proc/<pid>/fd/<fd> and maps it. Nothing is ever created in
// /dev/shm, so nothing is left behind when processes die, even by SIGKILL:
// the kernel frees the memory when the last mapping and descriptor go away.
package shm

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HeaderSize is the number of bytes at the start of every segment reserved
// for the segment's own header (magic, key, size). User data starts here.
const HeaderSize = 64

const magic = 0x6164696d70697368 // "adimpish"

// Segment is a mapped shared-memory segment, either exported by this process
// or imported from a peer.
type Segment struct {
	// Mem is the whole mapping, header included.
	Mem []byte
	// Key is the 64-bit key that importers must present.
	Key uint64
	// FD is the memfd of an exported segment (-1 for an imported one).
	FD int
	// Pid is the process that exported the segment.
	Pid int
}

// Export creates a segment of size bytes (rounded up to a page) named name,
// zero-filled, with a fresh random key written into its header.
func Export(name string, size int) (*Segment, error) {
	size = roundPage(size + HeaderSize)
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create %q: %w", name, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: ftruncate %q to %d bytes: %w", name, size, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: mmap %q: %w", name, err)
	}
	var kb [8]byte
	if _, err := rand.Read(kb[:]); err != nil {
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, fmt.Errorf("shm: key: %w", err)
	}
	key := binary.LittleEndian.Uint64(kb[:])
	binary.LittleEndian.PutUint64(mem[8:], key)
	binary.LittleEndian.PutUint64(mem[16:], uint64(size))
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&mem[0])), magic)
	return &Segment{Mem: mem, Key: key, FD: fd, Pid: os.Getpid()}, nil
}

// Import maps the segment that process pid exported as descriptor fd, and
// checks that its key is key. A process may import a segment it exported
// itself: it gets a second mapping of the same memory (several ranks of a
// job in one test process do so).
func Import(pid, fd int, key uint64) (*Segment, error) {
	var mem []byte
	path := fmt.Sprintf("/proc/%d/fd/%d", pid, fd)
	lfd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: import %s: %w", path, err)
	}
	defer unix.Close(lfd)
	var st unix.Stat_t
	if err := unix.Fstat(lfd, &st); err != nil {
		return nil, fmt.Errorf("shm: fstat %s: %w", path, err)
	}
	if st.Size < HeaderSize {
		return nil, fmt.Errorf("shm: %s is %d bytes, too small for a segment", path, st.Size)
	}
	mem, err = unix.Mmap(lfd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap %s: %w", path, err)
	}
	if m := atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[0]))); m != magic {
		unix.Munmap(mem)
		return nil, fmt.Errorf("shm: %s is not an adimpi segment", path)
	}
	if k := binary.LittleEndian.Uint64(mem[8:]); k != key {
		unix.Munmap(mem)
		return nil, fmt.Errorf("shm: %s: key mismatch", path)
	}
	return &Segment{Mem: mem, Key: key, FD: -1, Pid: pid}, nil
}

// Close unmaps the segment and, for an exported one, closes its descriptor
// (NetVM's unexport). Peers that still map it keep their mapping.
func (s *Segment) Close() error {
	if s == nil || s.Mem == nil {
		return nil
	}
	err := unix.Munmap(s.Mem)
	s.Mem = nil
	if s.FD >= 0 {
		if cerr := unix.Close(s.FD); err == nil {
			err = cerr
		}
		s.FD = -1
	}
	return err
}

// Uint32 returns a pointer to the 32-bit word at byte offset off, for atomic use.
func (s *Segment) Uint32(off int) *uint32 {
	return (*uint32)(unsafe.Pointer(&s.Mem[off]))
}

// Uint64 returns a pointer to the 64-bit word at byte offset off, for atomic use.
func (s *Segment) Uint64(off int) *uint64 {
	return (*uint64)(unsafe.Pointer(&s.Mem[off]))
}

func roundPage(n int) int {
	p := os.Getpagesize()
	return (n + p - 1) / p * p
}
