package mpi

// This file holds what the C ABI layer (cmd/libmpich) needs from the core
// beyond the Go API proper.

// CallErrhandler runs c's error handler for err and returns err
// (MPI_Comm_call_errhandler): with ErrorsAreFatal it does not return. A nil
// c stands for MPI_COMM_WORLD.
func (c *Comm) CallErrhandler(err error) error {
	return c.raise(err)
}
