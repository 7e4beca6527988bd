package datatype

import (
	"fmt"
	"strings"
)

// Combiner says which constructor made a type (MPI_COMBINER_*).
type Combiner int

// The combiners. CombinerNamed is that of the predefined types.
const (
	CombinerNamed Combiner = iota
	CombinerDup
	CombinerContiguous
	CombinerVector
	CombinerHvector
	CombinerIndexed
	CombinerHindexed
	CombinerIndexedBlock
	CombinerHindexedBlock
	CombinerStruct
	CombinerSubarray
	CombinerDarray
	CombinerResized
)

var combinerNames = [...]string{"named", "dup", "contiguous", "vector", "hvector", "indexed",
	"hindexed", "indexed_block", "hindexed_block", "struct", "subarray", "darray", "resized"}

// String is the combiner's name, e.g. "vector".
func (c Combiner) String() string {
	if c >= 0 && int(c) < len(combinerNames) {
		return combinerNames[c]
	}
	return fmt.Sprintf("Combiner(%d)", int(c))
}

// Envelope is what MPI_Type_get_envelope returns: the lengths of the slices
// GetContents returns, and the combiner.
type Envelope struct {
	NumInts, NumAddrs, NumTypes int
	Combiner                    Combiner
}

// GetEnvelope describes the constructor call that made the type.
func (t *Type) GetEnvelope() Envelope {
	return Envelope{NumInts: len(t.ints), NumAddrs: len(t.addrs), NumTypes: len(t.types), Combiner: t.comb}
}

// GetContents returns the arguments of the constructor call that made the
// type, as MPI_Type_get_contents does: integer arguments (counts, block
// lengths, displacements in elements, and for Subarray and Darray the
// dimensions, Order and Distrib values) in ints, byte displacements,
// strides, lb and extent in addrs, and the old types in types, each in the
// order of the MPI call's arguments, with the count first. It returns an
// ErrType error for predefined types. The slices are copies.
func (t *Type) GetContents() (ints, addrs []int, types []*Type, err error) {
	if t.named {
		return nil, nil, nil, errorf(ErrType, "MPI_Type_get_contents", "%s is a predefined type", t)
	}
	return append([]int(nil), t.ints...), append([]int(nil), t.addrs...), append([]*Type(nil), t.types...), nil
}

// run is count blocks, stride bytes apart from disp on, of blen elements
// of old each (old.extent apart).
type run struct {
	disp, count, stride, blen int
	old                       *Type
}

func checkOld(op string, old *Type) error {
	if old == nil {
		return errorf(ErrType, op, "datatype is nil")
	}
	if old.freed.Load() {
		return errorf(ErrType, op, "datatype %s has been freed", old)
	}
	return nil
}

func checkCount(op, what string, n int) error {
	if n < 0 {
		return errorf(ErrCount, op, "%s %d is negative", what, n)
	}
	if n > limit {
		return errorf(ErrCount, op, "%s %d is too large", what, n)
	}
	return nil
}

// newRunType makes a run-based type and computes its size and bounds.
func newRunType(op string, comb Combiner, runs []run, ints, addrs []int, types []*Type) (*Type, error) {
	t := &Type{comb: comb, ints: ints, addrs: addrs, types: types, runs: runs, align: 1}
	var c calc
	first, tfirst := true, true
	for _, r := range runs {
		t.align = max(t.align, r.old.align)
		t.sticky = t.sticky || r.old.sticky
		if r.count == 0 || r.blen == 0 {
			continue
		}
		span := c.mul(r.count-1, r.stride)
		lo := c.add(r.disp, min(0, span))
		hi := c.add(r.disp, max(0, span))
		ext := c.mul(r.blen-1, r.old.extent)
		l, u := c.add(lo, r.old.lb), c.add(c.add(hi, r.old.ub), ext)
		if first || l < t.lb {
			t.lb = l
		}
		if first || u > t.ub {
			t.ub = u
		}
		first = false
		t.size = c.add(t.size, c.mul(c.mul(r.count, r.blen), r.old.size))
		if r.old.size > 0 {
			tl, tu := c.add(lo, r.old.trueLB), c.add(c.add(hi, r.old.trueUB), ext)
			if tfirst || tl < t.trueLB {
				t.trueLB = tl
			}
			if tfirst || tu > t.trueUB {
				t.trueUB = tu
			}
			tfirst = false
		}
	}
	if comb == CombinerStruct && !t.sticky && t.align > 1 {
		if m := (t.ub - t.lb) % t.align; m != 0 {
			t.ub += t.align - m
		}
	}
	t.extent = c.add(t.ub, -t.lb)
	if c.bad {
		return nil, errorf(ErrCount, op, "the type's size or bounds overflow")
	}
	t.name = typeName(comb, ints, types)
	return t, nil
}

func typeName(comb Combiner, ints []int, types []*Type) string {
	var b strings.Builder
	b.WriteString(comb.String())
	b.WriteByte('(')
	for i, x := range ints {
		if i == 8 {
			b.WriteString(",...")
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, x)
	}
	for i, ty := range types {
		if i == 4 {
			b.WriteString(";...")
			break
		}
		b.WriteByte(';')
		b.WriteString(ty.name)
	}
	b.WriteByte(')')
	return b.String()
}

