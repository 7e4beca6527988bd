package mpi

import (
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
	"golang.org/x/sys/cpu"
)

// The AVX2 kernels of opvec_amd64.s: inout[i] += in[i] over n bytes, n a
// multiple of vecBlock.
//
//go:noescape
func sumF64AVX2(in, inout unsafe.Pointer, n int)

//go:noescape
func sumF32AVX2(in, inout unsafe.Pointer, n int)

//go:noescape
func sumI64AVX2(in, inout unsafe.Pointer, n int)

//go:noescape
func sumI32AVX2(in, inout unsafe.Pointer, n int)

// vecSum returns the vector body of Sum on t, if this CPU has one: a
// function that folds the first multiple of vecBlock bytes.
func vecSum(t *datatype.Type) func(in, inout unsafe.Pointer, n int) {
	if !cpu.X86.HasAVX2 {
		return nil
	}
	switch t {
	case datatype.Float64, datatype.Complex128:
		return sumF64AVX2
	case datatype.Float32, datatype.Complex64:
		return sumF32AVX2
	case datatype.Int, datatype.Int64, datatype.Uint, datatype.Uint64, datatype.Uintptr:
		return sumI64AVX2
	case datatype.Int32, datatype.Uint32:
		return sumI32AVX2
	}
	return nil
}
