package datatype

import (
	"errors"
	"slices"
	"testing"
	"unsafe"
)

// must commits a constructor's type, panicking on errors.
func must(ty *Type, err error) *Type {
	if err != nil {
		panic(err)
	}
	if err := ty.Commit(); err != nil {
		panic(err)
	}
	return ty
}

func TestPairTypes(t *testing.T) {
	type fi struct {
		V float32
		I int32
	}
	type di struct {
		V float64
		I int32
	}
	type li struct {
		V int64
		I int32
	}
	type si struct {
		V int16
		I int32
	}
	for _, c := range []struct {
		ty                 *Type
		name               string
		val                *Type
		size, extent, ioff int
	}{
		{Float32Int32, "MPI_FLOAT_INT", Float32, 8, int(unsafe.Sizeof(fi{})), int(unsafe.Offsetof(fi{}.I))},
		{Float64Int32, "MPI_DOUBLE_INT", Float64, 12, int(unsafe.Sizeof(di{})), int(unsafe.Offsetof(di{}.I))},
		{Int64Int32, "MPI_LONG_INT", Int64, 12, int(unsafe.Sizeof(li{})), int(unsafe.Offsetof(li{}.I))},
		{Int32Int32, "MPI_2INT", Int32, 8, 8, 4},
		{Int16Int32, "MPI_SHORT_INT", Int16, 6, int(unsafe.Sizeof(si{})), int(unsafe.Offsetof(si{}.I))},
	} {
		v, voff := c.ty.PairValue()
		it, ioff := c.ty.PairIndex()
		if c.ty.Name() != c.name || c.ty.Kind() != KindPair || v != c.val || voff != 0 || it != Int32 || ioff != c.ioff ||
			c.ty.Size() != c.size || c.ty.Extent() != c.extent || !c.ty.Committed() || !c.ty.Predefined() {
			t.Errorf("%s: kind %v value %v@%d index %v@%d size %d extent %d", c.ty, c.ty.Kind(), v, voff, it, ioff, c.ty.Size(), c.ty.Extent())
		}
		if c.ty.Free() == nil || c.ty.GetEnvelope().Combiner != CombinerNamed {
			t.Errorf("%s: freeable or not named", c.ty)
		}
	}
	if v, _ := Float64.PairValue(); v != nil {
		t.Error("Float64 has a pair value")
	}
	// Two MPI_SHORT_INT elements: value bytes 0-1, index 4-7, then 8-9, 12-15.
	mem := make([]byte, Int16Int32.Span(2))
	for i := range mem {
		mem[i] = byte(i)
	}
	dst := make([]byte, 12)
	if _, err := Pack(dst, 0, mem, 2, Int16Int32); err != nil || !slices.Equal(dst, []byte{0, 1, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15}) {
		t.Errorf("pack MPI_SHORT_INT: %v %v", dst, err)
	}
}

func TestStructPaddingAndBounds(t *testing.T) {
	s := must(Struct([]int{1, 1}, []int{0, 8}, []*Type{Float64, Int8}))
	if s.Size() != 9 || s.Extent() != 16 || s.LB() != 0 || s.UB() != 16 || s.TrueExtent() != 9 {
		t.Errorf("struct{f64; i8}: size %d extent %d lb %d ub %d true extent %d", s.Size(), s.Extent(), s.LB(), s.UB(), s.TrueExtent())
	}
	r := must(Resized(s, -4, 12))
	if r.LB() != -4 || r.UB() != 8 || r.Extent() != 12 || r.TrueLB() != 0 || r.TrueExtent() != 9 {
		t.Errorf("resized: lb %d ub %d extent %d", r.LB(), r.UB(), r.Extent())
	}
	// A struct with a resized component is not padded.
	s2 := must(Struct([]int{1, 1}, []int{0, 12}, []*Type{r, Int8}))
	if s2.LB() != -4 || s2.UB() != 13 {
		t.Errorf("struct with resized: lb %d ub %d", s2.LB(), s2.UB())
	}
	v := must(Vector(3, 2, -4, Int32))
	if v.LB() != -32 || v.UB() != 8 || v.Extent() != 40 || v.TrueLB() != -32 || v.Size() != 24 {
		t.Errorf("vector negative stride: lb %d ub %d extent %d", v.LB(), v.UB(), v.Extent())
	}
}

