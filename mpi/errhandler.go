package mpi

import (
	"fmt"
	"os"
)

// Errhandler says what happens when a call on a communicator fails
// (MPI_Errhandler). Every communicator has one: MPI_COMM_WORLD and
// MPI_COMM_SELF start with ErrorsReturn, and a new communicator (Dup, Idup,
// Split, Create, the topology constructors, IntercommCreate,
// IntercommMerge) inherits its parent's. Whatever the handler, a call that
// fails and returns still returns its error.
//
// The handler runs once for the error of each failing call of these on the
// communicator: the point-to-point calls and probes, the collectives
// (blocking, non-blocking, persistent, neighbourhood), the communicator
// constructors and Free, the topology calls and RemoteGroup
// (IntercommCreate: the local communicator's); and Wait, Test, Start and
// their multi-request forms, on the communicator of the request that
// failed. The attribute calls, Group and Compare return their errors
// without it. A call given MPI_COMM_NULL (a nil *Comm), or one on requests
// none of which is active, runs MPI_COMM_WORLD's handler.
//
// A window has a handler of its own, which its calls run (docs/rma.md):
// ErrorsReturn until Win.SetErrhandler sets ErrorsAreFatal or one of
// NewWinErrhandler, whatever its communicator's.
type Errhandler struct {
	name  string
	fatal bool
	fn    func(c *Comm, err error) // NewErrhandler's: for communicators
	win   func(w *Win, err error)  // NewWinErrhandler's: for windows
}

var (
	// ErrorsReturn returns the error to the caller and does nothing else
	// (MPI_ERRORS_RETURN): the default, as Go programs handle errors
	// themselves.
	ErrorsReturn = &Errhandler{name: "MPI_ERRORS_RETURN"}
	// ErrorsAreFatal prints the error, naming the rank and the
	// communicator, to stderr and aborts the job with exit status 1
	// (MPI_ERRORS_ARE_FATAL): the call does not return.
	ErrorsAreFatal = &Errhandler{name: "MPI_ERRORS_ARE_FATAL", fatal: true}
)

// NewErrhandler makes an error handler that calls fn with the communicator
// and the error before the failing call returns the error
// (MPI_Comm_create_errhandler). fn runs in the goroutine of the call; it
// may call MPI (Abort, for instance), but not, on the same communicator,
// anything that fails in turn.
func NewErrhandler(fn func(c *Comm, err error)) *Errhandler {
	return &Errhandler{name: "user error handler", fn: fn}
}

// NewWinErrhandler makes an error handler for windows that calls fn with
// the window and the error before the failing call returns the error
// (MPI_Win_create_errhandler); Win.SetErrhandler sets it. As with
// NewErrhandler, fn runs in the goroutine of the call.
func NewWinErrhandler(fn func(w *Win, err error)) *Errhandler {
	return &Errhandler{name: "user window error handler", win: fn}
}

// String is the handler's MPI name, or "user error handler".
func (h *Errhandler) String() string { return h.name }

// SetErrhandler sets c's error handler (MPI_Comm_set_errhandler); nil
// means ErrorsReturn.
func (c *Comm) SetErrhandler(h *Errhandler) error {
	if c == nil {
		return World().raise(errorf(ErrComm, "MPI_Comm_set_errhandler", "communicator is nil (MPI_COMM_NULL)"))
	}
	if h != nil && h.win != nil {
		return c.raise(errorf(ErrArg, "MPI_Comm_set_errhandler", "the %s was made for windows (NewWinErrhandler), not communicators", h))
	}
	if h == ErrorsReturn {
		h = nil
	}
	c.eh.Store(h)
	return nil
}

// GetErrhandler returns c's error handler (MPI_Comm_get_errhandler).
func (c *Comm) GetErrhandler() (*Errhandler, error) {
	if c == nil {
		return nil, World().raise(errorf(ErrComm, "MPI_Comm_get_errhandler", "communicator is nil (MPI_COMM_NULL)"))
	}
	if h := c.eh.Load(); h != nil {
		return h, nil
	}
	return ErrorsReturn, nil
}

// raise runs c's error handler for err, the error a call on c is about to
// return, and returns err. A nil c stands for MPI_COMM_WORLD.
func (c *Comm) raise(err error) error {
	if err == nil {
		return nil
	}
	name := "MPI_COMM_WORLD"
	if c != nil {
		name = c.Name()
	}
	c.handler().apply(name, err, c, nil)
	return err
}

// apply carries out h (nil: ErrorsReturn, nothing to do) for err, raised
// on communicator c or window w, named name: ErrorsAreFatal aborts the
// job, a handler of the program's is called.
func (h *Errhandler) apply(name string, err error, c *Comm, w *Win) {
	switch {
	case h == nil:
	case h.fatal:
		fatal(name, err)
	case h.fn != nil:
		h.fn(c, err)
	case h.win != nil:
		h.win(w, err)
	}
}

// handler is c's error handler, nil for ErrorsReturn.
func (c *Comm) handler() *Errhandler {
	if c == nil {
		r := live.Load()
		if r == nil {
			return nil
		}
		c = r.world
	}
	return c.eh.Load()
}

// inheritErrhandler gives c, a communicator made from parent, parent's
// handler.
func (c *Comm) inheritErrhandler(parent *Comm) {
	c.eh.Store(parent.eh.Load())
}

// fatal is ErrorsAreFatal: it prints err naming the rank and the
// communicator or window (name) it was raised on, aborts the job through
// the launcher and exits.
func fatal(name string, err error) {
	rank := -1
	r := live.Load()
	if r != nil {
		rank = r.rank
	}
	msg := fmt.Sprintf("%v (MPI_ERRORS_ARE_FATAL on %s)", err, name)
	fmt.Fprintf(os.Stderr, "rank %d: %s\n", rank, msg)
	if r != nil {
		_ = r.pmi.Abort(1, msg)
	}
	os.Exit(1)
}

// raise runs the error handler of q's communicator for err (that of
// MPI_COMM_WORLD for a nil q).
func (q *Request) raise(err error) error {
	if q == nil {
		return (*Comm)(nil).raise(err)
	}
	return q.comm.raise(err)
}

// planNow runs a checked collective now (blockingPlan), and planStart
// (startPlan) and planPersistent (persistentPlan) make its request; each
// runs c's error handler for the error it returns.
func (c *Comm) planNow(p *plan, err error) error { return c.raise(blockingPlan(p, err)) }

func (c *Comm) planStart(p *plan, err error) (*Request, error) {
	q, err := startPlan(p, err)
	return q, c.raise(err)
}

func (c *Comm) planPersistent(p *plan, err error) (*Request, error) {
	q, err := persistentPlan(p, err)
	return q, c.raise(err)
}
