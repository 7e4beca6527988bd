package datatype

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// fuzzInts decodes fuzz data into ints, small ones mostly, but also
// negative and huge ones.
type fuzzInts struct{ b []byte }

func (f *fuzzInts) int() int {
	if len(f.b) == 0 {
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	switch {
	case c < 0xc0:
		return int(c&0x3f) - 8
	case c < 0xf0:
		if len(f.b) < 2 {
			return int(c)
		}
		v := int(int16(binary.LittleEndian.Uint16(f.b)))
		f.b = f.b[2:]
		return v
	default:
		if len(f.b) < 8 {
			return -int(c)
		}
		v := int(binary.LittleEndian.Uint64(f.b))
		f.b = f.b[8:]
		return v
	}
}

func (f *fuzzInts) ints(max int) []int {
	n := f.int()
	if n < 0 || n > max {
		n = max
	}
	s := make([]int, n)
	for i := range s {
		s[i] = f.int()
	}
	return s
}

// refFeasible reports whether the naive reference can interpret t quickly.
func refFeasible(t *Type) bool {
	if t.Size() > 1<<12 || t.Predefined() {
		return t.Size() <= 1<<12
	}
	ints, _, types, _ := t.GetContents()
	if t.GetEnvelope().Combiner == CombinerDarray {
		for _, g := range ints[3 : 3+ints[2]] {
			if g > 1<<10 {
				return false
			}
		}
	}
	for _, o := range types {
		if !refFeasible(o) {
			return false
		}
	}
	return true
}

// FuzzConstructors feeds arbitrary arguments to the constructors: they must
// return an error or a type, never panic, and every type small enough is
// checked against the reference packer.
func FuzzConstructors(f *testing.F) {
	f.Add([]byte{1, 9, 10, 11, 2, 3, 4, 9})
	f.Add([]byte{2, 0xc8, 0xff, 0x7f, 9, 9, 1, 3, 0, 13, 8, 9})
	f.Add([]byte{5, 3, 9, 10, 11, 3, 0, 4, 12, 8, 1, 9, 10})
	f.Add([]byte{10, 2, 12, 13, 2, 9, 10, 2, 9, 9, 0, 0, 11, 10, 12, 1, 13, 8})
	f.Add([]byte{11, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xc1, 0, 0x80, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzInts{b: data}
		stack := append([]*Type(nil), leaves...)
		pick := func() *Type {
			i := in.int()
			if i < 0 {
				return nil
			}
			return stack[i%len(stack)]
		}
		for steps := 0; len(in.b) > 0 && steps < 8; steps++ {
			var ty *Type
			var err error
			switch op := in.int() & 15; op {
			case 0:
				ty, err = Contiguous(in.int(), pick())
			case 1:
				ty, err = Vector(in.int(), in.int(), in.int(), pick())
			case 2:
				ty, err = Hvector(in.int(), in.int(), in.int(), pick())
			case 3:
				ty, err = Indexed(in.ints(8), in.ints(8), pick())
			case 4:
				ty, err = Hindexed(in.ints(8), in.ints(8), pick())
			case 5:
				ty, err = IndexedBlock(in.int(), in.ints(8), pick())
			case 6:
				ty, err = HindexedBlock(in.int(), in.ints(8), pick())
			case 7:
				bl, d := in.ints(4), in.ints(4)
				ts := make([]*Type, max(0, in.int()%5))
				for i := range ts {
					ts[i] = pick()
				}
				ty, err = Struct(bl, d, ts)
			case 8:
				ty, err = Resized(pick(), in.int(), in.int())
			case 9:
				ty, err = Dup(pick())
			case 10:
				ty, err = Subarray(in.ints(3), in.ints(3), in.ints(3), Order(in.int()), pick())
			case 11:
				n := in.int() & 3
				gs, ds, da, ps := make([]int, n), make([]Distrib, n), make([]int, n), make([]int, n)
				for i := range n {
					gs[i], ds[i], da[i], ps[i] = in.int(), Distrib(in.int()), in.int(), in.int()
					if da[i] == -1 {
						da[i] = DistributeDfltDarg
					}
				}
				ty, err = Darray(in.int(), in.int(), gs, ds, da, ps, Order(in.int()), pick())
			case 12:
				if x := pick(); x != nil {
					_ = x.Free()
				}
				continue
			default:
				continue
			}
			if err != nil {
				if ty != nil {
					t.Fatalf("op returned both a type and %v", err)
				}
				continue
			}
			if ty.Extent() < 0 || ty.Size() < 0 || ty.TrueExtent() < 0 {
				t.Fatalf("%s: size %d extent %d true extent %d", ty, ty.Size(), ty.Extent(), ty.TrueExtent())
			}
			stack = append(stack, ty)
		}
		r := rand.New(rand.NewPCG(uint64(len(data)), 7))
		for _, ty := range stack[len(leaves):] {
			if ty.Freed() {
				continue
			}
			if err := ty.Commit(); err != nil {
				t.Fatal(err)
			}
			_ = ty.GetEnvelope()
			_, _, _, _ = ty.GetContents()
			if refFeasible(ty) && ty.Span(2) <= 1<<16 {
				checkType(t, r, ty, r.IntN(3))
			}
		}
	})
}