func TestNegativeLBRule(t *testing.T) {
	// Blocks at -8 and +4 (int32s): true LB -8, true UB 8.
	ty := must(Hindexed([]int{1, 1}, []int{4, -8}, Int32))
	if ty.Origin() != 8 || ty.Span(1) != 16 || ty.Span(3) != 16+2*ty.Extent() {
		t.Fatalf("origin %d span %d extent %d", ty.Origin(), ty.Span(1), ty.Extent())
	}
	mem := make([]byte, ty.Span(2))
	for i := range mem {
		mem[i] = byte(i)
	}
	dst := make([]byte, 16)
	if _, err := Pack(dst, 0, mem, 2, ty); err != nil {
		t.Fatal(err)
	}
	// Element 0: origin at mem[8]: +4 -> mem[12..16], -8 -> mem[0..4];
	// element 1: origin at mem[24].
	want := []byte{12, 13, 14, 15, 0, 1, 2, 3, 28, 29, 30, 31, 16, 17, 18, 19}
	if !slices.Equal(dst, want) {
		t.Errorf("got %v want %v", dst, want)
	}
	if _, err := Pack(dst, 0, mem[:len(mem)-1], 2, ty); !errors.Is(err, ErrArg) {
		t.Errorf("short mem: %v", err)
	}
}

func TestErrors(t *testing.T) {
	if err := Float64.Free(); !errors.Is(err, ErrType) {
		t.Errorf("free predefined: %v", err)
	}
	v, err := Vector(2, 1, 2, Float64)
	if err != nil {
		t.Fatal(err)
	}
	mem := make([]byte, 64)
	if v.Committed() || v.Contiguous() {
		t.Error("uncommitted vector reports committed or contiguous")
	}
	if err := v.Blocks(mem, 1, 0, 8, func([]byte) error { return nil }); !errors.Is(err, ErrType) {
		t.Errorf("Blocks on uncommitted: %v", err)
	}
	if _, err := Pack(mem, 0, mem, 1, v); !errors.Is(err, ErrType) {
		t.Errorf("Pack of uncommitted: %v", err)
	}
	if _, err := NewSegment(v, 1); !errors.Is(err, ErrType) {
		t.Errorf("NewSegment of uncommitted: %v", err)
	}
	if err := v.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := v.Blocks(mem, 1, 4, 13, func([]byte) error { return nil }); !errors.Is(err, ErrArg) {
		t.Errorf("Blocks beyond the data: %v", err)
	}
	stop := errors.New("stop")
	if err := v.Blocks(mem, 2, 0, 32, func([]byte) error { return stop }); err != stop {
		t.Errorf("fn's error: %v", err)
	}
	if err := v.Free(); err != nil {
		t.Fatal(err)
	}
	if err := v.Free(); !errors.Is(err, ErrType) {
		t.Errorf("double free: %v", err)
	}
	if _, err := Contiguous(2, v); !errors.Is(err, ErrType) {
		t.Errorf("construct from freed: %v", err)
	}
	for _, c := range []struct {
		err   error
		class error
	}{
		{second(Contiguous(-1, Int)), ErrCount},
		{second(Contiguous(1, nil)), ErrType},
		{second(Vector(1, -1, 1, Int)), ErrCount},
		{second(Indexed([]int{1}, []int{1, 2}, Int)), ErrArg},
		{second(Struct([]int{1}, []int{0}, []*Type{nil})), ErrType},
		{second(Struct([]int{1}, []int{0}, nil)), ErrArg},
		{second(Resized(Int, 0, -1)), ErrArg},
		{second(Hvector(1<<40, 1<<40, 1, Int)), ErrCount},
		{second(Subarray([]int{4}, []int{5}, []int{0}, OrderC, Int)), ErrArg},
		{second(Darray(4, 0, []int{8}, []Distrib{DistributeBlock}, []int{1}, []int{4}, OrderC, Int)), ErrArg},
		{second(Darray(3, 0, []int{8}, []Distrib{DistributeBlock}, []int{DistributeDfltDarg}, []int{4}, OrderC, Int)), ErrArg},
	} {
		if !errors.Is(c.err, c.class) {
			t.Errorf("%v: want class %v", c.err, c.class)
		}
	}
}

