package datatype

// PackSize is the number of bytes Pack writes for count elements of t:
// count*t.Size(), or -1 if count is negative or that overflows.
func PackSize(count int, t *Type) int {
	if t == nil || count < 0 {
		return -1
	}
	var c calc
	n := c.mul(count, t.size)
	if c.bad {
		return -1
	}
	return n
}

// Pack gathers the data of count elements of t from mem (laid out as the
// memory rule on Type says) into dst[pos:], and returns the position after
// them (MPI_Pack). t must be committed; a short dst or mem gives an ErrArg
// error and writes nothing.
func Pack(dst []byte, pos int, mem []byte, count int, t *Type) (int, error) {
	const op = "MPI_Pack"
	n, err := checkPack(op, len(dst), pos, mem, count, t)
	if err != nil || n == 0 {
		return pos, err
	}
	out := dst[pos : pos+n]
	if d, ok := t.dense(); ok {
		copy(out, mem[d:d+n])
		return pos + n, nil
	}
	p, a := t.prog(), t.Origin()
	for range count {
		out = out[p.pack(mem, a, out):]
		a += t.extent
	}
	return pos + n, nil
}

// Unpack scatters count elements of t from src[pos:] into mem (laid out as
// the memory rule on Type says) and returns the position after them
// (MPI_Unpack). t must be committed; a short src or mem gives an ErrArg
// error and writes nothing.
func Unpack(src []byte, pos int, mem []byte, count int, t *Type) (int, error) {
	const op = "MPI_Unpack"
	n, err := checkPack(op, len(src), pos, mem, count, t)
	if err != nil || n == 0 {
		return pos, err
	}
	in := src[pos : pos+n]
	if d, ok := t.dense(); ok {
		copy(mem[d:d+n], in)
		return pos + n, nil
	}
	p, a := t.prog(), t.Origin()
	for range count {
		in = in[p.unpack(mem, a, in):]
		a += t.extent
	}
	return pos + n, nil
}

// checkPack checks Pack/Unpack arguments and returns the packed size.
func checkPack(op string, buflen, pos int, mem []byte, count int, t *Type) (int, error) {
	if t == nil {
		return 0, errorf(ErrType, op, "datatype is nil")
	}
	if count < 0 {
		return 0, errorf(ErrCount, op, "count %d is negative", count)
	}
	n := PackSize(count, t)
	if n < 0 {
		return 0, errorf(ErrCount, op, "%d elements of %s overflow", count, t)
	}
	if err := t.checkWindow(op, mem, count, 0, n); err != nil {
		return 0, err
	}
	if pos < 0 || pos > buflen || n > buflen-pos {
		return 0, errorf(ErrArg, op, "%d packed bytes do not fit at position %d of a %d-byte buffer", n, pos, buflen)
	}
	return n, nil
}

// Segment is a resumable walk over the packed bytes of count elements of a
// committed type, for devices that move a typed buffer a piece at a time
// (for example into fixed-size network packets): Next returns the next
// contiguous piece of the buffer's memory, at most max bytes long, and
// advances. Seek repositions it at any packed offset in time logarithmic in
// the number of the type's blocks. A Segment holds no reference to memory:
// each call takes the buffer's mem, laid out as the memory rule on Type
// says, which must be at least t.Span(count) bytes long. A Segment is not
// safe for concurrent use.
type Segment struct {
	t            *Type
	p            *prog
	count        int
	pos, total   int
	dense        bool
	start        int // dense: mem index of the first data byte
	origin, size int
}

// NewSegment starts a walk over count elements of t at packed offset 0. It
// returns an ErrType error if t is nil or uncommitted and an ErrCount error
// if count is negative or too large.
func NewSegment(t *Type, count int) (*Segment, error) {
	const op = "NewSegment"
	if t == nil {
		return nil, errorf(ErrType, op, "datatype is nil")
	}
	if !t.Committed() {
		return nil, errorf(ErrType, op, "datatype %s is not committed", t)
	}
	total := PackSize(count, t)
	if total < 0 {
		return nil, errorf(ErrCount, op, "count %d is negative or too large", count)
	}
	s := &Segment{t: t, p: t.prog(), count: count, total: total, origin: t.Origin(), size: t.size}
	s.start, s.dense = t.dense()
	return s, nil
}

// Len is the total number of packed bytes, count*Size.
func (s *Segment) Len() int { return s.total }

// Pos is the packed offset of the next piece.
func (s *Segment) Pos() int { return s.pos }

// Seek sets the packed offset of the next piece; pos must be in [0, Len()].
func (s *Segment) Seek(pos int) error {
	if pos < 0 || pos > s.total {
		return errorf(ErrArg, "Segment.Seek", "position %d is outside [0, %d]", pos, s.total)
	}
	s.pos = pos
	return nil
}

// Next returns the piece of mem holding the next packed bytes, at most max
// of them, and advances past it; ok is false, and piece nil, once all
// Len() bytes have been returned or if max <= 0. It panics, as slice
// indexing does, if mem is shorter than Span(count).
func (s *Segment) Next(mem []byte, max int) (piece []byte, ok bool) {
	if s.pos >= s.total || max <= 0 {
		return nil, false
	}
	k := min(max, s.total-s.pos)
	var a int
	if s.dense {
		a = s.start + s.pos
	} else {
		e, in := s.pos/s.size, s.pos%s.size
		d, avail := s.p.locate(in)
		a = s.origin + e*s.t.extent + d
		k = min(k, avail)
	}
	s.pos += k
	return mem[a : a+k], true
}
