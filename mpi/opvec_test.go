package mpi

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/adimpi/adimpi/datatype"
)

// TestSumKernelsVector: Sum's kernel on every predefined type (vector body
// and Go tail where the CPU has vector kernels) gives bit for bit what an
// element-wise Go loop gives, for lengths around the vector block and
// operands at every offset within a word; bytes past the operands stay
// untouched.
func TestSumKernelsVector(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		t   *datatype.Type
		ref func(in, inout []byte) // the element-wise loop
	}{
		{datatype.Float64, common[float64](opSum)},
		{datatype.Float32, common[float32](opSum)},
		{datatype.Complex128, common[complex128](opSum)},
		{datatype.Complex64, common[complex64](opSum)},
		{datatype.Int64, common[int64](opSum)},
		{datatype.Uint64, common[uint64](opSum)},
		{datatype.Int, common[int](opSum)},
		{datatype.Uintptr, common[uintptr](opSum)},
		{datatype.Int32, common[int32](opSum)},
		{datatype.Uint32, common[uint32](opSum)},
		{datatype.Int16, common[int16](opSum)},
		{datatype.Uint8, common[uint8](opSum)},
	} {
		es := tc.t.Size()
		kernel := builtin(opSum, tc.t)
		for _, count := range []int{0, 1, 3, vecBlock/es - 1, vecBlock / es, vecBlock/es + 1, 5*vecBlock/es + 3, 4099} {
			for _, off := range []int{0, 1, 4, 7} {
				n := count * es
				in, got, want := make([]byte, off+n+8), make([]byte, off+n+8), make([]byte, off+n+8)
				for i := range in {
					in[i], got[i] = byte(rng.Uint32()), byte(rng.Uint32())
				}
				if tc.t == datatype.Float64 || tc.t == datatype.Complex128 {
					// Finite values of every magnitude, so that the sums round.
					for i := off; i+8 <= off+n; i += 8 {
						putF64(in[i:], rng.NormFloat64()*math.Pow(10, float64(rng.IntN(20)-10)))
						putF64(got[i:], rng.NormFloat64()*math.Pow(10, float64(rng.IntN(20)-10)))
					}
				}
				copy(want, got)
				// The Go loops need aligned words: run the reference on
				// aligned copies.
				a, w := make([]byte, n), make([]byte, n)
				copy(a, in[off:off+n])
				copy(w, want[off:off+n])
				tc.ref(a, w)
				copy(want[off:], w)
				kernel(in[off:off+n], got[off:off+n])
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("Sum on %s, %d elements at offset %d: byte %d is %#x, want %#x", tc.t, count, off, i, got[i], want[i])
					}
				}
			}
		}
	}
}

func putF64(b []byte, v float64) {
	u := math.Float64bits(v)
	for i := range 8 {
		b[i] = byte(u >> (8 * i))
	}
}
