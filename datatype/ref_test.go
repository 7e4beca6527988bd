package datatype

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// refMap is the naive reference: the byte displacements, relative to the
// origin, of the packed bytes of one element of t, in packed order. It
// interprets the constructor tree through GetContents (Subarray and Darray
// by direct index arithmetic), independently of the compiled form.
func refMap(t *Type) []int {
	if t.Size() == 0 {
		return nil
	}
	if t.Predefined() {
		if v, _ := t.PairValue(); v != nil {
			it, off := t.PairIndex()
			m := seq(0, v.Size())
			return append(m, seq(off, it.Size())...)
		}
		return seq(0, t.Size())
	}
	ints, addrs, types, err := t.GetContents()
	if err != nil {
		panic(err)
	}
	var m []int
	put := func(old *Type, disp int) {
		for _, d := range refMap(old) {
			m = append(m, disp+d)
		}
	}
	switch t.GetEnvelope().Combiner {
	case CombinerDup, CombinerResized:
		return refMap(types[0])
	case CombinerContiguous:
		for i := range nz(types[0], ints[0]) {
			put(types[0], i*types[0].Extent())
		}
	case CombinerVector, CombinerHvector:
		ext := types[0].Extent()
		stride := 0
		if len(addrs) > 0 {
			stride = addrs[0]
		} else {
			stride = ints[2] * ext
		}
		for i := range ints[0] {
			for j := range nz(types[0], ints[1]) {
				put(types[0], i*stride+j*ext)
			}
		}
	case CombinerIndexed, CombinerHindexed:
		n, ext := ints[0], types[0].Extent()
		for i := range n {
			d := 0
			if len(addrs) > 0 {
				d = addrs[i]
			} else {
				d = ints[1+n+i] * ext
			}
			for j := range nz(types[0], ints[1+i]) {
				put(types[0], d+j*ext)
			}
		}
	case CombinerIndexedBlock, CombinerHindexedBlock:
		n, bl, ext := ints[0], ints[1], types[0].Extent()
		for i := range n {
			d := 0
			if len(addrs) > 0 {
				d = addrs[i]
			} else {
				d = ints[2+i] * ext
			}
			for j := range nz(types[0], bl) {
				put(types[0], d+j*ext)
			}
		}
	case CombinerStruct:
		for i := range ints[0] {
			for j := range nz(types[i], ints[1+i]) {
				put(types[i], addrs[i]+j*types[i].Extent())
			}
		}
	case CombinerSubarray:
		n := ints[0]
		sizes, subs, starts, order := ints[1:1+n], ints[1+n:1+2*n], ints[1+2*n:1+3*n], Order(ints[1+3*n])
		local := make([][]int, n)
		for i := range n {
			local[i] = seq(starts[i], subs[i])
		}
		arrayMap(sizes, local, order, types[0], put)
	case CombinerDarray:
		size, rank, n := ints[0], ints[1], ints[2]
		g, ds, da, ps := ints[3:3+n], ints[3+n:3+2*n], ints[3+2*n:3+3*n], ints[3+3*n:3+4*n]
		order := Order(ints[3+4*n])
		_ = size
		coords := make([]int, n)
		r := rank
		for i := n - 1; i >= 0; i-- {
			coords[i] = r % ps[i]
			r /= ps[i]
		}
		local := make([][]int, n)
		for i := range n {
			for j := range g[i] {
				var owner int
				switch Distrib(ds[i]) {
				case DistributeNone:
					owner = 0
				case DistributeBlock:
					b := da[i]
					if b == DistributeDfltDarg {
						b = (g[i] + ps[i] - 1) / ps[i]
					}
					owner = j / b
				case DistributeCyclic:
					b := da[i]
					if b == DistributeDfltDarg {
						b = 1
					}
					owner = (j / b) % ps[i]
				}
				if owner == coords[i] {
					local[i] = append(local[i], j)
				}
			}
		}
		arrayMap(g, local, order, types[0], put)
	default:
		panic("refMap: combiner " + t.GetEnvelope().Combiner.String())
	}
	return m
}

// arrayMap visits, in the array order, the elements whose index in dimension
// i is in local[i].
func arrayMap(sizes []int, local [][]int, order Order, old *Type, put func(*Type, int)) {
	n := len(sizes)
	strides := make([]int, n)
	s := old.Extent()
	for _, i := range dimOrder(n, order) {
		strides[i] = s
		s *= sizes[i]
	}
	var rec func(k, disp int)
	rec = func(k, disp int) {
		if k == n {
			put(old, disp)
			return
		}
		i := k // slowest first
		if order == OrderFortran {
			i = n - 1 - k
		}
		for _, j := range local[i] {
			rec(k+1, disp+j*strides[i])
		}
	}
	rec(0, 0)
}