func second(_ *Type, err error) error { return err }

func TestContents(t *testing.T) {
	v := must(Vector(3, 2, 5, Float32))
	st := must(Struct([]int{1, 2}, []int{0, 16}, []*Type{v, Int8}))
	e := st.GetEnvelope()
	ints, addrs, types, err := st.GetContents()
	if err != nil || e != (Envelope{3, 2, 2, CombinerStruct}) || !slices.Equal(ints, []int{2, 1, 2}) ||
		!slices.Equal(addrs, []int{0, 16}) || !slices.Equal(types, []*Type{v, Int8}) {
		t.Errorf("struct contents: %v %v %v %v %v", e, ints, addrs, types, err)
	}
	ints, _, types, _ = v.GetContents()
	if !slices.Equal(ints, []int{3, 2, 5}) || types[0] != Float32 || v.GetEnvelope().Combiner != CombinerVector {
		t.Errorf("vector contents: %v %v", ints, types)
	}
	if _, _, _, err := Int.GetContents(); !errors.Is(err, ErrType) {
		t.Errorf("contents of predefined: %v", err)
	}
	d := must(Dup(v))
	if d.GetEnvelope() != (Envelope{0, 0, 1, CombinerDup}) || !d.Committed() {
		t.Errorf("dup envelope %v", d.GetEnvelope())
	}
	sa := must(Subarray([]int{4, 6}, []int{2, 3}, []int{1, 2}, OrderC, Float64))
	ints, _, _, _ = sa.GetContents()
	if !slices.Equal(ints, []int{2, 4, 6, 2, 3, 1, 2, int(OrderC)}) || sa.Extent() != 4*6*8 || sa.LB() != 0 || sa.Size() != 48 {
		t.Errorf("subarray %v extent %d", ints, sa.Extent())
	}
}

// TestCompiledForm checks that Commit keeps regular layouts compact.
func TestCompiledForm(t *testing.T) {
	vv := must(Vector(100, 1, 3, must(Vector(50, 2, 4, Float64))))
	p := vv.prog()
	if len(p.segs) != 1 || p.segs[0].count != 100 || p.segs[0].sub == nil || len(p.segs[0].sub.segs) != 1 || p.segs[0].sub.segs[0].sub != nil {
		t.Errorf("vector of vectors: %+v", p.segs)
	}
	displs := make([]int, 1000)
	for i := range displs {
		displs[i] = 7 * i
	}
	ib := must(IndexedBlock(3, displs, Int32))
	if p := ib.prog(); len(p.segs) != 1 || p.segs[0].count != 1000 || p.segs[0].stride != 28 || p.segs[0].size != 12 {
		t.Errorf("regular indexed block: %+v", p.segs)
	}
	c := must(Contiguous(10, must(Struct([]int{1, 1}, []int{0, 4}, []*Type{Int32, Float32}))))
	if !c.Contiguous() || len(c.prog().segs) != 1 {
		t.Errorf("contiguous struct: %+v", c.prog().segs)
	}
	huge := must(Vector(1<<40, 1, 2, Byte))
	if huge.Size() != 1<<40 || len(huge.prog().segs) != 1 {
		t.Errorf("huge vector: %+v", huge.prog().segs)
	}
	if d, avail := huge.prog().locate(1<<40 - 1); d != 1<<41-2 || avail != 1 || huge.Span(1) != 1<<41-1 {
		t.Errorf("last byte of huge vector at %d (%d), span %d", d, avail, huge.Span(1))
	}
}

