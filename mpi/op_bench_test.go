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

// BenchmarkSumFloat64Piece folds one piece of a large board reduction
// (boardPiece), which stays in cache: the kernel's own speed.
func BenchmarkSumFloat64Piece(b *testing.B) {
	in, inout := make([]byte, boardPiece), make([]byte, boardPiece)
	f := builtin(opSum, datatype.Float64)
	b.SetBytes(boardPiece)
	for i := 0; i < b.N; i++ {
		f(in, inout)
	}
}
