package datatype

// part is one entry of a type's signature at one level: n copies of t.
type part struct {
	t *Type
	n int
}

// parts returns a derived type's signature one level down, in order. Every
// constructor but Struct repeats a single old type, so its signature is
// Size()/old.Size() copies of old's; a Struct lists its blocks; a pair type
// is its value followed by its index.
func (t *Type) parts() []part {
	if v, _ := t.PairValue(); v != nil {
		return []part{{v, 1}, {Int32, 1}}
	}
	if t.Predefined() {
		return nil
	}
	ints, _, types, err := t.GetContents()
	if err != nil || len(types) == 0 {
		return nil
	}
	if t.GetEnvelope().Combiner == CombinerStruct {
		ps := make([]part, 0, len(types))
		for i, old := range types {
			ps = append(ps, part{old, ints[1+i]})
		}
		return ps
	}
	old := types[0]
	if old.Size() == 0 {
		return nil
	}
	return []part{{old, t.Size() / old.Size()}}
}

// basic is the number of predefined (basic) elements in one element of t.
func (t *Type) basic() int {
	ps := t.parts()
	if ps == nil {
		if t.Size() == 0 {
			return 0
		}
		return 1
	}
	n := 0
	for _, p := range ps {
		n += p.n * p.t.basic()
	}
	return n
}

// Elements is the number of basic (predefined) elements in the first nbytes
// bytes of the packed data of a count of this type — what MPI_Get_elements
// reports for a receive of nbytes, including one that ended inside an
// element. It returns -1 if nbytes ends inside a basic element.
func (t *Type) Elements(nbytes int) int {
	if nbytes < 0 {
		return -1
	}
	if t.Size() == 0 {
		if nbytes == 0 {
			return 0
		}
		return -1
	}
	whole := nbytes / t.Size()
	n := whole * t.basic()
	rest := nbytes - whole*t.Size()
	if rest == 0 {
		return n
	}
	k, ok := t.partialElements(rest)
	if !ok {
		return -1
	}
	return n + k
}

// partialElements counts the basic elements in the first rest bytes of one
// element of t (rest < t.Size()).
func (t *Type) partialElements(rest int) (int, bool) {
	ps := t.parts()
	if ps == nil {
		return 0, rest == 0
	}
	n := 0
	for _, p := range ps {
		sz := p.t.Size()
		if sz == 0 {
			continue
		}
		if rest >= sz*p.n {
			n += p.n * p.t.basic()
			rest -= sz * p.n
			continue
		}
		k := rest / sz
		n += k * p.t.basic()
		rest -= k * sz
		if rest == 0 {
			return n, true
		}
		m, ok := p.t.partialElements(rest)
		return n + m, ok
	}
	return n, rest == 0
}

// Basic returns the one predefined type that all of t's data is made of
// (t itself for a predefined type), or nil if t mixes several or has none.
func (t *Type) Basic() *Type {
	if t.Predefined() {
		return t
	}
	var basic *Type
	for _, p := range t.parts() {
		if p.n == 0 || p.t.Size() == 0 {
			continue
		}
		b := p.t.Basic()
		if b == nil || (basic != nil && b != basic) {
			return nil
		}
		basic = b
	}
	return basic
}

// signatureTypes numbers the predefined types for Signature.
var signatureTypes = []*Type{Int, Int8, Int16, Int32, Int64, Uint, Uint8, Uint16, Uint32, Uint64,
	Uintptr, Float32, Float64, Complex64, Complex128, Float32Int32, Float64Int32, Int64Int32, Int32Int32, Int16Int32}

// Signature is a short code of t's type signature for matching checks
// between a sender and a receiver: the number of the one predefined type t
// is made of, or 0 when t may match anything that the code cannot describe
// (Byte, Packed, or a mix of types). Two nonzero codes that differ mean the
// signatures cannot match, which MPI forbids.
func (t *Type) Signature() uint32 {
	t.prog() // computes sig once, with the compiled form
	return t.sig
}

// signature computes Signature's code (prog caches it).
func (t *Type) signature() uint32 {
	b := t.Basic()
	for i, p := range signatureTypes {
		if p == b {
			return uint32(i + 1)
		}
	}
	return 0
}