// Contiguous makes a type of count consecutive elements of old
// (MPI_Type_contiguous).
func Contiguous(count int, old *Type) (*Type, error) {
	const op = "MPI_Type_contiguous"
	if err := checkOld(op, old); err != nil {
		return nil, err
	}
	if err := checkCount(op, "count", count); err != nil {
		return nil, err
	}
	return newRunType(op, CombinerContiguous, []run{{count: 1, blen: count, old: old}}, []int{count}, nil, []*Type{old})
}

// Vector makes a type of count blocks of blocklen elements of old, the
// blocks stride elements (multiples of old's extent, any sign) apart
// (MPI_Type_vector).
func Vector(count, blocklen, stride int, old *Type) (*Type, error) {
	const op = "MPI_Type_vector"
	if err := checkOld(op, old); err != nil {
		return nil, err
	}
	if err := checkCount(op, "count", count); err != nil {
		return nil, err
	}
	if err := checkCount(op, "blocklength", blocklen); err != nil {
		return nil, err
	}
	var c calc
	sb := c.mul(stride, old.extent)
	if c.bad {
		return nil, errorf(ErrArg, op, "stride %d overflows", stride)
	}
	return newRunType(op, CombinerVector, []run{{count: count, stride: sb, blen: blocklen, old: old}},
		[]int{count, blocklen, stride}, nil, []*Type{old})
}

// Hvector is Vector with the stride in bytes (MPI_Type_create_hvector).
func Hvector(count, blocklen, stride int, old *Type) (*Type, error) {
	const op = "MPI_Type_create_hvector"
	if err := checkOld(op, old); err != nil {
		return nil, err
	}
	if err := checkCount(op, "count", count); err != nil {
		return nil, err
	}
	if err := checkCount(op, "blocklength", blocklen); err != nil {
		return nil, err
	}
	if stride > limit || stride < -limit {
		return nil, errorf(ErrArg, op, "stride %d is too large", stride)
	}
	return newRunType(op, CombinerHvector, []run{{count: count, stride: stride, blen: blocklen, old: old}},
		[]int{count, blocklen}, []int{stride}, []*Type{old})
}

// indexedRuns checks the blocks of an indexed constructor and makes its runs;
// scale converts a displacement to bytes (old's extent, or 1).
func indexedRuns(op string, blocklens []int, fixed int, displs []int, old *Type, scale int) ([]run, error) {
	if err := checkOld(op, old); err != nil {
		return nil, err
	}
	if blocklens != nil && len(blocklens) != len(displs) {
		return nil, errorf(ErrArg, op, "%d block lengths but %d displacements", len(blocklens), len(displs))
	}
	if blocklens == nil {
		if err := checkCount(op, "blocklength", fixed); err != nil {
			return nil, err
		}
	}
	runs := make([]run, len(displs))
	var c calc
	for i, d := range displs {
		bl := fixed
		if blocklens != nil {
			bl = blocklens[i]
			if err := checkCount(op, fmt.Sprintf("blocklength[%d]", i), bl); err != nil {
				return nil, err
			}
		}
		runs[i] = run{disp: c.mul(d, scale), count: 1, blen: bl, old: old}
		if c.bad {
			return nil, errorf(ErrArg, op, "displacement[%d] %d overflows", i, d)
		}
	}
	return runs, nil
}

// Indexed makes a type of blocks of blocklens[i] elements of old at
// displacements displs[i], in multiples of old's extent (MPI_Type_indexed).
func Indexed(blocklens, displs []int, old *Type) (*Type, error) {
	const op = "MPI_Type_indexed"
	if blocklens == nil {
		blocklens = []int{}
	}
	runs, err := indexedRuns(op, blocklens, 0, displs, old, extentOf(old))
	if err != nil {
		return nil, err
	}
	ints := append(append([]int{len(blocklens)}, blocklens...), displs...)
	return newRunType(op, CombinerIndexed, runs, ints, nil, []*Type{old})
}

// Hindexed is Indexed with the displacements in bytes
// (MPI_Type_create_hindexed).
func Hindexed(blocklens, displs []int, old *Type) (*Type, error) {
	const op = "MPI_Type_create_hindexed"
	if blocklens == nil {
		blocklens = []int{}
	}
	runs, err := indexedRuns(op, blocklens, 0, displs, old, 1)
	if err != nil {
		return nil, err
	}
	return newRunType(op, CombinerHindexed, runs, append([]int{len(blocklens)}, blocklens...),
		append([]int(nil), displs...), []*Type{old})
}

// IndexedBlock is Indexed with every block blocklen elements long
// (MPI_Type_create_indexed_block).
func IndexedBlock(blocklen int, displs []int, old *Type) (*Type, error) {
	const op = "MPI_Type_create_indexed_block"
	runs, err := indexedRuns(op, nil, blocklen, displs, old, extentOf(old))
	if err != nil {
		return nil, err
	}
	ints := append([]int{len(displs), blocklen}, displs...)
	return newRunType(op, CombinerIndexedBlock, runs, ints, nil, []*Type{old})
}

