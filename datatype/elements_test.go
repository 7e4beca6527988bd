package datatype

import "testing"

func TestElements(t *testing.T) {
	vec, _ := Vector(3, 2, 5, Float64) // 6 float64, 48 bytes
	st, _ := Struct([]int{1, 2}, []int{0, 8}, []*Type{Int32, Float64})
	nested, _ := Contiguous(2, st) // per element: int32, float64, float64 (20 bytes of data)
	for _, c := range []struct {
		t      *Type
		nbytes int
		want   int
	}{
		{Float64, 24, 3},
		{Float64, 20, -1},
		{vec, 48, 6},
		{vec, 96 + 16, 14},
		{vec, 13, -1},
		{st, 20, 3},
		{st, 4, 1},
		{st, 12, 2},
		{st, 6, -1},
		{nested, 40 + 24, 6 + 3 + 1},
		{nested, 44, 7},
		{Float64Int32, 12 * 2, 4},
		{Float64Int32, 8, 1},
		{Int32Int32, 0, 0},
	} {
		if got := c.t.Elements(c.nbytes); got != c.want {
			t.Errorf("%s.Elements(%d) = %d, want %d", c.t.Name(), c.nbytes, got, c.want)
		}
	}
}

func TestSignature(t *testing.T) {
	vec, _ := Vector(3, 2, 5, Float64)
	nested, _ := Contiguous(4, vec)
	mixed, _ := Struct([]int{1, 1}, []int{0, 8}, []*Type{Int32, Float64})
	if vec.Signature() != Float64.Signature() || nested.Signature() != Float64.Signature() || Float64.Signature() == 0 {
		t.Fatal("a vector of float64 must have float64's signature")
	}
	if Int32.Signature() == Float64.Signature() || Int.Signature() == Int64.Signature() {
		t.Fatal("distinct predefined types share a signature")
	}
	if mixed.Signature() != 0 || Byte.Signature() != 0 || Packed.Signature() != 0 {
		t.Fatal("mixed types, Byte and Packed must match anything")
	}
}
