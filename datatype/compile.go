package datatype

import "encoding/binary"

// A committed type is compiled into a prog: the ordered list of segs that
// make up the packed bytes of one element, with displacements relative to
// the element's origin. A seg is a run of count repetitions, stride bytes
// apart, of either one contiguous block (sub == nil) or a nested prog. The
// packed offset of every seg is kept in pre, so a window's first block is
// found by binary search and division instead of a walk from the start.

// seg is a run of count repetitions of a block or of a nested prog.
type seg struct {
	disp   int   // displacement of the first repetition
	count  int   // repetitions, >= 1
	stride int   // bytes between repetitions (any sign; unused when count == 1)
	size   int   // packed bytes per repetition, > 0
	sub    *prog // nil: a repetition is one block of size bytes
}

// prog is the compiled form of one element of a type.
type prog struct {
	segs []seg
	pre  []int // pre[i] is the packed offset of segs[i]; pre[len(segs)] == size
	size int
}

// spliceMax is the largest nested prog that a single repetition of it is
// spliced into its parent rather than kept as a nested seg.
const spliceMax = 4

// builder appends segs, folding and merging them.
type builder struct{ segs []seg }

// add appends s, normalised and merged with the previous seg if possible.
func (b *builder) add(s seg) {
	if s.count <= 0 || s.size == 0 {
		return
	}
	for s.sub != nil {
		if len(s.sub.segs) == 0 {
			return
		}
		if s.count == 1 && len(s.sub.segs) <= spliceMax {
			for _, ss := range s.sub.segs {
				ss.disp += s.disp
				b.add(ss)
			}
			return
		}
		if len(s.sub.segs) != 1 {
			break
		}
		ss := s.sub.segs[0]
		switch {
		case ss.count == 1:
			s = seg{disp: s.disp + ss.disp, count: s.count, stride: s.stride, size: ss.size, sub: ss.sub}
		case s.stride == ss.count*ss.stride:
			s = seg{disp: s.disp + ss.disp, count: s.count * ss.count, stride: ss.stride, size: ss.size, sub: ss.sub}
		default:
			goto done
		}
	}
done:
	s.normalise()
	if n := len(b.segs); n > 0 && b.segs[n-1].merge(s) {
		return
	}
	b.segs = append(b.segs, s)
}

// normalise turns a run of abutting blocks into one block.
func (s *seg) normalise() {
	if s.count == 1 {
		s.stride = 0
	}
	if s.sub == nil && s.count > 1 && s.stride == s.size {
		s.size *= s.count
		s.count, s.stride = 1, 0
	}
}

// merge extends l by s when s continues it, reporting whether it did.
func (l *seg) merge(s seg) bool {
	if l.sub == nil && s.sub == nil && l.count == 1 && s.count == 1 && s.disp == l.disp+l.size {
		l.size += s.size
		return true
	}
	if l.sub != s.sub || l.size != s.size {
		return false
	}
	if l.count == 1 {
		st := s.disp - l.disp
		if s.count > 1 && s.stride != st {
			return false
		}
		l.stride = st
	} else if s.disp != l.disp+l.count*l.stride || (s.count > 1 && s.stride != l.stride) {
		return false
	}
	l.count += s.count
	l.normalise()
	return true
}

// finish makes the prog.
func (b *builder) finish() *prog {
	p := &prog{segs: b.segs, pre: make([]int, len(b.segs)+1)}
	for i, s := range b.segs {
		p.pre[i+1] = p.pre[i] + s.count*s.size
	}
	p.size = p.pre[len(b.segs)]
	return p
}

