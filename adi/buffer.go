package adi

import "github.com/adimpi/adimpi/datatype"

// Buffer is a data descriptor: Count elements of Type laid out from the start
// of Mem. Devices move its packed bytes with Pieces (or the Copy helpers), so
// non-contiguous data can travel block by block without a pack buffer.
type Buffer struct {
	Mem   []byte
	Count int
	Type  *datatype.Type
}

// Bytes describes a plain byte slice.
func Bytes(b []byte) Buffer { return Buffer{Mem: b, Count: len(b), Type: datatype.Byte} }

// Size is the number of packed data bytes the buffer holds.
func (b Buffer) Size() int {
	if b.Type == nil {
		return 0
	}
	return b.Count * b.Type.Size()
}

// Contiguous reports whether the packed bytes are exactly Mem[:Size()].
func (b Buffer) Contiguous() bool { return b.Type == nil || b.Type.Contiguous() }

// Pieces calls fn with the contiguous memory pieces holding packed bytes
// [off, off+n), in order.
func (b Buffer) Pieces(off, n int, fn func(piece []byte) error) error {
	if n <= 0 {
		return nil
	}
	if b.Contiguous() {
		return fn(b.Mem[off : off+n])
	}
	return b.Type.Blocks(b.Mem, b.Count, off, n, fn)
}

// CopyIn scatters src into the buffer's packed bytes starting at off.
func (b Buffer) CopyIn(off int, src []byte) {
	if b.Contiguous() {
		copy(b.Mem[off:], src)
		return
	}
	_ = b.Pieces(off, len(src), func(p []byte) error {
		n := copy(p, src)
		src = src[n:]
		return nil
	})
}

// CopyOut gathers the buffer's packed bytes starting at off into dst.
func (b Buffer) CopyOut(off int, dst []byte) {
	if b.Contiguous() {
		copy(dst, b.Mem[off:])
		return
	}
	_ = b.Pieces(off, len(dst), func(p []byte) error {
		n := copy(dst, p)
		dst = dst[n:]
		return nil
	})
}
