// Command libmpich is adimpi as a C library with MPICH's ABI: built with
//
//	go build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,libmpich.so.12 -o libmpich.so.12 ./cmd/libmpich
//
// it replaces MPICH's libmpich.so.12, so that C programs compiled with
// mpicc.mpich run unmodified on adimpi's devices (mpirun does the build and
// sets LD_LIBRARY_PATH for them; see docs/c-abi.md).
//
// The exported functions are generated (go generate) from spec.txt, which
// lists every implemented function with its parameters, and abi_names.txt,
// the whole of MPICH's function list: zexport.go decodes the handles and
// calls the hand-written x<Name> translation of each implemented
// function, under its MPI_ and PMPI_ names; zstubs.c makes every other
// function fail with MPI_ERR_UNSUPPORTED_OPERATION; FUNCTIONS.md lists
// both.
//
// Handles are MPICH's ints: the predefined ones keep MPICH's values, user
// handles are allocated in the kind and object ranges MPICH uses and map
// to Go objects through tables (handles.go). Datatypes map to package
// datatype's types (types.go), error codes carry MPICH's classes and the
// message of the error (errors.go), and C callbacks (user operations, error
// handlers, attribute copy and delete functions) are called from Go
// (callbacks.go).
package main

//go:generate go run ./gen

// main is empty: the library's work is done by its exported functions,
// which C programs call. (Without cgo the package builds to nothing else.)
func main() {}