func TestFromStruct(t *testing.T) {
	type inner struct {
		A int8
		B [3]float64
	}
	type outer struct {
		X  int32
		In [2]inner
		Y  uint16
		Z  bool
		C  complex64
		_  [0]int
	}
	ty, err := FromStruct(outer{})
	if err != nil {
		t.Fatal(err)
	}
	if ty.Extent() != int(unsafe.Sizeof(outer{})) || !ty.Committed() || ty.Size() != 4+2*(1+24)+2+1+8 {
		t.Fatalf("extent %d size %d", ty.Extent(), ty.Size())
	}
	vals := []outer{{X: 1, In: [2]inner{{2, [3]float64{3, 4, 5}}, {6, [3]float64{7, 8, 9}}}, Y: 10, Z: true, C: 11}, {X: -1, Y: 99}}
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), len(vals)*int(unsafe.Sizeof(outer{})))
	packed := make([]byte, PackSize(2, ty))
	if _, err := Pack(packed, 0, mem, 2, ty); err != nil {
		t.Fatal(err)
	}
	got := make([]outer, 2)
	gmem := unsafe.Slice((*byte)(unsafe.Pointer(&got[0])), len(got)*int(unsafe.Sizeof(outer{})))
	if _, err := Unpack(packed, 0, gmem, 2, ty); err != nil {
		t.Fatal(err)
	}
	if got[0] != vals[0] || got[1] != vals[1] {
		t.Errorf("round trip: %+v", got)
	}
	type bad struct {
		A int
		S string
	}
	if _, err := FromStruct(&bad{}); !errors.Is(err, ErrType) {
		t.Errorf("string field: %v", err)
	}
	if _, err := FromStruct(3); !errors.Is(err, ErrType) {
		t.Errorf("not a struct: %v", err)
	}
}

func TestDarrayPartition(t *testing.T) {
	// The darrays of all ranks partition the global array.
	gs := []int{7, 5, 6}
	ds := []Distrib{DistributeCyclic, DistributeBlock, DistributeCyclic}
	da := []int{2, DistributeDfltDarg, DistributeDfltDarg}
	ps := []int{2, 3, 1}
	for _, order := range []Order{OrderC, OrderFortran} {
		seen := make([]int, 7*5*6*8)
		for r := range 6 {
			ty := must(Darray(6, r, gs, ds, da, ps, order, Float64))
			if ty.Extent() != len(seen) || ty.LB() != 0 {
				t.Fatalf("extent %d", ty.Extent())
			}
			mem := make([]byte, len(seen))
			_ = ty.Blocks(mem, 1, 0, ty.Size(), func(p []byte) error {
				b := pieceIndex(mem, p)
				for i := range p {
					seen[b+i]++
				}
				return nil
			})
		}
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("order %d: byte %d covered %d times", order, i, n)
			}
		}
	}
}

func TestDense(t *testing.T) {
	pos := must(Resized(must(Hindexed([]int{1}, []int{8}, Float64)), 8, 8))
	neg := must(Resized(must(Hindexed([]int{1}, []int{-8}, Float64)), -8, 8))
	for _, c := range []struct {
		ty     *Type
		start  int
		contig bool
	}{{pos, 8, false}, {neg, 0, true}} {
		if c.ty.Contiguous() != c.contig {
			t.Errorf("%s: Contiguous %v", c.ty, c.ty.Contiguous())
		}
		mem := make([]byte, c.ty.Span(3))
		var pieces [][2]int
		if err := c.ty.Blocks(mem, 3, 3, 20, func(p []byte) error {
			pieces = append(pieces, [2]int{pieceIndex(mem, p), len(p)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(pieces) != 1 || pieces[0] != [2]int{c.start + 3, 20} || len(mem) != c.start+24 {
			t.Errorf("%s: pieces %v of %d-byte mem", c.ty, pieces, len(mem))
		}
	}
}
