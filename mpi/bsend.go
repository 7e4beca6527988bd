package mpi

import (
	"sort"
	"sync/atomic"

	"github.com/adimpi/adimpi/adi"
)

// BsendOverhead is the extra space each buffered send takes in the attached
// buffer, on top of its data (MPI_BSEND_OVERHEAD).
const BsendOverhead = 64

// bsendBuffer is the user's attached buffer and the sends living in it.
type bsendBuffer struct {
	mem     []byte
	used    []span // allocated regions, sorted by offset
	pending atomic.Int64
}

type span struct{ off, n int }

func (b *bsendBuffer) idle() bool { return b.pending.Load() == 0 }

// alloc finds room for n bytes (first fit), or reports false.
func (b *bsendBuffer) alloc(n int) (int, bool) {
	at := 0
	for i, s := range b.used {
		if s.off-at >= n {
			b.used = append(b.used, span{})
			copy(b.used[i+1:], b.used[i:])
			b.used[i] = span{at, n}
			return at, true
		}
		at = s.off + s.n
	}
	if len(b.mem)-at >= n {
		b.used = append(b.used, span{at, n})
		return at, true
	}
	return 0, false
}

func (b *bsendBuffer) free(off int) {
	i := sort.Search(len(b.used), func(i int) bool { return b.used[i].off >= off })
	if i < len(b.used) && b.used[i].off == off {
		b.used = append(b.used[:i], b.used[i+1:]...)
	}
}

func (b *bsendBuffer) freeBytes() int {
	n := len(b.mem)
	for _, s := range b.used {
		n -= s.n
	}
	return n
}

// BufferAttach gives MPI a buffer for buffered sends (Bsend, Ibsend). Each
// buffered send uses its data size plus BsendOverhead bytes of it until the
// message has left.
func BufferAttach(buf []byte) error {
	r, err := current("MPI_Buffer_attach")
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bsend.mem != nil {
		return errorf(ErrBuffer, "MPI_Buffer_attach", "a buffer of %d bytes is already attached", len(r.bsend.mem))
	}
	if len(buf) == 0 {
		return errorf(ErrBuffer, "MPI_Buffer_attach", "buffer is empty")
	}
	r.bsend.mem = buf
	return nil
}

// BufferDetach waits until every buffered send has left the attached buffer,
// then detaches it and returns it.
func BufferDetach() ([]byte, error) {
	r, err := current("MPI_Buffer_detach")
	if err != nil {
		return nil, err
	}
	if err := r.waitFor(r.bsend.idle); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	buf := r.bsend.mem
	if buf == nil {
		return nil, errorf(ErrBuffer, "MPI_Buffer_detach", "no buffer is attached")
	}
	r.bsend.mem, r.bsend.used = nil, nil
	return buf, nil
}

// bsendStart copies ar's data into the attached buffer, sends the copy, and
// completes ar at once.
func (r *runtime) bsendStart(op string, ar *adi.Request) error {
	n := ar.Buf.Size()
	r.mu.Lock()
	defer r.mu.Unlock()
	off, ok := r.bsend.alloc(n + BsendOverhead)
	if !ok {
		free := r.bsend.freeBytes()
		if r.bsend.mem == nil {
			return errorf(ErrBuffer, op, "no buffer attached (BufferAttach) for a buffered send of %d bytes", n)
		}
		return errorf(ErrBuffer, op, "buffered send of %d bytes needs %d bytes of attached buffer; %d of %d are free", n, n+BsendOverhead, free, len(r.bsend.mem))
	}
	region := r.bsend.mem[off+BsendOverhead : off+BsendOverhead+n]
	ar.Buf.CopyOut(0, region)
	inner := &adi.Request{Op: adi.OpSend, Context: ar.Context, Peer: ar.Peer, Tag: ar.Tag, Buf: adi.Bytes(region)}
	inner.OnDone = func(*adi.Request) {
		r.bsend.free(off)
		r.bsend.pending.Add(-1)
	}
	r.bsend.pending.Add(1)
	if err := r.dev.Isend(inner); err != nil {
		r.bsend.free(off)
		r.bsend.pending.Add(-1)
		return err
	}
	ar.Complete(adi.Status{Bytes: n})
	return nil
}