// nz is n, or 0 if old has no data.
func nz(old *Type, n int) int {
	if old.Size() == 0 {
		return 0
	}
	return n
}

func seq(from, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = from + i
	}
	return s
}

// refIndices is the mem index of every packed byte of count elements of t.
func refIndices(t *Type, count int) []int {
	m := refMap(t)
	out := make([]int, 0, len(m)*count)
	for e := range count {
		for _, d := range m {
			out = append(out, t.Origin()+e*t.Extent()+d)
		}
	}
	return out
}

// gen makes random nested types.
type gen struct {
	r   *rand.Rand
	max int // largest size of a generated type
}

var leaves = []*Type{Int8, Int16, Int32, Float64, Complex128, Byte, Float64Int32, Int16Int32}

func (g *gen) small(lo, hi int) int { return lo + g.r.IntN(hi-lo+1) }

// cnt is a count or block length in [0, hi], rarely 0.
func (g *gen) cnt(hi int) int {
	if g.r.IntN(10) == 0 {
		return 0
	}
	return g.small(1, hi)
}

func (g *gen) typ(depth int) *Type {
	for {
		t, err := g.try(depth)
		if err != nil {
			panic(err)
		}
		if t.Size() == 0 && g.r.IntN(10) != 0 {
			continue
		}
		if t.Size() <= g.max && t.Extent() <= 64*g.max && t.TrueExtent() <= 64*g.max {
			return t
		}
	}
}

func (g *gen) try(depth int) (*Type, error) {
	if depth == 0 {
		return leaves[g.r.IntN(len(leaves))], nil
	}
	old := g.typ(depth - 1)
	ext := max(old.Extent(), 1)
	switch g.r.IntN(12) {
	case 0:
		return Contiguous(g.cnt(4), old)
	case 1:
		return Vector(g.cnt(5), g.cnt(3), g.small(-4, 4), old)
	case 2:
		return Hvector(g.cnt(5), g.cnt(3), g.small(-3*ext, 3*ext), old)
	case 3, 4:
		n := g.cnt(5)
		bl, d := make([]int, n), make([]int, n)
		for i := range n {
			bl[i], d[i] = g.cnt(3), g.small(-6, 6)
		}
		if g.r.IntN(2) == 0 {
			return Indexed(bl, d, old)
		}
		for i := range d {
			d[i] = g.small(-4*ext, 4*ext)
		}
		return Hindexed(bl, d, old)
	case 5:
		n := g.cnt(6)
		d := make([]int, n)
		reg := g.r.IntN(2) == 0
		step := g.small(-3, 3)
		for i := range n {
			if reg {
				d[i] = i * step
			} else {
				d[i] = g.small(-6, 6)
			}
		}
		if g.r.IntN(2) == 0 {
			return IndexedBlock(g.cnt(3), d, old)
		}
		for i := range d {
			d[i] *= ext + g.small(-1, 1)
		}
		return HindexedBlock(g.cnt(3), d, old)
	case 6, 7:
		n := g.small(1, 4)
		bl, d, ts := make([]int, n), make([]int, n), make([]*Type, n)
		for i := range n {
			ts[i] = old
			if i > 0 {
				ts[i] = g.typ(g.r.IntN(depth))
			}
			bl[i], d[i] = g.cnt(3), g.small(-4*ext, 4*ext)
		}
		return Struct(bl, d, ts)
	case 8:
		return Resized(old, g.small(-2*ext, 2*ext), g.small(0, 3*ext))
	case 9:
		return Dup(old)
	case 10:
		n := g.small(1, 3)
		sz, sub, st := make([]int, n), make([]int, n), make([]int, n)
		for i := range n {
			sz[i] = g.small(1, 5)
			sub[i] = g.small(1, sz[i])
			st[i] = g.small(0, sz[i]-sub[i])
		}
		return Subarray(sz, sub, st, Order(g.r.IntN(2)), old)
	default:
		n := g.small(1, 3)
		gs, ds, da, ps := make([]int, n), make([]Distrib, n), make([]int, n), make([]int, n)
		size := 1
		for i := range n {
			gs[i] = g.small(1, 7)
			ds[i] = Distrib(g.r.IntN(3))
			ps[i] = g.small(1, 3)
			da[i] = DistributeDfltDarg
			switch ds[i] {
			case DistributeNone:
				ps[i] = 1
			case DistributeBlock:
				if g.r.IntN(2) == 0 {
					da[i] = (gs[i]+ps[i]-1)/ps[i] + g.small(0, 2)
				}
			case DistributeCyclic:
				if g.r.IntN(2) == 0 {
					da[i] = g.small(1, 4)
				}
			}
			size *= ps[i]
		}
		return Darray(size, g.r.IntN(size), gs, ds, da, ps, Order(g.r.IntN(2)), old)
	}
}

