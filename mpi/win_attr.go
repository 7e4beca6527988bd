package mpi

// A window's attributes and error handler: its own, not its
// communicator's (MPI-3 §6.7.3 and §8.3.2).

// WinKeyval is an attribute key for caching values on windows
// (MPI_Win_create_keyval; dropping the last reference is
// MPI_Win_free_keyval). A window is never duplicated, so unlike a
// communicator's Keyval it has no Copy callback.
type WinKeyval struct {
	// Delete is called when the value is removed: DeleteAttr, SetAttr
	// replacing it, or Free of the window. Nil means nothing to do. An
	// error it returns is returned by the call that removed the value.
	Delete func(w *Win, value any) error

	predefined string // the MPI name of a predefined window attribute
}

func (k *WinKeyval) deleter() func(*Win, any) error { return k.Delete }
func (k *WinKeyval) builtin() string                { return k.predefined }

// The predefined window attribute keys; Attr computes their values, and
// SetAttr and DeleteAttr refuse them. Each is also a method of Win.
var (
	// KeyWinBase's value is this rank's window memory, a []byte (Base).
	KeyWinBase = &WinKeyval{predefined: "MPI_WIN_BASE"}
	// KeyWinSize's value is its size in bytes, an int (Size).
	KeyWinSize = &WinKeyval{predefined: "MPI_WIN_SIZE"}
	// KeyWinDispUnit's value is its displacement unit, an int (DispUnit).
	KeyWinDispUnit = &WinKeyval{predefined: "MPI_WIN_DISP_UNIT"}
	// KeyWinCreateFlavor's value is how it was made, a WinFlavor (Flavor).
	KeyWinCreateFlavor = &WinKeyval{predefined: "MPI_WIN_CREATE_FLAVOR"}
	// KeyWinModel's value is its memory model, a WinModel (Model).
	KeyWinModel = &WinKeyval{predefined: "MPI_WIN_MODEL"}
)

// SetAttr caches value on w under key k (MPI_Win_set_attr), running k's
// Delete callback on any value cached there before.
func (w *Win) SetAttr(k *WinKeyval, value any) error {
	const op = "MPI_Win_set_attr"
	if _, err := winStart(op, w); err != nil {
		return w.raise(err)
	}
	return w.raise(setAttr(op, &w.attrs, w, k, value))
}

// Attr returns the value cached on w under k (MPI_Win_get_attr), or for a
// predefined key (KeyWinBase, ...) its value.
func (w *Win) Attr(k *WinKeyval) (any, bool) {
	if w == nil || k == nil || w.freed {
		return nil, false
	}
	switch k {
	case KeyWinBase:
		return w.Base(), true
	case KeyWinSize:
		return w.Size(), true
	case KeyWinDispUnit:
		return w.DispUnit(), true
	case KeyWinCreateFlavor:
		return w.Flavor(), true
	case KeyWinModel:
		return w.Model(), true
	}
	return w.attrs.get(k)
}

// DeleteAttr removes the value cached on w under k, calling k's Delete
// callback (MPI_Win_delete_attr).
func (w *Win) DeleteAttr(k *WinKeyval) error {
	const op = "MPI_Win_delete_attr"
	if _, err := winStart(op, w); err != nil {
		return w.raise(err)
	}
	return w.raise(deleteAttr(op, &w.attrs, w, k))
}

// SetErrhandler sets w's error handler (MPI_Win_set_errhandler):
// ErrorsReturn (or nil), ErrorsAreFatal, or one of NewWinErrhandler. A
// window starts with ErrorsReturn, whatever its communicator's handler.
func (w *Win) SetErrhandler(h *Errhandler) error {
	const op = "MPI_Win_set_errhandler"
	if _, err := winStart(op, w); err != nil {
		return w.raise(err)
	}
	if h != nil && h.fn != nil {
		return w.raise(errorf(ErrArg, op, "the %s was made for communicators (NewErrhandler), not windows (NewWinErrhandler)", h))
	}
	if h == ErrorsReturn {
		h = nil
	}
	w.eh.Store(h)
	return nil
}

// GetErrhandler returns w's error handler (MPI_Win_get_errhandler).
func (w *Win) GetErrhandler() (*Errhandler, error) {
	if _, err := winStart("MPI_Win_get_errhandler", w); err != nil {
		return nil, w.raise(err)
	}
	if h := w.eh.Load(); h != nil {
		return h, nil
	}
	return ErrorsReturn, nil
}

// CallErrhandler runs w's error handler for err and returns err
// (MPI_Win_call_errhandler): with ErrorsAreFatal it does not return.
func (w *Win) CallErrhandler(err error) error { return w.raise(err) }

// raise runs w's error handler for err, the error a call on w is about to
// return, and returns err. A nil window (MPI_WIN_NULL) has none: its
// errors go to MPI_COMM_WORLD's, as MPI says.
func (w *Win) raise(err error) error {
	if err == nil {
		return nil
	}
	if w == nil {
		return (*Comm)(nil).raise(err)
	}
	w.eh.Load().apply(w.name, err, nil, w)
	return err
}