// HindexedBlock is IndexedBlock with the displacements in bytes
// (MPI_Type_create_hindexed_block).
func HindexedBlock(blocklen int, displs []int, old *Type) (*Type, error) {
	const op = "MPI_Type_create_hindexed_block"
	runs, err := indexedRuns(op, nil, blocklen, displs, old, 1)
	if err != nil {
		return nil, err
	}
	return newRunType(op, CombinerHindexedBlock, runs, []int{len(displs), blocklen},
		append([]int(nil), displs...), []*Type{old})
}

func extentOf(t *Type) int {
	if t == nil {
		return 0
	}
	return t.extent
}

// Struct makes a type of blocks of blocklens[i] elements of types[i] at byte
// displacements displs[i] (MPI_Type_create_struct). As in C, unless some
// component has bounds set by Resized, the upper bound is padded so the
// extent is a multiple of the largest alignment of the components' basic
// types.
func Struct(blocklens, displs []int, types []*Type) (*Type, error) {
	const op = "MPI_Type_create_struct"
	if len(blocklens) != len(displs) || len(blocklens) != len(types) {
		return nil, errorf(ErrArg, op, "%d block lengths, %d displacements and %d types", len(blocklens), len(displs), len(types))
	}
	runs := make([]run, len(types))
	for i, ty := range types {
		if err := checkOld(op, ty); err != nil {
			return nil, err
		}
		if err := checkCount(op, fmt.Sprintf("blocklength[%d]", i), blocklens[i]); err != nil {
			return nil, err
		}
		if d := displs[i]; d > limit || d < -limit {
			return nil, errorf(ErrArg, op, "displacement[%d] %d is too large", i, d)
		}
		runs[i] = run{disp: displs[i], count: 1, blen: blocklens[i], old: ty}
	}
	return newRunType(op, CombinerStruct, runs, append([]int{len(blocklens)}, blocklens...),
		append([]int(nil), displs...), append([]*Type(nil), types...))
}

// Resized makes a type with old's data but lower bound lb and the given
// extent (MPI_Type_create_resized). A negative extent is not supported and
// returns an ErrArg error.
func Resized(old *Type, lb, extent int) (*Type, error) {
	const op = "MPI_Type_create_resized"
	if err := checkOld(op, old); err != nil {
		return nil, err
	}
	if extent < 0 || extent > limit || lb > limit || lb < -limit {
		return nil, errorf(ErrArg, op, "lb %d, extent %d: the extent must be in [0, 2^60] and lb in [-2^60, 2^60]", lb, extent)
	}
	t := &Type{comb: CombinerResized, addrs: []int{lb, extent}, types: []*Type{old}, inner: old,
		size: old.size, lb: lb, ub: lb + extent, extent: extent, trueLB: old.trueLB, trueUB: old.trueUB,
		align: old.align, sticky: true}
	t.name = fmt.Sprintf("resized(%d,%d;%s)", lb, extent, old.name)
	return t, nil
}

// Dup makes a copy of old (MPI_Type_dup): same layout, kind and pair parts,
// committed if old is.
func Dup(old *Type) (*Type, error) {
	const op = "MPI_Type_dup"
	if err := checkOld(op, old); err != nil {
		return nil, err
	}
	t := &Type{name: "dup(" + old.name + ")", comb: CombinerDup, types: []*Type{old}, inner: old,
		size: old.size, extent: old.extent, kind: old.kind, gotype: old.gotype,
		lb: old.lb, ub: old.ub, trueLB: old.trueLB, trueUB: old.trueUB, align: old.align, sticky: old.sticky,
		pairVal: old.pairVal, pairIdx: old.pairIdx}
	if old.Committed() {
		t.prog()
		t.committed.Store(true)
	}
	return t, nil
}

// Commit makes a derived type ready for communication (MPI_Type_commit),
// compiling it into the run form that Blocks, Segment, Pack and Unpack use.
// Committing a predefined or already committed type does nothing; a freed
// type gives an ErrType error.
func (t *Type) Commit() error {
	if t == nil {
		return errorf(ErrType, "MPI_Type_commit", "datatype is nil")
	}
	if t.named {
		return nil
	}
	if t.freed.Load() {
		return errorf(ErrType, "MPI_Type_commit", "datatype %s has been freed", t)
	}
	t.prog()
	t.committed.Store(true)
	return nil
}

// Free marks a derived type freed (MPI_Type_free): it can no longer be
// committed or used to construct types, while types already built from it,
// and communication already using it, are unaffected. Freeing a predefined
// type, or a type twice, gives an ErrType error.
func (t *Type) Free() error {
	const op = "MPI_Type_free"
	if t == nil {
		return errorf(ErrType, op, "datatype is nil")
	}
	if t.named {
		return errorf(ErrType, op, "predefined datatype %s cannot be freed", t)
	}
	if t.freed.Swap(true) {
		return errorf(ErrType, op, "datatype %s is already freed", t)
	}
	return nil
}

// Freed reports whether Free has been called on the type.
func (t *Type) Freed() bool { return t.freed.Load() }
