package dmcs

import (
	"fmt"
	"sort"
	"unsafe"

	"github.com/adimpi/adimpi/mpi"
)

// With Options.Heap, every process has a heap of that many bytes in an MPI
// window (WinAllocate over DMCS's communicator, a passive-target epoch on
// every process held from Init to Close). Put, Get and PutOp of memory in
// a heap are MPI_Put, MPI_Get and MPI_Accumulate followed by a flush
// wherever the window reaches the target's memory directly (win.Native:
// processes of one host map each other's heaps): the target takes no part
// and need not poll. Towards other hosts they stay requests its poll
// serves. Heap memory comes from HeapAlloc (this process's own) and from
// Malloc (a peer's, when its heap has room).

// heapSeg is the segment number of heap Ptrs; the offset is the
// displacement in the window.
const heapSeg = 1<<32 - 1

// heap is a process's window and its allocator.
type heap struct {
	win  *mpi.Win
	mem  []byte
	free []span         // free spans, by offset, coalesced
	size map[uint64]int // allocated blocks: offset → bytes
}

type span struct{ off, n uint64 }

// setupHeap allocates the window (collective over d.comm) and opens the
// epoch.
func setupHeap(d *DMCS, n int) (*heap, error) {
	win, mem, err := mpi.WinAllocateBytes(d.comm, n, 1, nil)
	if err != nil {
		return nil, fmt.Errorf("dmcs: Init: %w", err)
	}
	if err := win.LockAll(0); err != nil {
		win.Free()
		return nil, fmt.Errorf("dmcs: Init: %w", err)
	}
	return &heap{win: win, mem: mem, free: []span{{0, uint64(n)}}, size: map[uint64]int{}}, nil
}

// close ends the epoch and frees the window (collective).
func (h *heap) close() error {
	err := h.win.UnlockAll()
	if ferr := h.win.Free(); err == nil {
		err = ferr
	}
	return err
}

// alloc takes n bytes (rounded up to 8) first-fit, or reports false.
func (h *heap) alloc(n int) (uint64, bool) {
	want := uint64(max(n, 1)+7) &^ 7
	for i, s := range h.free {
		if s.n < want {
			continue
		}
		if s.n == want {
			h.free = append(h.free[:i], h.free[i+1:]...)
		} else {
			h.free[i] = span{s.off + want, s.n - want}
		}
		clear(h.mem[s.off : s.off+want])
		h.size[s.off] = int(want)
		return s.off, true
	}
	return 0, false
}

// release gives back the block at off, or reports false if there is none.
func (h *heap) release(off uint64) bool {
	n, ok := h.size[off]
	if !ok {
		return false
	}
	delete(h.size, off)
	i := sort.Search(len(h.free), func(i int) bool { return h.free[i].off > off })
	h.free = append(h.free, span{})
	copy(h.free[i+1:], h.free[i:])
	h.free[i] = span{off, uint64(n)}
	// Coalesce with the neighbours.
	if i+1 < len(h.free) && h.free[i].off+h.free[i].n == h.free[i+1].off {
		h.free[i].n += h.free[i+1].n
		h.free = append(h.free[:i+1], h.free[i+2:]...)
	}
	if i > 0 && h.free[i-1].off+h.free[i-1].n == h.free[i].off {
		h.free[i-1].n += h.free[i].n
		h.free = append(h.free[:i], h.free[i+1:]...)
	}
	return true
}