// pieceIndices expands the pieces Blocks or Next return into mem indices.
func pieceIndex(mem, p []byte) int {
	if len(p) == 0 {
		return 0
	}
	return int(uintptr(unsafe.Pointer(&p[0])) - uintptr(unsafe.Pointer(&mem[0])))
}

func checkType(t *testing.T, r *rand.Rand, ty *Type, count int) {
	t.Helper()
	if err := ty.Commit(); err != nil {
		t.Fatal(err)
	}
	desc := fmt.Sprintf("%s ×%d (size %d, extent %d, trueLB %d, trueExtent %d)", ty, count, ty.Size(), ty.Extent(), ty.TrueLB(), ty.TrueExtent())
	m := refMap(ty)
	if len(m) != ty.Size() {
		t.Fatalf("%s: reference has %d bytes", desc, len(m))
	}
	if len(m) > 0 && (slices.Min(m) != ty.TrueLB() || slices.Max(m)+1 != ty.TrueLB()+ty.TrueExtent()) {
		t.Fatalf("%s: reference true bounds [%d, %d]", desc, slices.Min(m), slices.Max(m)+1)
	}
	idx := refIndices(ty, count)
	span := ty.Span(count)
	if len(idx) > 0 {
		lo, hi := slices.Min(idx), slices.Max(idx)
		if lo < 0 || hi+1 != span {
			t.Fatalf("%s: data occupies mem [%d, %d] but Span is %d", desc, lo, hi, span)
		}
		if ty.TrueLB() < 0 && lo != 0 {
			t.Fatalf("%s: negative true LB but lowest data at mem[%d]", desc, lo)
		}
	}
	mem := make([]byte, span)
	for i := range mem {
		mem[i] = byte(r.Uint32())
	}
	total := len(idx)
	// Pack and Unpack, whole.
	want := make([]byte, total+3)
	for k, i := range idx {
		want[k+3] = mem[i]
	}
	got := make([]byte, total+3)
	pos, err := Pack(got, 3, mem, count, ty)
	if err != nil || pos != total+3 || !slices.Equal(got[3:], want[3:]) {
		t.Fatalf("%s: Pack = %d, %v\n got %v\nwant %v", desc, pos, err, got[3:], want[3:])
	}
	out := make([]byte, span)
	wantMem := make([]byte, span)
	for k, i := range idx {
		wantMem[i] = want[k+3]
	}
	pos, err = Unpack(want, 3, out, count, ty)
	if err != nil || pos != total+3 || !slices.Equal(out, wantMem) {
		t.Fatalf("%s: Unpack = %d, %v\n got %v\nwant %v", desc, pos, err, out, wantMem)
	}
	// Blocks and Segment over random windows.
	for range 8 {
		off := r.IntN(total + 1)
		n := r.IntN(total - off + 1)
		var gotIdx []int
		err := ty.Blocks(mem, count, off, n, func(p []byte) error {
			if len(p) == 0 {
				t.Fatalf("%s: empty piece", desc)
			}
			b := pieceIndex(mem, p)
			for j := range p {
				gotIdx = append(gotIdx, b+j)
			}
			return nil
		})
		if err != nil || !slices.Equal(gotIdx, idx[off:off+n]) && !(n == 0 && len(gotIdx) == 0) {
			t.Fatalf("%s: Blocks(%d, %d) = %v\n got %v\nwant %v", desc, off, n, err, gotIdx, idx[off:off+n])
		}
		s, err := NewSegment(ty, count)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Seek(off); err != nil {
			t.Fatal(err)
		}
		gotIdx = gotIdx[:0]
		for {
			p, ok := s.Next(mem, 1+r.IntN(17))
			if !ok {
				break
			}
			b := pieceIndex(mem, p)
			for j := range p {
				gotIdx = append(gotIdx, b+j)
			}
		}
		if !slices.Equal(gotIdx, idx[off:]) && !(off == total && len(gotIdx) == 0) {
			t.Fatalf("%s: Segment from %d\n got %v\nwant %v", desc, off, gotIdx, idx[off:])
		}
	}
}

func TestRandomTypes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	g := &gen{r: r, max: 512}
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := range n {
		depth := 1 + i%5
		ty := g.typ(depth)
		checkType(t, r, ty, r.IntN(4))
	}
}

func TestDeepTypes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	g := &gen{r: r, max: 2048}
	for range 300 {
		ty := g.typ(4 + r.IntN(3))
		checkType(t, r, ty, 1+r.IntN(3))
	}
}
