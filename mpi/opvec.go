package mpi

import (
	"unsafe"

	"github.com/adimpi/adimpi/datatype"
)

// vecBlock is the bytes a vector kernel folds per pass; a kernel's body
// takes the largest multiple of it, the Go loop the rest.
const vecBlock = 128

// withVector returns Sum's kernel on t with its body folded by the CPU's
// vector kernel (vecSum) where there is one, else scalar unchanged. Large
// reductions (an Allreduce of a megabyte) spend most of their time in this
// loop. Complex sums are element-wise sums of their float parts.
func withVector(code opCode, t *datatype.Type, scalar func(in, inout []byte)) func(in, inout []byte) {
	if code != opSum || scalar == nil {
		return scalar
	}
	vec := vecSum(t)
	if vec == nil {
		return scalar
	}
	return func(in, inout []byte) {
		n := min(len(in), len(inout))
		body := n / vecBlock * vecBlock
		if body > 0 {
			vec(unsafe.Pointer(unsafe.SliceData(in)), unsafe.Pointer(unsafe.SliceData(inout)), body)
		}
		if body < n {
			scalar(in[body:n], inout[body:n])
		}
	}
}
