package mpi

// This file holds what the C ABI layer (cmd/libmpich) needs from the core
// beyond the Go API proper.

// CallErrhandler runs c's error handler for err and returns err
// (MPI_Comm_call_errhandler): with ErrorsAreFatal it does not return. A nil
// c stands for MPI_COMM_WORLD.
func (c *Comm) CallErrhandler(err error) error {
	return c.raise(err)
}

// SetErrhandler sets the error handler that w's calls raise their errors
// through (MPI_Win_set_errhandler); nil means ErrorsReturn. Until it is
// set, a window's calls raise nothing: they return their errors, and the
// C layer applies MPI_COMM_WORLD's handler to them, MPICH's rule.
func (w *Win) SetErrhandler(h *Errhandler) error {
	if _, err := winStart("MPI_Win_set_errhandler", w); err != nil {
		return err
	}
	return w.comm.SetErrhandler(h)
}

// CallErrhandler runs w's error handler for err and returns err
// (MPI_Win_call_errhandler).
func (w *Win) CallErrhandler(err error) error { return w.raise(err) }
