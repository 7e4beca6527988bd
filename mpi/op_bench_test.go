package mpi

import (
	"testing"

	"github.com/adimpi/adimpi/datatype"
)

func BenchmarkSumFloat64(b *testing.B) {
	in, inout := make([]byte, 1<<20), make([]byte, 1<<20)
	f := builtin(opSum, datatype.Float64)
	b.SetBytes(1 << 20)
	for i := 0; i < b.N; i++ {
		f(in, inout)
	}
}