// find returns the index of the seg holding packed offset off (0 <= off < size).
func (p *prog) find(off int) int {
	lo, hi := 0, len(p.segs)-1
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if p.pre[m] <= off {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

// walk calls fn with the pieces of mem holding packed bytes [off, off+n) of
// one instance of p whose origin is mem[base], and returns how many of the n
// bytes lie beyond this instance.
func (p *prog) walk(mem []byte, base, off, n int, fn func([]byte) error) (int, error) {
	j := 0
	if off > 0 {
		j = p.find(off)
		off -= p.pre[j]
	}
	for ; j < len(p.segs) && n > 0; j++ {
		s := &p.segs[j]
		r, in := 0, 0
		if off > 0 {
			r, in = off/s.size, off%s.size
			off = 0
		}
		a := base + s.disp + r*s.stride
		if s.sub == nil {
			for ; r < s.count && n > 0; r++ {
				k := min(s.size-in, n)
				if err := fn(mem[a+in : a+in+k]); err != nil {
					return 0, err
				}
				n -= k
				in = 0
				a += s.stride
			}
			continue
		}
		for ; r < s.count && n > 0; r++ {
			var err error
			if n, err = s.sub.walk(mem, a, in, n, fn); err != nil {
				return 0, err
			}
			in = 0
			a += s.stride
		}
	}
	return n, nil
}

// locate returns the displacement, from the instance's origin, of packed
// byte off (0 <= off < size) and the number of packed bytes from there to
// the end of its contiguous block.
func (p *prog) locate(off int) (disp, avail int) {
	for {
		j := p.find(off)
		off -= p.pre[j]
		s := &p.segs[j]
		r, in := off/s.size, off%s.size
		disp += s.disp + r*s.stride
		if s.sub == nil {
			return disp + in, s.size - in
		}
		p, off = s.sub, in
	}
}

// leaf is the prog of a predefined type of size bytes.
func leaf(size int) *prog {
	var b builder
	b.add(seg{count: 1, size: size})
	return b.finish()
}

// rep is the prog of count copies of p, stride bytes apart.
func rep(p *prog, count, stride int) *prog {
	if count == 1 {
		return p
	}
	var b builder
	b.add(seg{count: count, stride: stride, size: p.size, sub: p})
	return b.finish()
}

// prog returns the type's compiled form, compiling it on first use.
func (t *Type) prog() *prog {
	if !t.ready.Load() {
		t.compile()
	}
	return t.compiled
}

// compile builds the compiled form and the facts cached with it, once.
func (t *Type) compile() {
	t.once.Do(func() {
		p := t.build()
		switch {
		case t.size == 0:
			t.denseOK = true
		case t.size == t.extent && len(p.segs) == 1 && p.segs[0].sub == nil && p.segs[0].count == 1:
			t.denseOK, t.denseStart = true, t.Origin()+p.segs[0].disp
		}
		t.sig = t.signature()
		t.compiled = p
		t.ready.Store(true)
	})
}

// build compiles the type.
func (t *Type) build() *prog {
	if t.inner != nil {
		return t.inner.prog()
	}
	if t.runs == nil {
		return leaf(t.size)
	}
	type key struct {
		old  *Type
		blen int
	}
	cache := map[key]*prog{}
	var b builder
	for _, r := range t.runs {
		if r.count == 0 || r.blen == 0 || r.old.size == 0 {
			continue
		}
		k := key{r.old, r.blen}
		ep := cache[k]
		if ep == nil {
			ep = rep(r.old.prog(), r.blen, r.old.extent)
			cache[k] = ep
		}
		b.add(seg{disp: r.disp, count: r.count, stride: r.stride, size: ep.size, sub: ep})
	}
	return b.finish()
}

// pack copies the packed bytes of one instance of p whose origin is
// mem[base] to the start of out, and returns how many it copied. It is the
// whole-element walk of Pack, without a callback per block.
func (p *prog) pack(mem []byte, base int, out []byte) int {
	k := 0
	for i := range p.segs {
		s := &p.segs[i]
		a := base + s.disp
		switch {
		case s.sub != nil:
			for range s.count {
				k += s.sub.pack(mem, a, out[k:])
				a += s.stride
			}
		case s.count == 1:
			k += copy(out[k:k+s.size], mem[a:a+s.size])
		case s.size == 8:
			for range s.count {
				binary.LittleEndian.PutUint64(out[k:], binary.LittleEndian.Uint64(mem[a:]))
				k += 8
				a += s.stride
			}
		case s.size == 4:
			for range s.count {
				binary.LittleEndian.PutUint32(out[k:], binary.LittleEndian.Uint32(mem[a:]))
				k += 4
				a += s.stride
			}
		default:
			for range s.count {
				copy(out[k:k+s.size], mem[a:a+s.size])
				k += s.size
				a += s.stride
			}
		}
	}
	return k
}

// unpack is the inverse of pack: it copies the start of in to the packed
// bytes of one instance of p whose origin is mem[base], and returns how
// many bytes of in it used.
func (p *prog) unpack(mem []byte, base int, in []byte) int {
	k := 0
	for i := range p.segs {
		s := &p.segs[i]
		a := base + s.disp
		switch {
		case s.sub != nil:
			for range s.count {
				k += s.sub.unpack(mem, a, in[k:])
				a += s.stride
			}
		case s.count == 1:
			k += copy(mem[a:a+s.size], in[k:k+s.size])
		case s.size == 8:
			for range s.count {
				binary.LittleEndian.PutUint64(mem[a:], binary.LittleEndian.Uint64(in[k:]))
				k += 8
				a += s.stride
			}
		case s.size == 4:
			for range s.count {
				binary.LittleEndian.PutUint32(mem[a:], binary.LittleEndian.Uint32(in[k:]))
				k += 4
				a += s.stride
			}
		default:
			for range s.count {
				copy(mem[a:a+s.size], in[k:k+s.size])
				k += s.size
				a += s.stride
			}
		}
	}
	return k
}