// HeapAlloc allocates n bytes (zeroed) of this process's heap and returns
// their Ptr, for peers' one-sided Put, Get and PutOp, and the memory
// itself. It needs Options.Heap. Free it with HeapFree.
func (d *DMCS) HeapAlloc(n int) (Ptr, []byte, error) {
	if d.heap == nil {
		return 0, nil, fmt.Errorf("dmcs: HeapAlloc: no heap (Options.Heap is 0)")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	off, ok := d.heap.alloc(n)
	if !ok {
		return 0, nil, fmt.Errorf("dmcs: HeapAlloc: no room for %d bytes in the heap of %d", n, len(d.heap.mem))
	}
	return mkPtr(heapSeg) + Ptr(off), d.heap.mem[off : off+uint64(n)], nil
}

// HeapFree frees memory HeapAlloc gave.
func (d *DMCS) HeapFree(p Ptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.heap == nil || p.seg() != heapSeg || !d.heap.release(p.off()) {
		return fmt.Errorf("dmcs: HeapFree: %v is not a block of this process's heap", p)
	}
	return nil
}

// oneSided reports whether an operation on dest's p goes through the
// window, without dest's help.
func (d *DMCS) oneSided(dest int, p Ptr) bool {
	return d.heap != nil && p.seg() == heapSeg && dest >= 0 && dest < d.size && d.native[dest]
}

// winPut is Put through the window.
func (d *DMCS) winPut(dest int, p Ptr, data []byte) error {
	w := d.heap.win
	if err := mpi.Put(w, data, dest, int(p.off())); err != nil {
		return fmt.Errorf("dmcs: Put on rank %d: %w", dest, err)
	}
	if err := w.Flush(dest); err != nil {
		return fmt.Errorf("dmcs: Put on rank %d: %w", dest, err)
	}
	return nil
}

// winGet is Get through the window.
func (d *DMCS) winGet(dest int, p Ptr, buf []byte) error {
	w := d.heap.win
	if err := mpi.Get(w, buf, dest, int(p.off())); err != nil {
		return fmt.Errorf("dmcs: Get on rank %d: %w", dest, err)
	}
	if err := w.Flush(dest); err != nil {
		return fmt.Errorf("dmcs: Get on rank %d: %w", dest, err)
	}
	return nil
}

// winAcc is PutOp through the window (dest may be this process: a request
// from another host applies its accumulate so, atomically with the
// window's other accumulates).
func (d *DMCS) winAcc(dest int, p Ptr, data []byte, op AccOp) error {
	w := d.heap.win
	n := len(data) / 8
	if n == 0 {
		return nil
	}
	ptr := unsafe.Pointer(&data[0])
	disp := int(p.off())
	var err error
	switch op {
	case Replace:
		err = mpi.Accumulate(w, unsafe.Slice((*uint64)(ptr), n), dest, disp, mpi.Replace)
	case SumInt64:
		err = mpi.Accumulate(w, unsafe.Slice((*int64)(ptr), n), dest, disp, mpi.Sum)
	case SumFloat64:
		err = mpi.Accumulate(w, unsafe.Slice((*float64)(ptr), n), dest, disp, mpi.Sum)
	case MinInt64:
		err = mpi.Accumulate(w, unsafe.Slice((*int64)(ptr), n), dest, disp, mpi.Min)
	case MaxInt64:
		err = mpi.Accumulate(w, unsafe.Slice((*int64)(ptr), n), dest, disp, mpi.Max)
	case BorUint64:
		err = mpi.Accumulate(w, unsafe.Slice((*uint64)(ptr), n), dest, disp, mpi.Bor)
	case BandUint64:
		err = mpi.Accumulate(w, unsafe.Slice((*uint64)(ptr), n), dest, disp, mpi.Band)
	case BxorUint64:
		err = mpi.Accumulate(w, unsafe.Slice((*uint64)(ptr), n), dest, disp, mpi.Bxor)
	}
	if err == nil {
		err = w.Flush(dest)
	}
	if err != nil {
		return fmt.Errorf("dmcs: PutOp on rank %d: %w", dest, err)
	}
	return nil
}

// heapAlloc is a peer's Malloc in this process's heap, if it has one with
// room (under d.mu).
func (d *DMCS) heapAlloc(n int) (uint64, bool) {
	if d.heap == nil {
		return 0, false
	}
	return d.heap.alloc(n)
}
